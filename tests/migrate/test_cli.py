"""``petastream migrate``: modes, exit codes, summary, JSON report, walking, parallelism."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from petastream.migrate.runner import Progress

from .conftest import write_tree

CLEAN_AFTER_MIGRATION = {
    "train.py": """
        from petastorm.spark import SparkDatasetConverter, make_spark_converter
        conv = make_spark_converter(df)
        """,
    "requirements.txt": "petastorm==0.12.1\nnumpy\n",
    "README.md": "pip install petastorm\n",  # not a file kind we touch
}
WITH_MANUAL_ITEMS = {
    "loader.py": """
        from petastorm import TransformSpec
        from petastorm.hdfs.namenode import HdfsNamenodeResolver
        fs = HdfsNamenodeResolver(url).filesystem()
        loader = converter.make_torch_dataloader(transform_spec=TransformSpec(fn))
        """,  # TransformSpec moves; petastorm.hdfs has no compat equivalent and stays
}


def read(root: Path, name: str) -> str:
    return (root / name).read_text(encoding="utf-8")


def test_default_prints_a_diff_and_writes_nothing(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, CLEAN_AFTER_MIGRATION)
    before = read(tmp_path, "train.py")
    run = run_cli(".", cwd=tmp_path)
    assert run.code == 0
    assert "--- a/train.py\n+++ b/train.py\n" in run.out
    assert "-from petastorm.spark import SparkDatasetConverter, make_spark_converter\n" in run.out
    assert "+from petastream.compat import SparkDatasetConverter, make_spark_converter\n" in run.out
    assert "+petastream[spark]\n" in run.out
    assert read(tmp_path, "train.py") == before
    assert run.err.strip().splitlines()[-1] == (
        "petastream migrate: 2 file(s) scanned, 2 would change, 0 flagged (0 manual item(s)), "
        "0 error(s) (nothing written; run with --write to apply)"
    )


def test_the_diff_applies_with_git_apply(tmp_path: Path, run_cli) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    write_tree(tmp_path / "a", CLEAN_AFTER_MIGRATION)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    diff = run_cli(".", cwd=tmp_path / "a").out
    (tmp_path / "patch.diff").write_text(diff, encoding="utf-8")
    subprocess.run(["git", "apply", str(tmp_path / "patch.diff")], cwd=tmp_path / "a", check=True)
    assert run_cli("--write", ".", cwd=tmp_path / "b").code == 0
    for name in ("train.py", "requirements.txt"):
        assert read(tmp_path / "a", name) == read(tmp_path / "b", name)


def test_write_then_nothing_left_to_do(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, CLEAN_AFTER_MIGRATION)
    run = run_cli("--write", ".", cwd=tmp_path)
    assert (run.code, run.out) == (0, "")
    assert read(tmp_path, "train.py").startswith("from petastream.compat import")
    assert read(tmp_path, "requirements.txt") == "petastream[spark]\nnumpy\n"
    assert "2 changed" in run.err
    second = run_cli("--check", ".", cwd=tmp_path)
    assert (second.code, second.out) == (0, "")
    assert "0 would change" in second.err


def test_check_exits_1_when_anything_would_change(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, CLEAN_AFTER_MIGRATION)
    run = run_cli("--check", ".", cwd=tmp_path)
    assert run.code == 1
    assert "+++ b/train.py" in run.out
    assert read(tmp_path, "requirements.txt") == "petastorm==0.12.1\nnumpy\n"


def test_manual_items_exit_3_in_every_mode_once_nothing_is_pending(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, WITH_MANUAL_ITEMS)
    assert run_cli("--check", ".", cwd=tmp_path).code == 1  # a rewrite is pending: that wins
    for args in ([], ["--write"], ["--check"]):
        run = run_cli(*args, ".", cwd=tmp_path)
        assert run.code == 3, args
    assert read(tmp_path, "loader.py").splitlines()[:2] == [  # isort order kept
        "from petastorm.hdfs.namenode import HdfsNamenodeResolver",
        "from petastream.compat import TransformSpec",
    ]
    assert "loader.py: 1 item(s) to migrate by hand" in run.err
    assert (
        "  loader.py:1: petastorm.hdfs.namenode.HdfsNamenodeResolver is not provided by petastream.compat "
        "(also used at 3)"
    ) in run.err
    assert "      suggestion: pass the hdfs:// URL to make_reader from petastream.compat" in run.err


def test_todo_flag_writes_comments(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, WITH_MANUAL_ITEMS)
    assert run_cli("--write", "--todo", ".", cwd=tmp_path).code == 3
    text = read(tmp_path, "loader.py")
    assert text.startswith(
        "# TODO(petastream): petastorm.hdfs.namenode.HdfsNamenodeResolver is not provided by petastream.compat; "
    )
    assert run_cli("--check", "--todo", ".", cwd=tmp_path).out == ""  # idempotent


def test_unparseable_file_is_an_error_and_the_others_are_still_processed(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {**CLEAN_AFTER_MIGRATION, "broken.py": "from petastorm.spark import (\n",
                          "magic.py": "import petastorm\n!pip install x\n"})
    (tmp_path / "latin1.py").write_bytes("# caf\xe9\nimport petastorm\n".encode("latin-1"))
    run = run_cli("--write", ".", cwd=tmp_path)
    assert run.code == 2
    assert "error: broken.py: does not parse: line " in run.err
    # CPython's account, at the line itself (LibCST's names the next one)
    assert "error: magic.py: does not parse: line 2, column 1: invalid syntax" in run.err
    assert "error: latin1.py: not UTF-8 text" in run.err
    assert read(tmp_path, "train.py").startswith("from petastream.compat import")
    assert "3 error(s)" in run.err


def test_json_report(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {**CLEAN_AFTER_MIGRATION, **WITH_MANUAL_ITEMS, "broken.py": "import petastorm(\n"})
    report_path = tmp_path / "out" / "report.json"
    report_path.parent.mkdir()
    run = run_cli("--report", str(report_path), ".", cwd=tmp_path)
    assert run.code == 2
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["tool"] == "petastream migrate"
    assert (report["version"], report["mode"], report["exit_code"]) == (2, "diff", 2)
    assert report["summary"] == {
        "files_scanned": 4,
        "files_changed": 3,
        "files_flagged": 2,  # loader.py, and requirements.txt keeps petastorm for it
        "files_errored": 1,
        "manual_items": 2,
        "notes": 0,
        "petastorm_uses_left": 1,
    }
    files = {f["path"]: f for f in report["files"]}
    assert sorted(files) == ["broken.py", "loader.py", "requirements.txt", "train.py"]
    (kept,) = files["requirements.txt"]["items"]
    assert kept["code"] == "petastorm-kept" and "loader.py:2" in kept["message"]
    assert files["broken.py"]["error"].startswith("does not parse")
    assert files["train.py"] == {
        "path": "train.py",
        "kind": "python",
        "changed": True,
        "written": False,
        "error": None,
        "items": [],
    }
    (item,) = files["loader.py"]["items"]
    assert item == {
        "line": 2,
        "column": 36,
        "cell": None,
        "code": "unsupported-import",
        "location": "loader.py:2",
        "message": "petastorm.hdfs.namenode.HdfsNamenodeResolver is not provided by petastream.compat",
        "suggestion": item["suggestion"],
        "uses": ["3"],
        "severity": "manual",
        "keeps_petastorm": True,
    }
    assert "core-site.xml" in item["suggestion"]


def test_notebook_items_carry_their_cell(tmp_path: Path, run_cli) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": ["%pip install petastorm\n", "from petastorm.hdfs.namenode import HdfsNamenodeResolver"]},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")
    run = run_cli("--report", "r.json", "nb.ipynb", cwd=tmp_path)
    assert run.code == 3
    assert "  nb.ipynb:cell 2:2: petastorm.hdfs.namenode.HdfsNamenodeResolver is not provided" in run.err
    item = json.loads(read(tmp_path, "r.json"))["files"][0]["items"][0]
    assert (item["cell"], item["line"], item["location"]) == (2, 2, "nb.ipynb:cell 2:2")
    # the notebook still imports Petastorm's HDFS helper: its %pip keeps petastorm, adds petastream
    assert '+    "%pip install petastorm \\"petastream[spark]\\"\\n",' in run.out


def test_skips_vcs_virtualenvs_site_packages_and_checkpoints(tmp_path: Path, run_cli) -> None:
    legacy = "from petastorm.spark import make_spark_converter\n"
    write_tree(
        tmp_path,
        {
            "app/main.py": legacy,
            ".git/hooks/x.py": legacy,
            "env/lib/python3.11/site-packages/pkg/mod.py": legacy,
            "myenv/lib/mod.py": legacy,
            "myenv/pyvenv.cfg": "home = /usr/bin\n",
            "vendor/site-packages/mod.py": legacy,
            "nb/.ipynb_checkpoints/x-checkpoint.py": legacy,
            "node_modules/x.py": legacy,
            "build/lib/x.egg-info/x.py": legacy,
        },
    )
    run = run_cli("--check", ".", cwd=tmp_path)
    assert run.code == 1
    assert [line for line in run.out.splitlines() if line.startswith("+++")] == ["+++ b/app/main.py"]
    assert "1 file(s) scanned" in run.err
    # a file named explicitly is processed wherever it is
    assert run_cli("--check", "myenv/lib/mod.py", cwd=tmp_path).code == 1


def test_exclude(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {"a/x.py": "import petastorm\n", "b/y.py": "import petastorm\n"})
    run = run_cli("--exclude", "a", "--exclude", "*/skip_*.py", ".", cwd=tmp_path)
    assert "+++ b/b/y.py" in run.out and "a/x.py" not in run.out + run.err


def test_missing_path_and_unknown_file_type(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {"notes.md": "petastorm\n", "ok.py": "x = 1\n"})
    run = run_cli("nope", "notes.md", "ok.py", cwd=tmp_path)
    assert run.code == 2
    assert "error: nope: no such file or directory" in run.err
    assert "error: notes.md: not a file petastream migrate handles" in run.err


def test_parallel_run_gives_the_same_results(tmp_path: Path, run_cli) -> None:
    for i in range(12):
        write_tree(tmp_path, {f"pkg{i}/mod.py": "import petastorm\nc = petastorm.spark.make_spark_converter(df)\n"})
    write_tree(tmp_path, WITH_MANUAL_ITEMS)
    serial = run_cli("--report", "serial.json", ".", cwd=tmp_path)
    parallel = run_cli("-j", "3", "--report", "parallel.json", ".", cwd=tmp_path)
    assert (serial.code, serial.out, serial.err) == (parallel.code, parallel.out, parallel.err)
    assert read(tmp_path, "serial.json").replace("serial", "") == read(tmp_path, "parallel.json")


def test_bad_jobs_value(run_cli) -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli("-j", "-2", ".")
    assert exc.value.code == 2


def test_quiet_prints_errors_and_counts_only(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {**WITH_MANUAL_ITEMS, "broken.py": "import petastorm(\n"})
    run = run_cli("-q", ".", cwd=tmp_path)
    assert run.out == ""
    lines = run.err.strip().splitlines()
    assert lines[0].startswith("error: broken.py:") and lines[1].startswith("petastream migrate: 2 file(s)")
    assert len(lines) == 2


def test_bom_and_crlf_survive_a_write(tmp_path: Path, run_cli) -> None:
    path = tmp_path / "win.py"
    path.write_bytes(b"\xef\xbb\xbfimport os\r\nfrom petastorm.spark import make_spark_converter\r\n")
    assert run_cli("--write", "win.py", cwd=tmp_path).code == 0
    assert path.read_bytes() == b"\xef\xbb\xbfimport os\r\nfrom petastream.compat import make_spark_converter\r\n"


def test_progress_counter_shows_only_for_many_files() -> None:
    stream = io.StringIO()
    progress = Progress(stream, minimum=5, tty=True)
    progress.start(20)
    for _ in range(20):
        progress.advance()
    progress.finish()
    assert "\rpetastream migrate: 10/20 files" in stream.getvalue()
    assert stream.getvalue().endswith("\r\033[K")
    few = io.StringIO()
    progress = Progress(few, minimum=5, tty=True)
    progress.start(3)
    for _ in range(3):
        progress.advance()
    progress.finish()
    assert few.getvalue() == ""


def test_no_carriage_return_counter_when_stderr_is_not_a_terminal(tmp_path: Path, run_cli) -> None:
    for i in range(60):
        write_tree(tmp_path, {f"m{i}.py": "import os\n"})
    assert "\r" not in run_cli(".", cwd=tmp_path).err


def test_progress_in_a_log_is_a_line_every_interval() -> None:
    # issue #29 item 14: piped (CI), nothing showed until the end of a 255 s run
    ticks = iter([0.0, 1.0, 4.9, 5.0, 6.0, 10.5, 11.0])
    stream = io.StringIO()
    progress = Progress(stream, tty=False, interval=5, clock=lambda: next(ticks))
    progress.start(6)
    for _ in range(6):
        progress.advance()
    progress.finish()
    assert stream.getvalue() == (
        "petastream migrate: 3/6 files (5 s)\npetastream migrate: 5/6 files (10 s)\n"
    )  # a short run (or a few files) prints nothing: the first line comes after one interval


def test_progress_lines_reach_stderr_when_it_is_not_a_terminal(
    tmp_path: Path, run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(tmp_path, {**CLEAN_AFTER_MIGRATION, "other.py": "import os\n"})
    monkeypatch.setattr("petastream.migrate.runner.PROGRESS_INTERVAL_S", 0.0, raising=False)  # every file
    run = run_cli("-j", "1", ".", cwd=tmp_path)
    assert run.code == 0, run.err
    progress = [line for line in run.err.splitlines() if " files (" in line]
    assert progress[-1].startswith("petastream migrate: 3/3 files (")
    assert "\r" not in run.err


def test_console_script_in_a_subprocess(tmp_path: Path) -> None:
    write_tree(tmp_path, {**CLEAN_AFTER_MIGRATION, **WITH_MANUAL_ITEMS})
    script = Path(sys.executable).with_name("petastream")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "petastream.cli"]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    check = subprocess.run([*command, "migrate", "--check", "."], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert check.returncode == 1
    assert "+++ b/train.py" in check.stdout
    assert "3 file(s) scanned, 3 would change, 2 flagged" in check.stderr
    write = subprocess.run([*command, "migrate", "--write", "-j", "2", "."], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert write.returncode == 3  # loader.py still has HdfsNamenodeResolver
    assert read(tmp_path, "train.py").startswith("from petastream.compat import")
    helptext = subprocess.run([*command, "migrate", "--help"], capture_output=True, text=True, env=env)
    assert helptext.returncode == 0
    assert "--write" in helptext.stdout and "exit status" in helptext.stdout
    assert "3  nothing to rewrite, but manual items remain" in helptext.stdout


def test_dependency_files_follow_the_code_of_their_own_project(tmp_path: Path, run_cli) -> None:
    keeps = "from petastorm.workers_pool.thread_pool import ThreadPool\npool = ThreadPool(4)\n"
    done = "from petastorm.spark import make_spark_converter\n"
    write_tree(
        tmp_path,
        {
            "a/job.py": keeps,
            "a/requirements.txt": "petastorm\n",
            "b/job.py": done,
            "b/requirements/base.txt": "petastorm\n",
            "docker/requirements.txt": "petastorm\n",  # no code of its own: the whole run counts
        },
    )
    assert run_cli("--write", ".", cwd=tmp_path).code == 3
    assert read(tmp_path, "a/requirements.txt") == "petastorm\npetastream[spark]\n"
    assert read(tmp_path, "b/requirements/base.txt") == "petastream[spark]\n"
    assert read(tmp_path, "docker/requirements.txt") == "petastorm\npetastream[spark]\n"


def test_a_dependency_file_alone_gets_a_note(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {"requirements.txt": "petastorm\n"})
    run = run_cli("--write", "requirements.txt", cwd=tmp_path)
    assert run.code == 0
    assert "note: petastorm replaced by petastream[spark] without looking at any code" in run.err


def test_jobs_default_to_one_per_cpu(tmp_path: Path, run_cli) -> None:
    from petastream.cli import build_parser

    args = build_parser(["migrate", "."]).parse_args(["migrate", "."])
    assert args.jobs == 0
    for i in range(20):  # enough files that mention Petastorm for worker processes to start
        write_tree(tmp_path, {f"m{i}.py": "from petastorm.spark import make_spark_converter\n"})
    run = run_cli("--check", ".", cwd=tmp_path)
    assert (run.code, run.out.count("+++ b/")) == (1, 20)


def test_an_unparseable_file_keeps_the_petastorm_dependency(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {"ok.py": "from petastorm.spark import make_spark_converter\n",
                          "broken.py": "from petastorm import make_reader(\n",
                          "requirements.txt": "petastorm\n"})
    run = run_cli("--write", ".", cwd=tmp_path)
    assert run.code == 2
    assert read(tmp_path, "requirements.txt") == "petastorm\npetastream[spark]\n"
    assert "code still imports Petastorm at broken.py (not migrated: does not parse)" in run.err

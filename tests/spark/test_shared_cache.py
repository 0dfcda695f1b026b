"""Several driver processes, each with its own local Spark session, on one parent cache dir
(issue #16): nobody deletes a dataset another process reads, one write per DataFrame, a
killed writer's waiters take over at once. Each test starts two Spark drivers (~10 s each)."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROWS = 300


class Drivers:
    """Driver processes (tests/spark/shared_driver.py) sharing a work directory."""

    def __init__(self, workdir: str, parquet: str, parent: str):
        self.workdir, self.parquet, self.parent = workdir, parquet, parent
        self.procs: dict[str, subprocess.Popen] = {}
        os.makedirs(workdir, exist_ok=True)

    def start(self, name: str, mode: str, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep + ROOT)
        with open(self.path(f"{name}.out"), "w") as out, open(self.path(f"{name}.err"), "w") as err:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.spark.shared_driver", mode, self.parquet, self.parent,
                 self.workdir, "--name", name, "--rows", str(ROWS), *args],
                cwd=ROOT, env=env, stdout=out, stderr=err)

    def path(self, name: str) -> str:
        return os.path.join(self.workdir, name)

    def wait_for(self, what: str, check, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for name, p in self.procs.items():
                if p.poll() is not None and p.returncode != 0:
                    pytest.fail(f"{name} exited with {p.returncode} while waiting for {what}:\n"
                                f"{self.stderr(name)[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}: " + "; ".join(
                    f"{n}: {self.stderr(n)[-1500:]}" for n in self.procs))
            time.sleep(0.1)

    def stderr(self, name: str) -> str:
        with open(self.path(f"{name}.err")) as f:
            return f.read()

    def converted(self, name: str) -> dict:
        with open(self.path(f"{name}.converted.json")) as f:
            return json.load(f)

    def finish(self, name: str, timeout: float = 180) -> dict:
        p = self.procs[name]
        p.wait(timeout)
        assert p.returncode == 0, self.stderr(name)[-3000:]
        with open(self.path(f"{name}.out")) as f:
            return json.loads(f.read().strip().splitlines()[-1])

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def drivers(spark, tmp_path):
    pq = str(tmp_path / "pq")
    spark.range(0, ROWS, 1, 2).selectExpr("id", "cast(id as double) * 0.5 as x").write.parquet(pq)

    def make(parent: str) -> Drivers:
        d = Drivers(str(tmp_path / "work"), pq, parent)
        made.append(d)
        return d

    made: list[Drivers] = []
    yield make
    for d in made:
        d.kill_all()


def _complete(parent: str) -> list[str]:
    """The complete datasets (directories with index.json) and object-store pointers under
    ``parent``, by name."""
    from petastream.spark import _records
    from petastream.storage.location import resolve

    root = resolve(parent)
    names = _records.list_names(root)
    return sorted(n for n in names if n.endswith(".json") or (
        n.startswith((".petastream-tmp-", "petastream-")) and _records.exists(root.child(n), "index.json")))


@pytest.mark.parametrize("mode, store", [
    ("native", "local"), ("compat", "local"),
    pytest.param("native", "s3", marks=pytest.mark.cloud),
])
def test_a_exits_while_b_reads(drivers, tmp_path, request, mode, store):
    """A and B convert the same DataFrame at once; A exits while B is still reading: B
    finishes its epochs, and the dataset goes when the last of them exits."""
    if mode == "compat":
        pytest.importorskip("torch")  # compat's reader side is make_torch_dataloader
    if store == "s3":
        parent = request.getfixturevalue("s3_bucket") + "/cache"
    else:
        parent = ("file://" if mode == "compat" else "") + str(tmp_path / "cache")
    d = drivers(parent)
    open(d.path("b.keep-reading"), "w").close()
    d.start("a", mode)
    d.start("b", mode)
    d.wait_for("both drivers ready", lambda: all(os.path.exists(d.path(f"{n}.ready")) for n in "ab"))
    open(d.path("go"), "w").close()
    d.wait_for("both conversions", lambda: all(os.path.exists(d.path(f"{n}.converted.json"))
                                                for n in "ab"))
    a, b = d.converted("a"), d.converted("b")
    assert a["url"] == b["url"], d.stderr("a")[-3000:] + d.stderr("b")[-3000:]
    assert sorted([a["created"], b["created"]]) == [False, True]  # one write, one reuse
    ra = d.finish("a")
    assert ra["ok"]
    name = a["url"].rstrip("/").rsplit("/", 1)[-1]
    kept = [name] if store == "local" else sorted([name, name.split("-")[2].join(["petastream-", ".json"])])
    assert _complete(parent) == kept  # A left it to B
    os.remove(d.path("b.keep-reading"))
    rb = d.finish("b")
    assert rb["ok"] and rb["passes"] >= 2
    assert _complete(parent) == []  # the last one out deleted it


def test_kill_9_of_the_writer_while_another_waits(drivers, tmp_path):
    """A writes slowly; B waits on A's claim; kill -9 A: B takes over within seconds (same
    host: A's pid is gone), writes, reads everything; nothing half-written is ever used."""
    parent = str(tmp_path / "cache")
    d = drivers(parent)
    d.start("a", "native", "--slow", "120", "--go", "go-a")
    d.start("b", "native", "--slow", "0", "--go", "go-b")
    d.wait_for("both drivers ready", lambda: all(os.path.exists(d.path(f"{n}.ready")) for n in "ab"))
    open(d.path("go-a"), "w").close()
    claims = os.path.join(parent, ".petastream-claims", "*.json")
    d.wait_for("A's claim", lambda: glob.glob(claims))
    open(d.path("go-b"), "w").close()
    d.wait_for("B to wait", lambda: "waiting for the process" in d.stderr("b"))
    d.procs["a"].kill()  # SIGKILL
    killed = time.time()
    d.procs["a"].wait()
    rb = d.finish("b")
    assert rb["ok"] and rb["created"]
    took = re.search(r"^(\d+\.\d+) petastream.spark the process writing content key .* is gone",
                     d.stderr("b"), re.M)
    assert took, d.stderr("b")[-2000:]
    assert float(took.group(1)) - killed < 3.0  # no wait past the death
    assert _complete(parent) == []  # B's dataset went at B's exit; A's attempt never published

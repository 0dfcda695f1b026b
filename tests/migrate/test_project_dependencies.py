"""Dependency files follow the code: petastorm stays while code imports it; pins are reviewed
against petastream's own metadata; conda environment files; lock files are regenerated."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from petastream.migrate import pins
from petastream.migrate.conda import migrate_environment_yml
from petastream.migrate.depfile import Project
from petastream.migrate.files import Options, file_kind, migrate_text
from petastream.migrate.packaging import migrate_pyproject, migrate_setup_cfg
from petastream.migrate.pins import (
    compatible,
    conda_to_pep440,
    petastream_bounds,
    poetry_to_pep440,
)
from petastream.migrate.requirements import migrate_requirements_txt
from petastream.migrate.setup_py import migrate_setup_py

from .conftest import dedent
from .installability import declared_bound

KEEP = Project(("loader.py:1", "nb.ipynb:cell 2:1"))
# What petastream's metadata declares today (the messages name it; pins below conflict with it)
ARROW_BY, ARROW = declared_bound("pyarrow")
SPARK_BY, SPARK = declared_bound("pyspark")
TORCH_BY, TORCH = declared_bound("torch")
DONE = Project()


def codes(items) -> list[tuple[int, str]]:
    return [(i.line, i.code) for i in items]


# -- petastream's bounds --------------------------------------------------------------------------


def test_bounds_come_from_petastreams_installed_metadata() -> None:
    declared = {}
    for text in metadata.requires("petastream") or ():
        req = Requirement(text)
        if "dev" not in str(req.marker) and "all" not in str(req.marker):
            declared.setdefault(req.name.lower(), req.specifier)
    found = petastream_bounds()
    for name in ("pyarrow", "numpy", "pyspark", "torch"):
        assert found[name][0] == declared[name], name
    assert found["pyarrow"][1] == "petastream"  # a core dependency
    assert found["pyspark"][1] == SPARK_BY and found["torch"][1] == TORCH_BY  # from an extra
    assert "pytest" not in found  # petastream's own dev tools do not bind user projects


def _not_installed(name: str) -> list[str] | None:
    raise metadata.PackageNotFoundError(name)


@pytest.fixture
def no_metadata(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """petastream run from a source checkout that was never installed (no dist-info); yields
    what the installed metadata says."""
    installed = metadata.requires
    declared = installed("petastream") or []

    def requires(name: str) -> list[str] | None:
        return _not_installed(name) if name == "petastream" else installed(name)

    monkeypatch.setattr(metadata, "requires", requires)
    pins._requires.cache_clear()
    pins.petastream_bounds.cache_clear()
    yield declared
    pins._requires.cache_clear()
    pins.petastream_bounds.cache_clear()


def test_without_metadata_bounds_come_from_the_checkouts_pyproject(no_metadata: list[str]) -> None:
    # issue #29 item 15: from a source checkout every dependency file was an error (exit 2)
    installed = {Requirement(r).name.lower(): Requirement(r) for r in no_metadata}
    found = petastream_bounds()
    for name in ("pyarrow", "numpy", "pyspark", "torch"):
        assert found[name][0] == installed[name].specifier, name
    assert found["pyarrow"][1] == "petastream" and found["pyspark"][1] == SPARK_BY


def test_without_metadata_migrate_reviews_pins_from_a_checkout(tmp_path, run_cli, no_metadata: list[str]) -> None:
    (tmp_path / "requirements.txt").write_text("petastorm\npyarrow==10.0.1  # for petastorm\n")
    run = run_cli("--write", "-j", "1", ".", cwd=tmp_path)
    assert run.code == 0, run.err
    assert (tmp_path / "requirements.txt").read_text().splitlines() == [
        "petastream[spark]",
        f"pyarrow>=14  # was ==10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}",
    ]


def test_declared_requirements_read_like_metadata(tmp_path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "petastream"\ndependencies = ["pyarrow>=14"]\n'
        '[project.optional-dependencies]\nspark = ["pyspark>=3.5; python_version >= \'3.10\'"]\n'
    )
    assert pins.declared_requirements(_not_installed, pyproject) == (
        "pyarrow>=14",
        'pyspark>=3.5; (python_version >= "3.10") and extra == "spark"',
    )
    pyproject.write_text('[project]\nname = "someone-else"\ndependencies = ["pyarrow<11"]\n')
    with pytest.raises(ValueError, match="no petastream pyproject.toml was found at .*pip install -e ."):
        pins.declared_requirements(_not_installed, pyproject)


@pytest.mark.parametrize(
    ("a", "b", "ok"),
    [
        ("==10.0.1", ">=14", False),
        ("<11", ">=14", False),
        ("==3.1.1", ">=3.5", False),
        ("<2", ">=1.24", True),
        (">=14,<15", ">=14", True),
        ("~=13.0", ">=14", False),
        ("~=14.0", ">=14", True),
        ("==14.*", ">=14,<15", True),
        ("==13.*", ">=14", False),
        ("!=14.0.2", ">=14,<=14.0.2", True),
        ("<=14", ">=14", True),
        ("<14", ">=14", False),
        ("===weird", ">=14", True),  # cannot be told: not reported
    ],
)
def test_pin_compatibility(a: str, b: str, ok: bool) -> None:
    assert compatible(SpecifierSet(a), SpecifierSet(b)) is ok


@pytest.mark.parametrize(
    ("conda", "pep440"),
    [("=10.0.1", "==10.0.1.*"), ("10.0.*", "==10.0.*"), ("==3.1.1", "==3.1.1"),
     (">=1.2,<2", "<2,>=1.2"), ("=1.11.1=py36_0", "==1.11.1"), ("", "")],
)
def test_conda_specs(conda: str, pep440: str) -> None:
    assert conda_to_pep440(conda) == SpecifierSet(pep440)
    assert conda_to_pep440("1.2|1.3") is None


@pytest.mark.parametrize(
    ("poetry", "pep440"),
    [("^10.0", ">=10.0,<11"), ("^0.12.1", ">=0.12.1,<0.13"), ("~1.2", ">=1.2,<1.3"), ("*", ""), ("1.2.3", "==1.2.3")],
)
def test_poetry_constraints(poetry: str, pep440: str) -> None:
    assert poetry_to_pep440(poetry) == SpecifierSet(pep440)


# -- requirements files -------------------------------------------------------------------------------

REQUIREMENTS = dedent(
    """
    numpy<2  # petastorm uses np.unicode_
    petastorm==0.12.1  # the Spark converter
    pyarrow==10.0.1  # needed by petastorm
    pyspark==3.1.1
    torch
    """
)


def test_requirements_petastorm_goes_and_its_pins_follow() -> None:
    text, items = migrate_requirements_txt(REQUIREMENTS, DONE)
    assert text == dedent(
        """
        numpy<2  # petastorm uses np.unicode_
        petastream[spark]  # the Spark converter
        pyarrow>=14  # was ==10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}
        pyspark==3.1.1
        torch
        """
    ).format(ARROW_BY=ARROW_BY, ARROW=ARROW)
    assert [(i.line, i.code, i.severity) for i in items] == [
        (1, "petastorm-pin", "info"),  # fits petastream, but was only there for petastorm
        (3, "pin-rewritten", "info"),
        (4, "conflicting-pin", "manual"),  # nobody said why: reported, not touched
    ]
    assert items[2].message == f"pyspark==3.1.1 conflicts with {SPARK_BY}, which needs pyspark{SPARK}"
    assert f"pyspark{SPARK}" in items[2].suggestion
    assert migrate_requirements_txt(text, DONE) == (text, items[:1] + items[2:])


def test_requirements_keep_petastorm_while_code_imports_it() -> None:
    text, items = migrate_requirements_txt(REQUIREMENTS, KEEP)
    assert text == dedent(
        """
        numpy<2  # petastorm uses np.unicode_
        petastorm==0.12.1  # the Spark converter
        petastream[spark]
        pyarrow>=14,<15  # was ==10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}, petastorm <15
        pyspark==3.1.1
        torch
        """
    ).format(ARROW_BY=ARROW_BY, ARROW=ARROW)
    assert codes(items) == [(2, "petastorm-kept"), (3, "pin-rewritten"), (4, "conflicting-pin")]
    assert items[0].message == (
        "petastorm==0.12.1 kept and petastream[spark] added beside it: code still imports "
        "Petastorm at loader.py:1, nb.ipynb:cell 2:1"
    )
    again, more = migrate_requirements_txt(text, KEEP)
    assert again == text
    assert codes(more) == [(2, "petastorm-kept"), (5, "conflicting-pin")]
    # once the code is migrated, the next run drops petastorm
    done, last = migrate_requirements_txt(text, DONE)
    assert "petastorm==" not in done and "petastream[spark]\n" in done
    assert codes(last) == [(1, "petastorm-pin"), (4, "petastorm-pin"), (5, "conflicting-pin")]


def test_a_comment_above_a_pin_ties_it_to_petastorm_like_one_on_its_line() -> None:
    # issue #29 item 13: the pin stayed and the file no longer installed with petastream
    text, items = migrate_requirements_txt(
        dedent(
            """
            petastorm==0.12.1
            # for petastorm
            pyarrow==10.0.1
            # Spark cluster image
            # (petastorm-era)
            pyspark==3.1.1  # cluster
            # petastorm's reader
            numpy<2

            pyspark==3.1.1
            """
        ),
        DONE,
    )
    assert text == dedent(
        """
        petastream[spark]
        # for petastorm
        pyarrow>=14  # was ==10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}
        # Spark cluster image
        # (petastorm-era)
        pyspark{SPARK}  # was ==3.1.1 for petastorm; {SPARK_BY} needs pyspark{SPARK}
        # petastorm's reader
        numpy<2

        pyspark==3.1.1
        """
    ).format(ARROW_BY=ARROW_BY, ARROW=ARROW, SPARK_BY=SPARK_BY, SPARK=SPARK)
    # the pin below a blank line has nothing above it: reported, not touched
    assert codes(items) == [(3, "pin-rewritten"), (6, "pin-rewritten"), (8, "petastorm-pin"), (10, "conflicting-pin")]
    assert migrate_requirements_txt(text, DONE)[0] == text


def test_a_comment_above_a_pin_in_setup_cfg_and_conda() -> None:
    # setuptools reads a setup.cfg value line to its end: the note goes on a line of its own
    text, items = migrate_setup_cfg(
        "[options]\ninstall_requires =\n    petastorm\n    ; for petastorm\n    pyarrow==10.0.1\n", DONE
    )
    assert text == (
        "[options]\ninstall_requires =\n    petastream[spark]\n    ; for petastorm\n"
        f"    # was ==10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}\n    pyarrow>=14\n"
    )
    assert codes(items) == [(5, "pin-rewritten")]
    assert migrate_setup_cfg(text, DONE)[0] == text
    text, items = migrate_environment_yml(
        "dependencies:\n  # for petastorm\n  - pyarrow=10.0.1\n  - petastorm\n", DONE
    )
    assert text.splitlines()[1:3] == [
        "  # for petastorm",
        f"  - pyarrow>=14  # was =10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}",
    ]


def test_requirements_migrated_alone_say_so() -> None:
    text, items = migrate_requirements_txt("petastorm\n", Project(code_scanned=False))
    assert text == "petastream[spark]\n"
    assert [(i.code, i.severity) for i in items] == [("dependencies-unchecked", "info")]


def test_pip_compile_lock_file_is_left_for_regeneration() -> None:
    lock = dedent(
        """
        #
        # This file is autogenerated by pip-compile with Python 3.9
        # by the following command:
        #
        #    pip-compile --output-file=requirements.txt requirements.in
        #
        numpy==1.21.6
            # via
            #   petastorm
            #   pyarrow
        petastorm==0.12.1
            # via -r requirements.in
        pyarrow==10.0.1
            # via petastorm
        """
    )
    text, items = migrate_requirements_txt(lock, DONE)
    assert text == lock
    assert codes(items) == [(11, "regenerate-lock")]
    assert items[0].suggestion.endswith("pip-compile --output-file=requirements.txt requirements.in")
    # regenerated from a migrated requirements.in that keeps petastorm: nothing to say
    regenerated = lock.replace("petastorm==0.12.1", "petastorm==0.12.1\npetastream[spark]==0.1.0")
    assert migrate_requirements_txt(regenerated, KEEP) == (regenerated, [])
    assert codes(migrate_requirements_txt(regenerated, DONE)[1]) == [(11, "regenerate-lock")]


@pytest.mark.parametrize(
    ("name", "content", "command"),
    [
        ("poetry.lock", '[[package]]\nname = "petastorm"\nversion = "0.12.1"\n', "poetry lock"),
        ("uv.lock", '[[package]]\nname = "petastorm"\nversion = "0.12.1"\n', "uv lock"),
        ("Pipfile.lock", '{"default": {\n "petastorm": {"version": "==0.12.1"}\n}}\n', "pipenv lock"),
    ],
)
def test_other_lock_files(name: str, content: str, command: str) -> None:
    from pathlib import Path

    kind = file_kind(Path(name))
    assert kind == "lock"
    result = migrate_text(content, kind, name, Options(project=DONE), name=name)
    assert not result.changed
    assert [(i.code, i.suggestion.rsplit(": ", 1)[1]) for i in result.items] == [("regenerate-lock", command)]


# -- setup.cfg, pyproject.toml, setup.py ----------------------------------------------------------------


def test_setup_cfg_keeps_petastorm_with_an_indented_continuation_line() -> None:
    source = dedent(
        """
        [options]
        install_requires = petastorm==0.12.1
        tests_require =
            pyarrow<11
            petastorm
        """
    )
    text, items = migrate_setup_cfg(source, KEEP)
    assert text == dedent(
        """
        [options]
        install_requires = petastorm==0.12.1
            petastream[spark]
        tests_require =
            pyarrow<11
            petastorm
            petastream[spark]
        """
    )
    assert codes(items) == [(2, "petastorm-kept"), (4, "conflicting-pin"), (5, "petastorm-kept")]
    assert migrate_setup_cfg(text, KEEP)[0] == text


def test_pyproject_keeps_petastorm_beside_petastream_in_every_style() -> None:
    source = dedent(
        """
        [project]
        dependencies = [
            "numpy",
            "petastorm==0.12.1"  # converter
        ]
        [project.optional-dependencies]
        torch = ["petastorm[torch]", "torch==1.13.1"]
        [tool.poetry.dependencies]
        petastorm = "^0.12.1"
        pyarrow = { version = "^10.0", optional = true }
        """
    )
    text, items = migrate_pyproject(source, KEEP)
    assert text == dedent(
        """
        [project]
        dependencies = [
            "numpy",
            "petastorm==0.12.1",  # converter
            "petastream[spark]",
        ]
        [project.optional-dependencies]
        torch = ["petastorm[torch]", "petastream[spark,torch]", "torch==1.13.1"]
        [tool.poetry.dependencies]
        petastorm = "^0.12.1"
        petastream = { version = "*", extras = ["spark"] }
        pyarrow = { version = "^10.0", optional = true }
        """
    )
    assert codes(items) == [
        (4, "petastorm-kept"),
        (7, "petastorm-kept"),
        (7, "conflicting-pin"),
        (9, "petastorm-kept"),
        (10, "conflicting-pin"),
    ]
    assert items[2].message == f"torch==1.13.1 conflicts with {TORCH_BY}, which needs torch{TORCH}"
    assert items[4].message.startswith('pyarrow = "^10.0" conflicts with')
    assert migrate_pyproject(text, KEEP)[0] == text


def test_setup_py_adds_petastream_to_the_same_list() -> None:
    source = dedent(
        """
        setup(
            install_requires=[
                "pyarrow<11",  # petastorm
                "petastorm>=0.12"
            ],
            extras_require={"torch": ["petastorm[torch]", "torch"]},
            tests_require="petastorm",
        )
        """
    )
    text, items = migrate_setup_py(source, KEEP)
    assert text == dedent(
        """
        setup(
            install_requires=[
                "pyarrow>=14,<15",  # was <11 for petastorm; {ARROW_BY} needs pyarrow{ARROW}, petastorm <15
                "petastorm>=0.12",
                "petastream[spark]",
            ],
            extras_require={{"torch": ["petastorm[torch]", "petastream[spark,torch]", "torch"]}},
            tests_require="petastorm",
        )
        """
    ).format(ARROW_BY=ARROW_BY, ARROW=ARROW)
    assert codes(items) == [(3, "pin-rewritten"), (4, "petastorm-kept"), (6, "petastorm-kept"), (7, "petastorm-kept")]
    assert "add petastream[spark] beside it by hand" in items[3].message  # a bare string: no list


def test_petastorm_dropped_once_nothing_needs_it() -> None:
    source = 'setup(install_requires=[\n    "petastream[spark]",\n    "petastorm==0.12.1",\n])\n'
    assert migrate_setup_py(source, DONE) == ('setup(install_requires=[\n    "petastream[spark]",\n])\n', [])
    unknown, items = migrate_setup_py(source)  # migrated on its own: nothing known, nothing dropped
    assert unknown == source and codes(items) == [(3, "unsupported-requirement")]


# -- conda environment files ---------------------------------------------------------------------------

ENVIRONMENT = dedent(
    """
    name: train
    channels:
      - conda-forge
    dependencies:
      - python=3.9
      - pyarrow=10.0.1  # petastorm needs pyarrow.filesystem
      - conda-forge::petastorm=0.12.1
      - pyspark=3.1.1
    """
)


@pytest.mark.parametrize("name", ["environment.yml", "environment-gpu.yaml", "conda.yaml", "environment.yaml"])
def test_conda_files_are_recognised(name: str) -> None:
    from pathlib import Path

    assert file_kind(Path(name)) == "conda"


def test_conda_petastorm_moves_to_a_new_pip_section() -> None:
    text, items = migrate_environment_yml(ENVIRONMENT, DONE)
    assert text == dedent(
        """
        name: train
        channels:
          - conda-forge
        dependencies:
          - python=3.9
          - pyarrow>=14  # was =10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}
          - pip
          - pip:
              - petastream[spark]
          - pyspark=3.1.1
        """
    ).format(ARROW_BY=ARROW_BY, ARROW=ARROW)
    assert codes(items) == [(6, "pin-rewritten"), (8, "conflicting-pin")]
    again, more = migrate_environment_yml(text, DONE)
    assert (again, codes(more)) == (text, [(10, "conflicting-pin")])


def test_conda_keeps_petastorm_and_adds_petastream_to_the_existing_pip_section() -> None:
    source = ENVIRONMENT + "  - pip:\n    - mlflow\n"
    text, items = migrate_environment_yml(source, KEEP)
    assert text == source.replace("pyarrow=10.0.1  # petastorm needs pyarrow.filesystem", (
        f"pyarrow>=14,<15  # was =10.0.1 for petastorm; {ARROW_BY} needs pyarrow{ARROW}, petastorm <15"
    )) + "    - petastream[spark]\n"
    assert codes(items) == [(6, "pin-rewritten"), (7, "petastorm-kept"), (8, "conflicting-pin")]


def test_conda_pip_section_is_a_requirements_list() -> None:
    source = "dependencies:\n  - pip\n  - pip:\n      - petastorm==0.12.1  # converter\n      - 'pyarrow<11'\n"
    text, items = migrate_environment_yml(source, DONE)
    assert text == "dependencies:\n  - pip\n  - pip:\n      - petastream[spark]  # converter\n      - 'pyarrow<11'\n"
    assert codes(items) == [(5, "conflicting-pin")]


def test_conda_file_migrated_alone_says_so() -> None:
    text, items = migrate_environment_yml("dependencies:\n  - petastorm\n", Project(code_scanned=False))
    assert text == "dependencies:\n  - pip\n  - pip:\n      - petastream[spark]\n"
    assert [(i.code, i.severity) for i in items] == [("dependencies-unchecked", "info")]

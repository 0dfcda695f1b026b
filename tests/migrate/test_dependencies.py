"""The ``petastorm`` dependency -> ``petastream[spark]`` in every file that declares it."""

from __future__ import annotations

import pytest

from petastream.migrate.packaging import migrate_pyproject, migrate_setup_cfg
from petastream.migrate.requirements import (
    migrate_requirements_txt,
    rewrite_pip_command,
    rewrite_requirement,
)
from petastream.migrate.setup_py import migrate_setup_py

from .conftest import dedent


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("petastorm", "petastream[spark]"),
        ("petastorm==0.12.1", "petastream[spark]"),
        ("Petastorm>=0.11,<0.13", "petastream[spark]"),
        ("petastorm ~= 0.12.0", "petastream[spark]"),
        ("petastorm[torch]==0.13.1", "petastream[spark,torch]"),
        ("petastorm[tf, opencv]", "petastream[spark,tf]"),
        ("petastorm[tf_gpu,torch]", "petastream[spark,tf,torch]"),
        ('petastorm==0.12.1; python_version < "3.12"', 'petastream[spark]; python_version < "3.12"'),
        ('petastorm >= 0.12 ; sys_platform != "win32"', 'petastream[spark] ; sys_platform != "win32"'),
    ],
)
def test_requirement_strings(before: str, after: str) -> None:
    assert rewrite_requirement(before) == after


@pytest.mark.parametrize("other", ["petastorm-utils", "petastorm_x", "pyarrow<15", "petastream[spark]", ""])
def test_other_requirements_are_not_petastorm(other: str) -> None:
    assert rewrite_requirement(other) is None


def test_requirements_txt_keeps_comments_markers_and_other_pins() -> None:
    text, items = migrate_requirements_txt(
        dedent(
            """
            # training deps
            numpy<2
            petastorm==0.12.1  # the Spark converter
            pyarrow>=14,<15    # petastorm needs pyarrow.filesystem
            -r base.txt
            torch
            """
        )
    )
    assert text == dedent(
        """
        # training deps
        numpy<2
        petastream[spark]  # the Spark converter
        pyarrow>=14,<15    # petastorm needs pyarrow.filesystem
        -r base.txt
        torch
        """
    )
    # the pyarrow pin was for petastorm and still fits petastream: a note, not a change
    assert [(i.line, i.code, i.severity) for i in items] == [(4, "petastorm-pin", "info")]
    assert items[0].message.startswith("pyarrow>=14,<15 was pinned for petastorm")
    assert migrate_requirements_txt(text) == (text, items)


def test_requirements_txt_crlf_and_no_final_newline() -> None:
    text, _ = migrate_requirements_txt("numpy\r\npetastorm==0.13.1")
    assert text == "numpy\r\npetastream[spark]"


def test_requirements_txt_reports_what_it_cannot_rewrite() -> None:
    source = dedent(
        """
        git+https://github.com/uber/petastorm.git@v0.12.1#egg=petastorm
        -e git+https://github.com/uber/petastorm#egg=petastorm
        """
    )
    text, items = migrate_requirements_txt(source)
    assert text == source
    assert [(i.line, i.code) for i in items] == [(1, "unsupported-requirement"), (2, "unsupported-requirement")]
    assert "from PyPI" in items[0].suggestion


def test_hash_pinned_file_is_a_lock_file() -> None:
    source = dedent(
        """
        petastorm==0.12.1 \\
            --hash=sha256:0123456789abcdef
        """
    )
    text, items = migrate_requirements_txt(source)
    assert text == source
    assert [(i.line, i.code) for i in items] == [(1, "regenerate-lock")]
    assert "pip-compile" in items[0].suggestion


def test_requirements_txt_with_petastream_already_listed() -> None:
    source = "petastream[spark]\npetastorm==0.12.1\n"
    text, items = migrate_requirements_txt(source)
    assert text == source
    assert [i.line for i in items] == [2]
    assert items[0].suggestion == "remove the Petastorm requirement"


def test_setup_py_install_requires_extras_and_variables() -> None:
    source = dedent(
        """
        from setuptools import setup

        REQUIRED = ["numpy", "petastorm>=0.12"]  # core
        SPARK = ['petastorm[torch]==0.13.1']

        setup(
            name="petastorm",  # not a requirement
            packages=["petastorm_jobs"],
            install_requires=REQUIRED + ["pyarrow<15"],
            extras_require={"spark": SPARK, "tf": ["petastorm[tf]", "tensorflow"]},
            tests_require=("petastorm",),
        )
        """
    )
    code, items = migrate_setup_py(source)
    assert code == dedent(
        """
        from setuptools import setup

        REQUIRED = ["numpy", "petastream[spark]"]  # core
        SPARK = ['petastream[spark,torch]']

        setup(
            name="petastorm",  # not a requirement
            packages=["petastorm_jobs"],
            install_requires=REQUIRED + ["pyarrow<15"],
            extras_require={"spark": SPARK, "tf": ["petastream[spark,tf]", "tensorflow"]},
            tests_require=("petastream[spark]",),
        )
        """
    )
    assert items == []
    assert migrate_setup_py(code) == (code, [])


def test_setup_py_url_requirement_is_reported() -> None:
    source = 'setup(install_requires=["petastorm @ git+https://github.com/uber/petastorm"])\n'
    code, items = migrate_setup_py(source)
    assert code == source
    assert [(i.line, i.code) for i in items] == [(1, "unsupported-requirement")]


def test_setup_cfg() -> None:
    source = dedent(
        """
        [metadata]
        name = petastorm-jobs

        [options]
        packages = find:
        install_requires =
            numpy
            petastorm==0.12.1  ; python_version < "3.12"
            pyarrow<15
        tests_require = petastorm

        [options.extras_require]
        torch =
            petastorm[torch]
            torch

        [tool:pytest]
        addopts = -p petastorm
        """
    )
    text, items = migrate_setup_cfg(source)
    assert text == dedent(
        """
        [metadata]
        name = petastorm-jobs

        [options]
        packages = find:
        install_requires =
            numpy
            petastream[spark]  ; python_version < "3.12"
            pyarrow<15
        tests_require = petastream[spark]

        [options.extras_require]
        torch =
            petastream[spark,torch]
            torch

        [tool:pytest]
        addopts = -p petastorm
        """
    )
    assert items == []
    assert migrate_setup_cfg(text) == (text, [])


def test_pyproject_pep621_dependency_groups_and_tool_tables() -> None:
    source = dedent(
        """
        [project]
        name = "petastorm-jobs"
        dependencies = [
            "numpy",
            "petastorm==0.12.1",  # converter
            'pyarrow>=14,<15',
        ]
        keywords = ["petastorm"]

        [project.optional-dependencies]
        torch = ["petastorm[torch]", "torch"]

        [dependency-groups]
        dev = ["pytest", "petastorm>=0.12; python_version < '3.12'"]

        [tool.hatch.envs.default]
        dependencies = ["petastorm"]

        [tool.other]
        petastorm = "not a dependency"
        """
    )
    text, items = migrate_pyproject(source)
    assert text == dedent(
        """
        [project]
        name = "petastorm-jobs"
        dependencies = [
            "numpy",
            "petastream[spark]",  # converter
            'pyarrow>=14,<15',
        ]
        keywords = ["petastorm"]

        [project.optional-dependencies]
        torch = ["petastream[spark,torch]", "torch"]

        [dependency-groups]
        dev = ["pytest", "petastream[spark]; python_version < '3.12'"]

        [tool.hatch.envs.default]
        dependencies = ["petastream[spark]"]

        [tool.other]
        petastorm = "not a dependency"
        """
    )
    assert items == []
    assert migrate_pyproject(text) == (text, [])


def test_pyproject_poetry() -> None:
    source = dedent(
        """
        [tool.poetry.dependencies]
        python = "^3.10"
        petastorm = "^0.12.1"  # converter

        [tool.poetry.group.gpu.dependencies]
        petastorm = { version = "^0.13", extras = ["torch"] }

        [tool.poetry.group.git.dependencies]
        petastorm = { git = "https://github.com/uber/petastorm.git" }
        """
    )
    text, items = migrate_pyproject(source)
    assert text == dedent(
        """
        [tool.poetry.dependencies]
        python = "^3.10"
        petastream = { version = "*", extras = ["spark"] }  # converter

        [tool.poetry.group.gpu.dependencies]
        petastream = { version = "*", extras = ["spark", "torch"] }

        [tool.poetry.group.git.dependencies]
        petastorm = { git = "https://github.com/uber/petastorm.git" }
        """
    )
    assert [(i.line, i.code) for i in items] == [(9, "unsupported-requirement")]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("%pip install petastorm", '%pip install "petastream[spark]"'),
        ("!pip install petastorm==0.12.1", '!pip install "petastream[spark]"'),
        ("%pip install -U petastorm==0.13.1 pyarrow<15 torch", '%pip install -U "petastream[spark]" pyarrow<15 torch'),
        ("!pip3 install 'petastorm[torch]>=0.12' -q", "!pip3 install 'petastream[spark,torch]' -q"),
        ("!python -m pip install --quiet petastorm", '!python -m pip install --quiet "petastream[spark]"'),
        ("# MAGIC %pip install petastorm", '# MAGIC %pip install "petastream[spark]"'),
        ("pip install petastorm && echo done", 'pip install "petastream[spark]" && echo done'),
    ],
)
def test_pip_commands(before: str, after: str) -> None:
    assert rewrite_pip_command(before) == after
    assert rewrite_pip_command(after) is None


@pytest.mark.parametrize(
    "line",
    [
        "%pip install petastorm-tools",
        "!pip uninstall -y petastorm",
        "%pip install -r requirements.txt",
        "!pip install git+https://github.com/uber/petastorm.git",
        "!echo petastorm",
    ],
)
def test_pip_commands_left_alone(line: str) -> None:
    assert rewrite_pip_command(line) is None

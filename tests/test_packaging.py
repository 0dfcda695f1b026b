"""Declared dependencies: honest lower bounds and extras that are safe where users run
(issue #15, points 1 and 3). The bounds themselves are exercised by scripts/min_versions.sh."""

from __future__ import annotations

import os

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _pins(name: str) -> dict[str, str]:
    pins = {}
    with open(os.path.join(ROOT, name)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                pkg, version = line.split("==")
                pins[pkg.strip().lower().replace("_", "-")] = version.strip()
    return pins


def _lower_bound(req: Requirement) -> str | None:
    return next((s.version for s in req.specifier if s.operator == ">="), None)


def _requirements(extras: list[str]) -> list[Requirement]:
    project = _project()
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return [r for r in reqs if r.name != "petastream"]


def test_min_constraints_pin_exactly_the_declared_lower_bounds():
    pins = _pins("constraints-min.txt")
    for req in _requirements(["spark", "pyspark", "compression", "images", "migrate"]):
        bound = _lower_bound(req)
        assert bound is not None, f"{req}: declare a tested lower bound"
        pinned = pins.get(req.name.lower())
        assert pinned is not None, f"{req.name} is not pinned in constraints-min.txt"
        # 'pyarrow>=14' is proved by 14.0.2 (its last patch release), '>=1.24' by 1.24.4 ...
        assert pinned.split(".")[: len(bound.split("."))] == bound.split("."), (req, pinned)


def test_extras_never_replace_what_a_platform_ships():
    extras = _project()["optional-dependencies"]
    for name, reqs in extras.items():
        names = {Requirement(r).name.lower() for r in reqs}
        if name not in ("pyspark",):  # Databricks runtimes (classic, serverless) ship pyspark
            assert "pyspark" not in names, name
        if name not in ("tf-cpu", "dev"):  # beside a GPU TensorFlow, tensorflow-cpu clobbers it
            assert "tensorflow-cpu" not in names, name
        for r in map(Requirement, reqs):
            assert not [s for s in r.specifier if s.operator in ("<", "<=", "==", "~=")
                        and r.name.lower() in ("torch", "tensorflow", "pyspark", "pandas")], r
    assert [Requirement(r).name for r in extras["tf"]] == ["tensorflow"]


def test_ci_pins_cover_the_dev_tools():
    pins = _pins("constraints.txt")
    for tool in ("mkdocs", "tqdm", "tensorflow-cpu", "torch", "pyspark", "pandas", "libcst", "mypy"):
        assert tool in pins, tool
    assert int(pins["pandas"].split(".")[0]) < 3  # pyspark 4 does not support pandas 3 yet

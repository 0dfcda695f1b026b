"""Version pins next to the new ``petastream`` requirement: do they leave anything to install?

petastream's own bounds come from its installed metadata (``importlib.metadata``), so they
follow ``pyproject.toml`` without a copied table; run from a source checkout that was never
installed (``PYTHONPATH=src``), they are read from that checkout's ``pyproject.toml``. A pin *conflicts* when no version satisfies
both it and petastream's requirement on the same package (``pyarrow==10.0.1`` against
``pyarrow>=14``), decided by interval arithmetic over PEP 440 versions, as a resolver run with
``--no-deps`` would. What to do about one is :func:`review_pin`'s answer:

- a conflicting pin whose comment ties it to Petastorm (``pyarrow<11  # for petastorm``) was
  only there for Petastorm, so it is rewritten: to petastream's bound, or, while the project
  keeps Petastorm, to the range both need (:data:`PETASTORM_RUNTIME`);
- any other conflicting pin is reported with petastream's range (someone chose it);
- a Petastorm pin that no longer conflicts but is no longer needed gets a note.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from petastream.errors import ConfigurationError

__all__ = [
    "PETASTORM_RUNTIME",
    "PinReview",
    "petastream_bounds",
    "declared_requirements",
    "compatible",
    "review_pin",
    "conda_to_pep440",
    "poetry_to_pep440",
    "ties_to_petastorm",
]

# What Petastorm 0.13.1 (its last release) needs at run time, which its metadata does not say:
# it imports pyarrow.filesystem (gone in pyarrow 15) and np.unicode_ (gone in numpy 2), and it
# was last tested with pyspark 4.0. A project that keeps Petastorm beside petastream needs both.
PETASTORM_RUNTIME = {
    "pyarrow": SpecifierSet("<15"),
    "numpy": SpecifierSet("<2"),
    "pyspark": SpecifierSet("<4.1"),
}

_PETASTORM_COMMENT = re.compile(r"(?i)petastorm")


# -- petastream's requirements -------------------------------------------------------------------


# src/petastream/migrate/pins.py -> the checkout's root
_CHECKOUT_PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


@cache
def _requires() -> tuple[str, ...]:
    return declared_requirements(metadata.requires)


def declared_requirements(
    installed: Callable[[str], list[str] | None] = metadata.requires,
    pyproject: Path = _CHECKOUT_PYPROJECT,
) -> tuple[str, ...]:
    """petastream's requirements as its metadata lists them (``Requires-Dist``): from the
    installed distribution (``installed``), else from the source checkout's ``pyproject``."""
    try:
        return tuple(installed("petastream") or ())
    except metadata.PackageNotFoundError:
        pass
    declared = _pyproject_requirements(pyproject)
    if declared is None:
        raise ConfigurationError(
            "petastream's package metadata is not installed and no petastream pyproject.toml "
            f"was found at {pyproject}, so its version bounds cannot be read: install "
            "petastream (pip install 'petastream[migrate]', or pip install -e . in a checkout) "
            "and run petastream migrate again"
        )
    return declared


def _pyproject_requirements(path: Path) -> tuple[str, ...] | None:
    """``[project] dependencies`` and ``optional-dependencies`` of petastream's pyproject.toml,
    each extra's marked ``extra == "<name>"`` as in metadata; None when there is none."""
    project = _load_toml(path).get("project")
    if not isinstance(project, dict) or project.get("name") != "petastream":
        return None
    found = [str(r) for r in project.get("dependencies") or ()]
    for extra, listed in (project.get("optional-dependencies") or {}).items():
        for raw in listed:
            req = Requirement(raw)
            marker = f"({req.marker}) and " if req.marker is not None else ""
            req.marker = None
            found.append(f'{req}; {marker}extra == "{extra}"')
    return tuple(found)


def _load_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10: tomli, where installed
        try:
            import tomli as tomllib
        except ImportError:
            return {}
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


# Meta-extras that only gather others or add tools for petastream's own development.
_META_EXTRAS = frozenset({"all", "dev"})
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


@cache
def petastream_bounds() -> dict[str, tuple[SpecifierSet, str]]:
    """Package (canonical name) -> the range petastream declares for it and where: ``petastream``
    for a core dependency, ``petastream[<extra>]`` for an extra's.

    Every extra counts, not only the ones a project installs: a package the project pins
    itself (``pyspark==3.1.1`` beside ``petastream[spark]`` on a cluster that brings its own
    Spark) has to be in the range petastream supports for it, whichever extra declares it.
    """
    found: dict[str, tuple[SpecifierSet, str]] = {}
    for raw in _requires():
        req = Requirement(raw)
        name = canonicalize_name(req.name)
        extra = _EXTRA.search(str(req.marker)) if req.marker is not None else None
        where = extra.group(1) if extra else ""
        if name == "petastream" or where in _META_EXTRAS:
            continue
        spec, label = found.get(name, (SpecifierSet(), None))
        if label is None or not where:  # core wins the label; ranges always intersect
            label = f"petastream[{where}]" if where else "petastream"
        found[name] = (spec & req.specifier, label)
    return found


# -- interval arithmetic over versions ---------------------------------------------------------------

# An interval: (low, low inclusive, high, high inclusive); None is unbounded.
_Interval = tuple[Version | None, bool, Version | None, bool]
_ALL: list[_Interval] = [(None, False, None, False)]


def _next_prefix(release: tuple[int, ...]) -> Version:
    """The first version after every ``release.*`` (``1.2`` -> ``1.3.dev0``)."""
    bumped = (*release[:-1], release[-1] + 1)
    return Version(".".join(map(str, bumped)) + ".dev0")


def _prefix_interval(text: str) -> _Interval:
    release = Version(text).release
    return (Version(".".join(map(str, release)) + ".dev0"), True, _next_prefix(release), False)


def _intervals(spec: Specifier) -> list[_Interval] | None:
    """The versions ``spec`` allows; None when it cannot be told (arbitrary ``===``)."""
    op, text = spec.operator, spec.version
    try:
        if text.endswith(".*"):
            inside = _prefix_interval(text[:-2])
            if op == "==":
                return [inside]
            return [(None, False, inside[0], False), (inside[2], True, None, False)]  # !=
        version = Version(text)
    except InvalidVersion:
        return None
    if op in ("==", "==="):
        return [(version, True, version, True)]
    if op == "!=":
        return [(None, False, version, False), (version, False, None, False)]
    if op == ">=":
        return [(version, True, None, False)]
    if op == ">":
        return [(version, False, None, False)]
    if op == "<=":
        return [(None, False, version, True)]
    if op == "<":
        return [(None, False, version, False)]
    if op == "~=":
        return [(version, True, _next_prefix(version.release[:-1]), False)]
    return None


def _meet(a: _Interval, b: _Interval) -> _Interval | None:
    low, low_in = _max_low(a[0], a[1], b[0], b[1])
    high, high_in = _min_high(a[2], a[3], b[2], b[3])
    if low is not None and high is not None and (low > high or (low == high and not (low_in and high_in))):
        return None
    return (low, low_in, high, high_in)


def _max_low(x: Version | None, xi: bool, y: Version | None, yi: bool) -> tuple[Version | None, bool]:
    if x is None:
        return y, yi
    if y is None or x > y:
        return x, xi
    return (y, yi) if y > x else (x, xi and yi)


def _min_high(x: Version | None, xi: bool, y: Version | None, yi: bool) -> tuple[Version | None, bool]:
    if x is None:
        return y, yi
    if y is None or x < y:
        return x, xi
    return (y, yi) if y < x else (x, xi and yi)


def _allowed(specs: SpecifierSet) -> list[_Interval] | None:
    current = list(_ALL)
    for spec in specs:
        intervals = _intervals(spec)
        if intervals is None:
            return None
        current = [m for a in current for b in intervals if (m := _meet(a, b)) is not None]
    return current


def compatible(*specs: SpecifierSet) -> bool:
    """True when some version satisfies every one of ``specs`` (or it cannot be told)."""
    combined = SpecifierSet()
    for spec in specs:
        combined &= spec
    allowed = _allowed(combined)
    return allowed is None or bool(allowed)


# -- other spec syntaxes -------------------------------------------------------------------------------


def conda_to_pep440(spec: str) -> SpecifierSet | None:
    """A conda match spec's version part as PEP 440, or None when it is not one range.

    conda reads ``=1.2`` and a bare ``1.2`` fuzzily (``1.2.*``), ``==1.2`` exactly, and
    ``1.2=py38_0`` as a version with a build string.
    """
    text = spec.strip()
    if not text or text == "*":
        return SpecifierSet()
    if "|" in text:
        return None  # alternatives
    build = re.fullmatch(r"(?:==?)?\s*([\w.+!]+)=[\w.*+!]+", text)
    if build is not None:
        text = f"=={build[1]}"
    parts = []
    for part in re.split(r"\s*,\s*", text):
        part = part.replace(" ", "")
        if re.fullmatch(r"=?[\w.+!]+(\.?\*)?", part):
            parts.append(f"=={part.lstrip('=').rstrip('*').rstrip('.')}.*")
        else:
            parts.append(part)
    try:
        return SpecifierSet(",".join(parts))
    except InvalidSpecifier:
        return None


def poetry_to_pep440(constraint: str) -> SpecifierSet | None:
    """A Poetry constraint (``^1.2``, ``~1.2``, ``>=1,<2``, ``*``) as PEP 440, or None."""
    parts = []
    for part in (p.strip() for p in constraint.split(",")):
        if part in ("", "*"):
            continue
        match = re.fullmatch(r"([\^~])\s*(\d+(?:\.\d+)*)", part)
        if match is None:
            parts.append(part if re.match(r"[<>=!~]", part) else f"=={part}")
            continue
        release = tuple(int(x) for x in match[2].split("."))
        if match[1] == "^":
            first = next((i for i, x in enumerate(release) if x != 0), len(release) - 1)
            upper = (*release[:first], release[first] + 1)
        else:
            upper = (release[0] + 1,) if len(release) == 1 else (release[0], release[1] + 1)
        parts += [f">={match[2]}", f"<{'.'.join(map(str, upper))}"]
    try:
        return SpecifierSet(",".join(parts))
    except InvalidSpecifier:
        return None


# -- one pin -----------------------------------------------------------------------------------------------


def ties_to_petastorm(comment: str) -> bool:
    return bool(_PETASTORM_COMMENT.search(comment))


@dataclass(frozen=True)
class PinReview:
    """What to do with one pin: ``action`` is ``rewrite`` (to ``spec``, with a note),
    ``conflict`` (a manual item) or ``stale`` (a note)."""

    action: str
    name: str
    message: str
    suggestion: str
    spec: str = ""
    comment: str = ""


def review_pin(
    name: str,
    pinned: SpecifierSet,
    comment: str,
    *,
    keep_petastorm: bool,
    written: str,
) -> PinReview | None:
    """Review the pin ``written`` (package ``name``, range ``pinned``, same-line ``comment``)
    against what petastream declares for the package; None when there is nothing to say."""
    key = canonicalize_name(name)
    bound = petastream_bounds().get(key)
    if bound is None:
        return None
    needed, label = bound
    tied = ties_to_petastorm(comment)
    runtime = PETASTORM_RUNTIME.get(key, SpecifierSet()) if keep_petastorm else SpecifierSet()
    if compatible(pinned, needed):
        capped = any(spec.operator not in (">", ">=") for spec in pinned)
        if tied and not keep_petastorm and capped:  # an upper bound or exact pin Petastorm wanted
            return PinReview(
                "stale",
                name,
                f"{written} was pinned for petastorm, which the project no longer needs "
                f"({label} needs {name}{needed or ' (any version)'})",
                "relax or drop the pin unless something else needs it",
            )
        return None
    target = needed & runtime
    if not compatible(target):
        return PinReview(
            "conflict",
            name,
            f"{written} conflicts with {label}, which needs {name}{needed}, and petastorm (still "
            f"needed by the code) needs {name}{runtime}: no {name} satisfies both",
            "migrate the remaining Petastorm usages so petastorm can go, then set the pin to "
            f"{name}{needed}",
        )
    spec = _render(target)
    if tied:
        why = f"{label} needs {name}{needed}" + (f", petastorm {runtime}" if str(runtime) else "")
        return PinReview(
            "rewrite",
            name,
            f"{written} (pinned for petastorm) conflicts with {label}: rewritten to {name}{spec}",
            "nothing to do, unless something other than petastorm needed the old pin",
            spec=spec,
            comment=f"# was {_spec_text(written, name)} for petastorm; {why}",
        )
    return PinReview(
        "conflict",
        name,
        f"{written} conflicts with {label}, which needs {name}{needed}",
        f"change it to {name}{spec} (if it was there for petastorm, say so in a '# petastorm' "
        "comment on the line and petastream migrate rewrites it)",
    )


def _render(specs: SpecifierSet) -> str:
    """``>=14,<15`` in a stable order: lower bounds first."""
    order = {">": 0, ">=": 0, "~=": 1, "==": 2, "===": 2, "<": 3, "<=": 3, "!=": 4}
    return ",".join(str(s) for s in sorted(specs, key=lambda s: (order.get(s.operator, 5), str(s))))


def _spec_text(written: str, name: str) -> str:
    rest = written.strip()
    if rest.lower().startswith(name.lower()):
        rest = rest[len(name) :].strip()
    return rest.split(";")[0].strip() or "any version"


def parse_pep508(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None

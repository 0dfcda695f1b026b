"""The ``petastorm`` requirement string -> ``petastream[spark]``, and ``pip install`` lines.

A requirement on Petastorm (any version, extras, environment marker) becomes one on
``petastream[spark]``: the version is dropped (Petastorm's versions mean nothing for
petastream), the marker is kept, and Petastorm's framework extras carry over
(``petastorm[torch]`` -> ``petastream[spark,torch]``, ``tf``/``tf_gpu`` -> ``tf``). Every
dependency-file format uses these; the files themselves are :mod:`.depfile`'s business.
"""

from __future__ import annotations

import re

__all__ = [
    "NEW_REQUIREMENT",
    "URL_SUGGESTION",
    "new_requirement",
    "rewrite_requirement",
    "rewrite_pip_command",
    "pip_requirements",
]

NEW_REQUIREMENT = "petastream[spark]"
URL_SUGGESTION = f"install {NEW_REQUIREMENT} from PyPI instead of Petastorm from a URL"
_EXTRAS = {"torch": "torch", "tf": "tf", "tf_gpu": "tf"}

# name, optional extras, version spec, optional marker -- as a whole requirement string
_REQUIREMENT = re.compile(
    r"""(?ix)
    (?P<name>petastorm)(?![\w.\-])
    (?P<extras>\s*\[[^\]]*\])?
    (?P<spec>[^;]*?)
    (?P<tail>\s*(?:;.*)?)
    """
)
_SPEC = re.compile(r"\s*((===?|~=|!=|<=?|>=?)\s*[\w.*+!\-]+\s*,?\s*)*")


def new_requirement(extras: str | None) -> str:
    names = ["spark"]
    for raw in re.findall(r"[\w\-]+", extras or ""):
        mapped = _EXTRAS.get(raw.lower().replace("-", "_"))
        if mapped and mapped not in names:
            names.append(mapped)
    return f"petastream[{','.join(names)}]"


def rewrite_requirement(text: str) -> str | None:
    """``text`` (one requirement, no comment) rewritten, or None when it is not Petastorm."""
    match = _REQUIREMENT.fullmatch(text)
    if match is None or not _SPEC.fullmatch(match["spec"]):
        return None
    return new_requirement(match["extras"]) + match["tail"]


# -- pip command lines (notebook magics, shell cells) --------------------------------------------

_PIP_INSTALL = re.compile(r"(?i)\bpip3?(?:\.exe)?\s+install\b")
_TOKEN = re.compile(r"""(?P<q>['"]?)(?P<req>petastorm(?![\w.\-])[^\s'"]*)(?P=q)(?=\s|$|;|&|\|)""", re.I)
_ANY_TOKEN = re.compile(r"""(?P<q>['"]?)(?P<req>[A-Za-z0-9][^\s'"]*)(?P=q)(?=\s|$|;|&|\|)""")
_PETASTREAM_TOKEN = re.compile(r"""(?i)(?:^|\s)['"]?petastream(?![\w.\-])""")


def rewrite_pip_command(line: str, *, keep_petastorm: bool = False) -> str | None:
    """``pip install ... petastorm==x ...`` with ``"petastream[spark]"``, or None if no change.

    Unquoted, the new requirement is double-quoted: square brackets are glob characters in
    shells (zsh refuses an unmatched glob). ``keep_petastorm``: the code of this notebook still
    imports Petastorm, so petastorm stays and petastream is installed beside it.
    """
    install = _PIP_INSTALL.search(line)
    if install is None:
        return None
    head, tail = line[: install.end()], line[install.end() :]
    if keep_petastorm and _PETASTREAM_TOKEN.search(tail):
        return None

    def replace(match: re.Match[str]) -> str:
        start = match.start()
        if start > 0 and not tail[start - 1].isspace():
            return match.group(0)
        new = rewrite_requirement(match["req"])
        if new is None:
            return match.group(0)
        quote = match["q"] or '"'
        if keep_petastorm:
            return f"{match.group(0)} {quote}{new}{quote}"
        return f"{quote}{new}{quote}"

    new_tail = _TOKEN.sub(replace, tail)
    return None if new_tail == tail else head + new_tail


def pip_requirements(line: str) -> list[str]:
    """The requirement arguments of a ``pip install`` line (options and their values skipped)."""
    install = _PIP_INSTALL.search(line)
    if install is None:
        return []
    tail = re.split(r"[;&|#]", line[install.end() :], maxsplit=1)[0]
    words = tail.split()
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in ("-r", "-c", "-e", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t", "--target")
            continue
        match = _ANY_TOKEN.fullmatch(word)
        if match is not None and "://" not in word and not word.startswith((".", "/")):
            out.append(match["req"])
    return out

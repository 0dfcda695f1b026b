"""One decision for every dependency-file format: what happens to ``petastorm`` and its pins.

Each format's scanner (requirements files, setup.cfg, pyproject.toml, setup.py, conda
environment files) turns the file into :class:`Entry` objects -- one requirement each, with its
position, its same-line comment and how to add a sibling requirement after it or remove it --
and :func:`plan_dependencies` decides, the same way for all of them:

- **petastorm** becomes ``petastream[spark]`` (extras carried over), unless the code scanned in
  the same run still imports Petastorm (:class:`Project`): then petastorm stays, petastream is
  added beside it, and a ``petastorm-kept`` item says which code keeps it. Once no code needs it
  and petastream is already listed, the petastorm line is removed.
- **pins** on packages petastream requires are reviewed (:mod:`.pins`): rewritten when a comment
  ties them to Petastorm -- on the pin's line or on the comment lines right above it, which is
  how a pin is often explained (``# for petastorm`` then ``pyarrow==10.0.1``) -- reported when
  they conflict otherwise.

Edits are plain text spans, applied back to front, so every other byte of the file is kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from .pep508 import NEW_REQUIREMENT, URL_SUGGESTION, rewrite_requirement
from .pins import PinReview, conda_to_pep440, parse_pep508, poetry_to_pep440, review_pin
from .report import ManualItem

__all__ = [
    "Project",
    "Edit",
    "Entry",
    "plan_dependencies",
    "review_pins",
    "apply_edits",
    "kept_item",
    "alone_on_line",
    "attach_comments",
    "line_sibling",
    "inline_sibling",
    "trailing_comment",
    "unchecked_item",
    "line_removal",
]

_PEP508_PARTS = re.compile(r"(?P<head>\s*[A-Za-z0-9][\w.\-]*\s*(?:\[[^\]]*\])?)(?P<spec>[^;]*?)(?P<tail>\s*(?:;.*)?)")
_CONDA_PARTS = re.compile(r"(?P<head>\s*(?:[\w.\-]+::)?[A-Za-z0-9][\w.\-]*)(?P<spec>.*?)\s*")
_URL = re.compile(r"(?i)(egg=petastorm\b|petastorm\s*@|/petastorm(\.git)?\b|\b(git|path|url)\s*=)")
_MAX_LISTED = 3
_LOCATION = re.compile(r"(.*?):(?:cell \d+:)?\d+")
_TRAILING_COMMENT = re.compile(r"[ \t]*,?[ \t]*(?P<comment>#[^\r\n]*)")


@dataclass(frozen=True)
class Project:
    """What the code scanned in the same run says about the petastorm dependency.

    ``petastorm_uses`` are the places (``path:line``) where code still imports Petastorm after
    the migration; ``code_scanned`` is False when the run saw no code at all (only dependency
    files), so nothing is known about what the code needs.
    """

    petastorm_uses: tuple[str, ...] = ()
    code_scanned: bool = True

    @property
    def keep_petastorm(self) -> bool:
        return bool(self.petastorm_uses)

    def uses_text(self) -> str:
        """The first use in each file (``a.py:3, nb.ipynb:cell 2:1``), a few files at most."""
        first: dict[str, str] = {}
        for use in self.petastorm_uses:
            match = _LOCATION.fullmatch(use)
            first.setdefault(match.group(1) if match else use, use)
        shown = ", ".join(list(first.values())[:_MAX_LISTED])
        more = len(first) - _MAX_LISTED
        return shown + (f" and {more} more file(s)" if more > 0 else "")


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


@dataclass
class Entry:
    """One requirement in a dependency file."""

    line: int  # 1-based
    start: int  # span of the requirement text in the file (inside any quotes)
    end: int
    text: str  # as written: a PEP 508 requirement, a conda match spec, or a Poetry constraint
    syntax: str = "pep508"  # "pep508" | "conda" | "poetry"
    name: str = ""  # the package, for conda and Poetry entries (PEP 508 ones carry their own)
    comment: str = ""  # the same-line comment, "#" included
    comment_span: tuple[int, int] | None = None
    comment_above: str = ""  # the comment lines right above its line (see attach_comments)
    annotate: Callable[[str], list[Edit]] | None = None  # edits giving its line a comment
    add: Callable[[str], list[Edit]] | None = None  # edits adding a sibling requirement after it
    remove: Edit | None = None  # the edit deleting it (its whole line), where that is safe
    new_petastorm: Callable[[Entry], str | None] | None = None  # format-specific replacement

    @property
    def package(self) -> str:
        if self.syntax != "pep508":
            return self.name
        req = parse_pep508(self.text.strip())
        return req.name if req is not None else ""

    @property
    def is_petastorm(self) -> bool:
        return self.package.lower() == "petastorm"

    @property
    def is_petastream(self) -> bool:
        return self.package.lower() == "petastream"


def kept_item(
    line: int, written: str, project: Project, how: str, new: str = NEW_REQUIREMENT
) -> ManualItem:
    """``how``: ``added`` (``new`` added beside it), ``listed`` (already there) or ``missing``."""
    beside = {
        "added": f" and {new} added beside it",
        "listed": " (petastream is listed too)",
        "missing": f"; add {new} beside it by hand",
    }[how]
    return ManualItem(
        line,
        "petastorm-kept",
        f"{written} kept{beside}: code still imports Petastorm at {project.uses_text()}",
        "migrate those usages (see their items), then run petastream migrate again to drop petastorm",
    )


def plan_dependencies(
    entries: Sequence[Entry], project: Project | None
) -> tuple[list[Edit], list[ManualItem]]:
    """The edits and items for one file's requirements; ``project`` None: nothing is known
    about the code (the file was migrated on its own), so petastorm is replaced."""
    edits: list[Edit] = []
    items: list[ManualItem] = []
    has_petastream = any(e.is_petastream for e in entries)
    touched = has_petastream
    for entry in entries:
        if entry.is_petastorm or "petastorm" in entry.text.lower() and entry.syntax == "pep508":
            touched |= _plan_petastorm(entry, project, has_petastream, edits, items) is not None
    if touched:
        review_pins(entries, project, edits, items)
    return edits, sorted(items, key=lambda i: i.line)


def _new_requirement(entry: Entry) -> str | None:
    if entry.new_petastorm is not None:
        return entry.new_petastorm(entry)
    return rewrite_requirement(entry.text.strip())


def _plan_petastorm(
    entry: Entry,
    project: Project | None,
    has_petastream: bool,
    edits: list[Edit],
    items: list[ManualItem],
) -> str | None:
    """Edits for one petastorm requirement; returns the petastream requirement it introduces."""
    written = entry.text.strip()
    if _URL.search(written):
        items.append(
            ManualItem(
                entry.line,
                "unsupported-requirement",
                f"Petastorm installed from a URL or path: {written}",
                URL_SUGGESTION,
            )
        )
        return None
    new = _new_requirement(entry)
    if new is None:
        return None
    if project is not None and project.keep_petastorm:
        if has_petastream:
            items.append(kept_item(entry.line, written, project, "listed"))
            return None
        if entry.add is None:
            items.append(kept_item(entry.line, written, project, "missing", new))
            return None
        edits.extend(entry.add(new))
        items.append(kept_item(entry.line, written, project, "added", new))
        return new
    if has_petastream:
        if project is not None and project.code_scanned and entry.remove is not None:
            edits.append(entry.remove)  # nothing needs it any more: drop it
        else:
            items.append(
                ManualItem(
                    entry.line,
                    "unsupported-requirement",
                    f"{written} is listed next to petastream",
                    "remove the Petastorm requirement",
                )
            )
        return None
    edits.append(Edit(entry.start, entry.end, new))
    if project is not None and not project.code_scanned:
        items.append(unchecked_item(entry.line, written, new))
    return new


def unchecked_item(line: int, written: str, new: str) -> ManualItem:
    return ManualItem(
        line,
        "dependencies-unchecked",
        f"{written} replaced by {new} without looking at any code (no code was scanned in this run)",
        "run petastream migrate on the whole project, so petastorm stays while code still needs it",
        severity="info",
    )


# -- pins -------------------------------------------------------------------------------------------


def _range(entry: Entry) -> tuple[str, SpecifierSet] | None:
    if entry.syntax == "conda":
        match = _CONDA_PARTS.fullmatch(entry.text)
        spec = conda_to_pep440(match["spec"]) if match is not None else None
        return (entry.name, spec) if spec is not None else None
    if entry.syntax == "poetry":
        spec = poetry_to_pep440(entry.text)
        return (entry.name, spec) if spec is not None else None
    req = parse_pep508(entry.text.strip())
    if req is None or req.url:
        return None
    return req.name, req.specifier


def review_pins(
    entries: Iterable[Entry],
    project: Project | None,
    edits: list[Edit],
    items: list[ManualItem],
) -> None:
    keep = project is not None and project.keep_petastorm
    for entry in entries:
        if entry.is_petastorm or entry.is_petastream:
            continue
        found = _range(entry)
        if found is None:
            continue
        name, pinned = found
        written = f'{entry.name} = "{entry.text}"' if entry.syntax == "poetry" else entry.text.strip()
        comments = "\n".join(c for c in (entry.comment_above, entry.comment) if c)
        review = review_pin(name, pinned, comments, keep_petastorm=keep, written=written)
        if review is not None:
            _apply_review(entry, review, edits, items)


def _apply_review(entry: Entry, review: PinReview, edits: list[Edit], items: list[ManualItem]) -> None:
    if review.action != "rewrite":
        severity = "manual" if review.action == "conflict" else "info"
        code = "conflicting-pin" if review.action == "conflict" else "petastorm-pin"
        items.append(ManualItem(entry.line, code, review.message, review.suggestion, severity=severity))
        return
    edits.append(Edit(entry.start, entry.end, _respec(entry, review.spec)))
    if entry.comment_span is not None:
        edits.append(Edit(*entry.comment_span, review.comment))
    elif entry.annotate is not None:  # tied by the comment above: the line gets its own
        edits.extend(entry.annotate(review.comment))
    items.append(ManualItem(entry.line, "pin-rewritten", review.message, review.suggestion, severity="info"))


def _respec(entry: Entry, spec: str) -> str:
    if entry.syntax == "poetry":
        return spec
    pattern = _CONDA_PARTS if entry.syntax == "conda" else _PEP508_PARTS
    match = pattern.fullmatch(entry.text)
    if match is None:  # pragma: no cover - _range parsed it
        return entry.text
    tail = match.groupdict().get("tail") or ""
    return f"{match['head'].rstrip()}{spec}{tail}"


# -- building blocks for the scanners ------------------------------------------------------------


def _line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Start of the line holding ``text[start:end]`` and the end of its content (before CR/LF)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    if line_end > line_start and text[line_end - 1] == "\r":
        line_end -= 1
    return line_start, line_end


def alone_on_line(text: str, start: int, end: int, quote: str = "") -> bool:
    """Only indentation (and the opening quote) before, only a comma and a comment after."""
    line_start, line_end = _line_bounds(text, start, end)
    before = text[line_start:start]
    after = text[end + len(quote) : line_end]
    return before.strip() == quote.strip() and re.fullmatch(r"\s*,?\s*(#.*)?", after) is not None


def line_sibling(
    text: str, start: int, end: int, *, quote: str = "", comma: bool = False, prefix: str | None = None
) -> Callable[[str], list[Edit]]:
    """Adding a requirement on a new line after the one holding ``text[start:end]``, written
    like it: same indentation, list marker and quotes, no comment; ``comma``: entries are
    comma-separated (TOML, Python), so both lines end with one. ``prefix`` replaces what
    precedes the requirement (a ``setup.cfg`` key line gets an indented continuation line).
    """
    line_start, line_end = _line_bounds(text, start, end)
    newline = "\r\n" if "\r\n" in text else "\n"
    lead = text[line_start:start] if prefix is None else prefix
    closing = end + len(quote)
    has_comma = text[closing:line_end].lstrip().startswith(",")

    def add(new: str) -> list[Edit]:
        line = f"{newline}{lead}{new}{quote}{',' if comma else ''}"
        if not comma or has_comma:
            return [Edit(line_end, line_end, line)]
        if closing == line_end:  # one insertion point: one edit, comma first
            return [Edit(line_end, line_end, "," + line)]
        return [Edit(closing, closing, ","), Edit(line_end, line_end, line)]

    return add


def trailing_comment(text: str, after: int) -> tuple[str, tuple[int, int] | None]:
    """The comment ending the line after ``text[after]`` (past an optional comma), if any."""
    match = _TRAILING_COMMENT.match(text, after)
    if match is None:
        return "", None
    return match["comment"], (match.start("comment"), match.end("comment"))


def inline_sibling(end: int, quote: str) -> Callable[[str], list[Edit]]:
    """Adding a requirement right after a quoted one that shares its line: ``, "new"``."""
    closing = end + len(quote)
    return lambda new: [Edit(closing, closing, f", {quote}{new}{quote}")]


def attach_comments(
    text: str, entries: list[Entry], *, inline: bool = True, prefixes: str = "#"
) -> list[Entry]:
    """Give each entry that is the only requirement on its line the comment lines right above
    that line (``comment_above``: consecutive lines starting with one of ``prefixes``, no blank
    line between) and, when its line has no comment, a way to add one (``annotate``): at the
    end of the line, or, where the format has no end-of-line comments (``inline`` False:
    setup.cfg, whose values setuptools reads up to the end of the line), on a line above."""
    per_line = Counter(e.line for e in entries)
    newline = "\r\n" if "\r\n" in text else "\n"
    for entry in entries:
        if per_line[entry.line] != 1:
            continue
        line_start, line_end = _line_bounds(text, entry.start, entry.end)
        entry.comment_above = _comments_above(text, line_start, prefixes)
        content = text[line_start:line_end].rstrip()
        if entry.comment_span is not None or "#" in text[entry.end : line_end] or content.endswith("\\"):
            continue
        if inline:
            at = line_start + len(content)
            entry.annotate = lambda comment, at=at: [Edit(at, at, f"  {comment}")]
        else:
            indent = content[: len(content) - len(content.lstrip())]
            entry.annotate = lambda comment, at=line_start, indent=indent: [
                Edit(at, at, f"{indent}{comment}{newline}")
            ]
    return entries


def _comments_above(text: str, line_start: int, prefixes: str) -> str:
    lines: list[str] = []
    end = line_start
    while end > 0:
        start = text.rfind("\n", 0, end - 1) + 1
        line = text[start:end].strip()
        if not line or line[0] not in prefixes:
            break
        lines.append(line)
        end = start
    return "\n".join(reversed(lines))


def line_removal(text: str, start: int, end: int) -> Edit:
    """Deleting the whole line that holds ``text[start:end]`` (and its line break)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return Edit(line_start, len(text) if line_end == -1 else line_end + 1, "")


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text

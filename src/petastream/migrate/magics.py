"""IPython/Databricks magics in notebook code: hide them from the parser, fix ``pip install``.

A code cell is Python plus magics (``%pip install x``, ``!ls``, ``files = !ls``, ``obj?``)
that LibCST cannot parse. :func:`mask_cell` swaps each magic line for a placeholder call on
its own line (same line count, so reported line numbers stay right), and :func:`unmask`
puts the originals back, with ``pip install petastorm`` rewritten by :func:`rewrite_magics`
once the notebook's code has said whether it still needs Petastorm. Cell magics decide what
the whole cell is: ``%%time`` and friends run Python, ``%%bash`` is shell (only its ``pip
install`` lines change), anything else (``%%sql``, ``%%html``...) is not touched.

IPython runs a cell whose first line is indented by removing that indentation from every
line that has it; :func:`dedent_cell` does the same before parsing and :func:`reindent_cell`
puts it back afterwards, on unchanged lines exactly as they were.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from .pep508 import NEW_REQUIREMENT, rewrite_pip_command
from .report import ManualItem

__all__ = [
    "MaskedCell",
    "mask_cell",
    "unmask",
    "rewrite_magics",
    "rewrite_shell",
    "cell_language",
    "conda_item",
    "dedent_cell",
    "reindent_cell",
]

# A magic starts its line: "%name"/"%%name", "!cmd" (not "% x" or "!= x", which continue an
# expression), "var = !cmd" / "var = %name", or a help request "obj?".
_MAGIC_START = r"(?:%(?=[A-Za-z%])|!(?=[^\s=]))"
_LINE_MAGIC = re.compile(
    rf"(?P<indent>[ \t]*)(?:{_MAGIC_START}|[\w.]+[ \t]*=[ \t]*{_MAGIC_START}|[\w.]+\?{{1,2}}[ \t]*$)"
)
_PLACEHOLDER = re.compile(r"[ \t]*__petastream_magic__\((?P<index>\d+)\)[ \t]*")
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "python", "python3"}
_SHELL_CELL_MAGICS = {"bash", "sh", "script", "system"}
_CONDA = re.compile(r"(?i)\b(?:conda|mamba)\s+install\b.*\bpetastorm\b")


def cell_language(source: str) -> str:
    """``python``, ``shell`` or ``other``, from a cell magic on the first line."""
    first = source.lstrip("\n").split("\n", 1)[0].strip()
    match = re.match(r"%%?(?P<name>[\w-]+)(?=\s|$)", first)
    if match is None:
        return "python"
    name, cell_magic = match["name"], first.startswith("%%")
    if name in _SHELL_CELL_MAGICS and (cell_magic or first == f"%{name}"):
        return "shell"
    if cell_magic:
        return "python" if name in _PYTHON_CELL_MAGICS else "other"
    # Databricks cells switch language with a lone line magic: %sql, %scala, %r, %md, %fs...
    if first == f"%{name}" and name not in _PYTHON_CELL_MAGICS and name not in {"pip", "conda"}:
        return "other"
    return "python"


@dataclass
class MaskedCell:
    code: str
    originals: dict[int, str] = field(default_factory=dict)
    units: list[list[int]] = field(default_factory=list)  # placeholders of one magic (continuations)


def mask_cell(source: str, first_index: int = 0) -> MaskedCell:
    """``source`` with magic lines replaced by placeholders numbered from ``first_index``."""
    lines = source.split("\n")
    out: list[str] = []
    originals: dict[int, str] = {}
    units: list[list[int]] = []
    index = first_index
    i = 0
    while i < len(lines):
        match = _LINE_MAGIC.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        unit = [lines[i]]  # the magic line and its backslash continuations
        while unit[-1].endswith("\\") and i + len(unit) < len(lines):
            unit.append(lines[i + len(unit)])
        units.append(list(range(index, index + len(unit))))
        for original in unit:
            originals[index] = original
            out.append(f"{match['indent']}__petastream_magic__({index})")
            index += 1
        i += len(unit)
    return MaskedCell("\n".join(out), originals, units)


def rewrite_magics(masked: MaskedCell, *, keep_petastorm: bool) -> dict[int, str]:
    """The originals with their ``pip install petastorm`` rewritten (a unit at a time)."""
    out = dict(masked.originals)
    for unit in masked.units:
        joined = "\n".join(out[i] for i in unit)
        new = rewrite_pip_command(joined, keep_petastorm=keep_petastorm)
        if new is not None:
            out.update(zip(unit, new.split("\n"), strict=True))
    return out


def unmask(code: str, originals: dict[int, str]) -> str:
    lines = code.split("\n")
    for i, line in enumerate(lines):
        match = _PLACEHOLDER.fullmatch(line)
        if match is not None and int(match["index"]) in originals:
            lines[i] = originals[int(match["index"])]
    return "\n".join(lines)


def rewrite_shell(source: str, *, keep_petastorm: bool = False) -> str:
    """A shell cell (``%%bash``) or Databricks ``# MAGIC`` text with pip lines rewritten."""
    lines = source.split("\n")
    return "\n".join(rewrite_pip_command(line, keep_petastorm=keep_petastorm) or line for line in lines)


def dedent_cell(code: str) -> tuple[str, str]:
    """``code`` without the first line's indentation (removed where a line starts with it, as
    IPython does), and that indentation."""
    first = next((line for line in code.split("\n") if line.strip()), "")
    prefix = first[: len(first) - len(first.lstrip(" \t"))]
    if not prefix:
        return code, ""
    lines = [line[len(prefix) :] if line.startswith(prefix) else line for line in code.split("\n")]
    return "\n".join(lines), prefix


def reindent_cell(original: str, dedented: str, migrated: str, prefix: str) -> str:
    """``migrated`` (from ``dedented``) indented back like ``original``: unchanged lines come
    back exactly as they were, new lines get ``prefix``."""
    if not prefix:
        return migrated
    before, after = dedented.split("\n"), migrated.split("\n")
    lines = original.split("\n")
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += lines[i1:i2]
        else:
            out += [prefix + line if line.strip() else line for line in after[j1:j2]]
    return "\n".join(out)


def conda_item(line_text: str, line: int, cell: int | None = None) -> ManualItem | None:
    if _CONDA.search(line_text) is None:
        return None
    return ManualItem(
        line,
        "unsupported-install",
        "Petastorm installed with conda",
        f'install petastream with pip: %pip install "{NEW_REQUIREMENT}"',
        cell=cell,
    )

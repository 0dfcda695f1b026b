"""IPython/Databricks magics in notebook code: hide them from the parser, fix ``pip install``.

A code cell is Python plus magics (``%pip install x``, ``!ls``, ``files = !ls``, ``obj?``)
that LibCST cannot parse. :func:`mask_cell` swaps each magic line for a placeholder call on
its own line (same line count, so reported line numbers stay right), and :func:`unmask`
puts the originals back, with any ``pip install petastorm`` already rewritten. Cell magics
decide what the whole cell is: ``%%time`` and friends run Python, ``%%bash`` is shell (only
its ``pip install`` lines change), anything else (``%%sql``, ``%%html``...) is not touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .report import ManualItem
from .requirements import NEW_REQUIREMENT, rewrite_pip_command

__all__ = ["MaskedCell", "mask_cell", "unmask", "cell_language", "conda_item"]

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


def mask_cell(source: str, first_index: int = 0) -> MaskedCell:
    """``source`` with magic lines replaced by placeholders numbered from ``first_index``."""
    lines = source.split("\n")
    out: list[str] = []
    originals: dict[int, str] = {}
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
        rewritten = (rewrite_pip_command("\n".join(unit)) or "\n".join(unit)).split("\n")
        for original in rewritten:
            originals[index] = original
            out.append(f"{match['indent']}__petastream_magic__({index})")
            index += 1
        i += len(unit)
    return MaskedCell("\n".join(out), originals)


def unmask(code: str, originals: dict[int, str]) -> str:
    lines = code.split("\n")
    for i, line in enumerate(lines):
        match = _PLACEHOLDER.fullmatch(line)
        if match is not None and int(match["index"]) in originals:
            lines[i] = originals[int(match["index"])]
    return "\n".join(lines)


def rewrite_shell(source: str) -> str:
    """A shell cell (``%%bash``) or Databricks ``# MAGIC`` text with pip lines rewritten."""
    lines = source.split("\n")
    return "\n".join(rewrite_pip_command(line) or line for line in lines)


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

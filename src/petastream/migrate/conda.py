"""Conda environment files (``environment.yml``, ``environment-gpu.yaml``, MLflow's ``conda.yaml``).

The file is read with PyYAML's composer, only for the positions of the ``dependencies`` items;
edits are made to the text, so comments and layout stay. Both sections are covered:

- the ``pip:`` sub-list holds PEP 508 requirements and goes through :mod:`.depfile` like a
  requirements file;
- the conda list holds match specs (``pyarrow=10.0.1``, ``conda-forge::petastorm``). Its pins
  are reviewed like any other. petastream is not a conda package, so a conda ``petastorm``
  entry is removed (or kept, while code still imports Petastorm) and ``petastream[spark]`` goes
  into the ``pip:`` list, which is created (with ``pip`` itself) when the file has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from petastream.errors import FormatError

from .depfile import (
    Edit,
    Entry,
    Project,
    apply_edits,
    attach_comments,
    kept_item,
    line_removal,
    line_sibling,
    plan_dependencies,
    review_pins,
    unchecked_item,
)
from .pep508 import NEW_REQUIREMENT
from .report import ManualItem

__all__ = ["is_conda_environment", "migrate_environment_yml"]

_NAME = re.compile(r"\s*(?:[\w.\-]+::)?(?P<name>[A-Za-z0-9_][\w.\-]*)")
_COMMENT = re.compile(r"[ \t]+(?P<comment>#[^\n\r]*)")
_FILE_NAME = re.compile(r"(?i)(environment|conda)([-_.][\w.\-]*)?\.ya?ml")


def is_conda_environment(name: str) -> bool:
    return _FILE_NAME.fullmatch(name) is not None and not name.lower().startswith("conda-lock")


@dataclass
class _Layout:
    conda: list[Entry] = field(default_factory=list)
    pip: list[Entry] = field(default_factory=list)
    has_pip_package: bool = False  # "- pip" among the conda packages


def _scalar_entry(text: str, node: yaml.ScalarNode, syntax: str) -> Entry:
    start, end = node.start_mark.index, node.end_mark.index
    quote = text[start] if node.style in ("'", '"') else ""
    if quote:
        start, end = start + 1, end - 1
    comment, span = "", None
    found = _COMMENT.match(text, end + len(quote))
    if found is not None:
        comment, span = found["comment"].rstrip("\r"), (found.start("comment"), found.start("comment") + len(found["comment"].rstrip("\r")))
    name = _NAME.match(text, start, end)
    return Entry(
        node.start_mark.line + 1,
        start,
        end,
        text[start:end],
        syntax=syntax,
        name=name["name"] if name is not None and syntax == "conda" else "",
        comment=comment,
        comment_span=span,
        add=line_sibling(text, start, end, quote=quote),
        remove=line_removal(text, start, end),
    )


def _layout(text: str) -> _Layout | None:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        raise FormatError(f"not a YAML conda environment file: {err}") from err
    if not isinstance(root, yaml.MappingNode):
        return None
    deps = next(
        (v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "dependencies"), None
    )
    if not isinstance(deps, yaml.SequenceNode):
        return None
    layout = _Layout()
    for item in deps.value:
        if isinstance(item, yaml.ScalarNode):
            entry = _scalar_entry(text, item, "conda")
            layout.conda.append(entry)
            layout.has_pip_package |= entry.name.lower() == "pip"
        elif isinstance(item, yaml.MappingNode):
            for key, value in item.value:
                if key.value == "pip" and isinstance(value, yaml.SequenceNode):
                    layout.pip += [
                        _scalar_entry(text, v, "pep508") for v in value.value if isinstance(v, yaml.ScalarNode)
                    ]
    attach_comments(text, [*layout.conda, *layout.pip])
    return layout


def migrate_environment_yml(text: str, project: Project | None = None) -> tuple[str, list[ManualItem]]:
    layout = _layout(text)
    if layout is None:
        return text, []
    edits, items = plan_dependencies(layout.pip, project)
    pip_has_petastream = any(e.is_petastream or e.is_petastorm for e in layout.pip)
    keep = project is not None and project.keep_petastorm
    touched = pip_has_petastream
    for entry in layout.conda:
        if not entry.is_petastorm:
            continue
        touched = True
        addition = None if pip_has_petastream else _pip_addition(text, entry, layout)
        pip_has_petastream = True
        if project is not None and keep:
            how = "added" if addition is not None else "listed"
            items.append(kept_item(entry.line, entry.text, project, how))
            edits += [addition] if addition is not None else []
            continue
        # petastream is not a conda package: the conda entry goes, the pip one comes
        if project is not None and not project.code_scanned:
            items.append(unchecked_item(entry.line, entry.text, NEW_REQUIREMENT))
        removal = entry.remove or line_removal(text, entry.start, entry.end)
        if addition is not None and removal.start <= addition.start <= removal.end:
            newline = "\r\n" if "\r\n" in text else "\n"
            edits.append(Edit(removal.start, removal.end, addition.text.lstrip("\r\n") + newline))
        else:
            edits += [removal, *([addition] if addition is not None else [])]
    if touched:
        review_pins(
            [e for e in layout.conda if not e.is_petastorm], project, edits, items
        )
    return apply_edits(text, edits), sorted(items, key=lambda i: i.line)


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    end = len(text) if end == -1 else end
    return end - 1 if end > 0 and text[end - 1] == "\r" else end


def _pip_addition(text: str, entry: Entry, layout: _Layout) -> Edit:
    """The edit putting petastream into the pip section (creating it after ``entry``'s line)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    if layout.pip:  # after the pip list's last item, written like it
        last = layout.pip[-1]
        lead = text[text.rfind("\n", 0, last.start) + 1 : last.start]
        lead = lead.rstrip("\"'")
        end = _line_end(text, last.end)
        return Edit(end, end, f"{newline}{lead}{NEW_REQUIREMENT}")
    line_start = text.rfind("\n", 0, entry.start) + 1
    marker = re.match(r"[ \t]*-[ \t]*", text[line_start : entry.start])
    lead = marker.group(0) if marker else "  - "
    indent = lead[: len(lead) - len(lead.lstrip())]
    lines = [] if layout.has_pip_package else [f"{lead}pip"]
    lines += [f"{lead}pip:", f"{indent}    - {NEW_REQUIREMENT}"]
    end = _line_end(text, entry.end)
    return Edit(end, end, "".join(newline + line for line in lines))

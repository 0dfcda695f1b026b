"""Small LibCST builders: dotted names, import statements, subsets of an import's names.

Kept apart from the analysis so the rules for commas and parentheses (the fiddly part of
splitting ``from petastorm import (a,  # why\\n b)``) live in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.helpers import get_full_name_for_node

from petastream.errors import InternalError

__all__ = [
    "dotted",
    "full_name",
    "make_import",
    "make_import_from",
    "with_names",
    "renamed_alias",
    "local_name",
    "string_with",
]


def dotted(path: str) -> cst.Name | cst.Attribute:
    """``a.b.c`` as an expression node."""
    head, *rest = path.split(".")
    node: cst.Name | cst.Attribute = cst.Name(head)
    for part in rest:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def string_with(node: cst.SimpleString, content: str) -> cst.SimpleString:
    """``node`` with new content (a dotted name: nothing to escape), same prefix and quotes."""
    return node.with_changes(value=f"{node.prefix}{node.quote}{content}{node.quote}")


def full_name(node: cst.CSTNode | None) -> str | None:
    return None if node is None else get_full_name_for_node(node)


def local_name(alias: cst.ImportAlias) -> str:
    """The name an import alias binds (``import a.b`` binds ``a``)."""
    if alias.asname is not None:
        return cst.ensure_type(alias.asname.name, cst.Name).value
    name = full_name(alias.name)
    if name is None:  # pragma: no cover - the parser never produces this
        raise InternalError("import alias without a name")
    return name.split(".")[0]


def make_import(module: str) -> cst.Import:
    return cst.Import(names=[cst.ImportAlias(name=dotted(module))])


def renamed_alias(alias: cst.ImportAlias, target: str, *, from_import: bool) -> cst.ImportAlias:
    """``alias`` pointing at ``target`` while binding the same local name as before.

    For a from-import ``target`` is the imported name's full path; only its last component
    goes in the alias (``from petastorm import spark`` -> ``from petastream import compat as spark``).
    """
    bound = local_name(alias)
    new_name = target.rpartition(".")[2] if from_import else target
    asname = alias.asname
    if asname is None and from_import and new_name != bound:
        asname = cst.AsName(name=cst.Name(bound))
    return alias.with_changes(name=dotted(new_name), asname=asname)


def make_import_from(module: str, aliases: Sequence[cst.ImportAlias]) -> cst.ImportFrom:
    """A single-line ``from module import ...`` of fresh copies of ``aliases``."""
    names = [cst.ImportAlias(name=a.name, asname=_plain_asname(a.asname)) for a in aliases]
    return cst.ImportFrom(module=dotted(module), names=names)


def _plain_asname(asname: cst.AsName | None) -> cst.AsName | None:
    return None if asname is None else cst.AsName(name=asname.name)


def with_names(
    statement: cst.ImportFrom, module: str | None, aliases: Sequence[cst.ImportAlias]
) -> cst.ImportFrom:
    """``statement`` keeping only ``aliases`` (a subset of its names, in order).

    Parenthesised multi-line imports keep one name per line with each name's own trailing
    comment; single-line ones are rebuilt plainly.
    """
    new_module = statement.module if module is None else dotted(module)
    lpar = statement.lpar
    if lpar is None or not isinstance(lpar.whitespace_after, cst.ParenthesizedWhitespace):
        names = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in aliases]
        if lpar is not None:  # "(a, b)" on one line: keep the parentheses, drop a trailing comma
            return statement.with_changes(module=new_module, names=names)
        return statement.with_changes(module=new_module, names=names, lpar=None, rpar=None)
    return statement.with_changes(
        module=new_module,
        names=_one_per_line(statement, aliases, lpar.whitespace_after),
        rpar=cst.RightParen(whitespace_before=cst.SimpleWhitespace("")),
    )


def _one_per_line(
    statement: cst.ImportFrom,
    aliases: Sequence[cst.ImportAlias],
    opening: cst.ParenthesizedWhitespace,
) -> list[cst.ImportAlias]:
    indent = opening.last_line
    original = [] if isinstance(statement.names, cst.ImportStar) else list(statement.names)
    out = []
    for i, alias in enumerate(aliases):
        last = i == len(aliases) - 1
        out.append(
            alias.with_changes(
                comma=cst.Comma(
                    whitespace_after=cst.ParenthesizedWhitespace(
                        first_line=_line_end(statement, original, alias),
                        indent=True,
                        last_line=cst.SimpleWhitespace("") if last else indent,
                    )
                )
            )
        )
    return out


def _line_end(
    statement: cst.ImportFrom, original: list[cst.ImportAlias], alias: cst.ImportAlias
) -> cst.TrailingWhitespace:
    """The end of ``alias``'s line (its comment, if any) in the original statement."""
    comma = alias.comma
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        return comma.whitespace_after.first_line
    rpar = statement.rpar
    if (
        original
        and alias is original[-1]
        and rpar is not None
        and isinstance(rpar.whitespace_before, cst.ParenthesizedWhitespace)
    ):
        return rpar.whitespace_before.first_line
    return cst.TrailingWhitespace()

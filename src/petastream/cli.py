"""The ``petastream`` command: inspect, verify, migrate.

Each subcommand lives in the module that owns it and exposes ``add_arguments(parser)`` and
``run(args) -> int``; this file only wires them up, importing each lazily so ``petastream
inspect`` never pays for libcst and ``petastream migrate`` never for pyarrow.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

# subcommand -> (module, one-line help)
_COMMANDS = {
    "inspect": ("petastream.mds.inspect", "show an MDS dataset's columns, shards, rows and sizes"),
    "verify": ("petastream.mds.inspect", "check every shard against its sizes and hashes"),
    "cache": ("petastream.mds.cache_admin", "show and prune the local shard cache"),
    "migrate": ("petastream.migrate.cli", "rewrite Petastorm code to use petastream.compat"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="petastream", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen subcommand's module is imported (and so only its dependencies).
        if name == wanted:
            getattr(import_module(module), f"add_{name}_arguments")(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    module = import_module(_COMMANDS[args.command][0])
    return int(getattr(module, f"run_{args.command}")(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

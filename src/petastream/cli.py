"""The ``petastream`` command (also ``python -m petastream``): inspect, verify, bench, migrate.

Each subcommand lives in the module that owns it and exposes ``add_<name>_arguments(parser)``
and ``run_<name>(args) -> int``; this file only wires them up, importing each lazily so
``petastream inspect`` never pays for libcst and ``petastream migrate`` never for pyarrow.

Exit status: 0 success; 1 the command's own failure (damaged shards, pending changes);
2 a usage error: bad arguments, a path that does not exist, a missing extra (one line on
stderr saying what to install).
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module
from types import ModuleType

from petastream import __version__
from petastream._extras import missing_extra
from petastream.errors import MissingExtraError, PetastreamError

DESCRIPTION = "petastream: Spark DataFrames to PyTorch and TensorFlow through MDS datasets."

# subcommand -> (module, one-line help)
_COMMANDS = {
    "inspect": ("petastream.mds.inspect", "show an MDS dataset's columns, shards, rows and sizes"),
    "verify": ("petastream.mds.inspect", "check every shard against its sizes and hashes"),
    "bench": ("petastream.bench", "measure the data path: rows/s and MB/s of the loaders"),
    "cache": ("petastream.mds.cache_admin", "show and prune the local shard cache"),
    "migrate": ("petastream.migrate.cli", "rewrite Petastorm code to use petastream.compat"),
}
# subcommands whose positional PATHs are local files or directories (at least one must exist)
_LOCAL_PATHS = {"migrate": "paths"}


class UsageError(PetastreamError):
    """Reported as ``petastream COMMAND: message`` with exit status 2 (never leaves :func:`main`)."""


def _load(command: str) -> ModuleType:
    try:
        return import_module(_COMMANDS[command][0])
    except ImportError as e:
        friendly = missing_extra(e, f"petastream {command}")
        if friendly is None:
            raise
        raise UsageError(str(friendly).removeprefix(f"petastream {command} ")) from None


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="petastream", description=DESCRIPTION,
        epilog="Run 'petastream COMMAND --help' for a command's options. Exit status 2: usage "
               "errors (bad arguments, missing paths, a missing extra).")
    parser.add_argument("--version", action="version", version=f"petastream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (_, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen subcommand's module is imported (and so only its dependencies).
        if name == wanted:
            getattr(_load(name), f"add_{name}_arguments")(p)
    return parser


def _check_paths(command: str, args: argparse.Namespace) -> None:
    """Nothing to work on at all is a usage error. When only some paths are missing, the
    command reports them itself and still processes the others (``migrate``'s contract)."""
    attr = _LOCAL_PATHS.get(command)
    paths = getattr(args, attr) if attr else []
    missing = [p for p in paths if not os.path.exists(p)]
    if paths and len(missing) == len(paths):
        raise UsageError(f"no such file or directory: {', '.join(missing)}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    try:
        args = build_parser(argv).parse_args(argv)
        _check_paths(args.command, args)
        return int(getattr(_load(args.command), f"run_{args.command}")(args) or 0)
    except UsageError as e:
        print(f"petastream {command}: {e}", file=sys.stderr)
        return 2
    except MissingExtraError as e:  # a command that needs an extra only for some inputs
        print(f"petastream {command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

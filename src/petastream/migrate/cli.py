"""``petastream migrate PATH...``: arguments and the run (wired up by ``petastream.cli``).

Default: print a unified diff of what would change (stdout) and write nothing. ``--write``
rewrites the files in place; ``--check`` exits 1 when anything would change (CI). A summary
(files scanned / changed / flagged, the manual items and notes per file) always goes to
stderr, so stdout stays a clean patch. Exit codes are in :data:`EPILOG` (and
docs/migrate-tool.md): rewrites pending and "only manual items remain" are told apart, so
``--check`` can gate CI after a partial migration.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .files import Options
from .report import Report
from .runner import Progress, migrate_paths, unified_diff, write_results

__all__ = ["add_migrate_arguments", "run_migrate"]

EPILOG = """\
exit status:
  0  nothing left to do (notes may still be printed)
  1  --check only: some files would be rewritten (run with --write)
  2  errors: unreadable or unparseable files (the other files are still processed)
  3  nothing to rewrite, but manual items remain (listed on stderr and in --report)
  Precedence: 2, then 1, then 3. To gate CI once the automatic part is done and the
  manual items are tracked: petastream migrate --check . || [ $? -eq 3 ]
examples:
  petastream migrate .                      # show the diff, write nothing
  petastream migrate --write --todo src/    # rewrite in place, mark what is left
  petastream migrate --check --report migrate.json .   # CI gate
"""


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of processes, got {value!r}") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError(f"-j must be 0 (one per CPU) or more, got {jobs}")
    return jobs


def add_migrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files or directories (.py, .ipynb, Databricks .py notebooks, requirements*.txt/.in, "
        "setup.py, setup.cfg, pyproject.toml, conda environment*.yml, lock files); run it on "
        "the whole project: dependency files keep petastorm while any code still needs it",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the files in place")
    mode.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if any file would change, 3 if only manual items remain",
    )
    parser.add_argument(
        "--todo",
        action="store_true",
        help="mark what cannot be migrated with '# TODO(petastream): ...' comments",
    )
    parser.add_argument("--report", metavar="FILE", type=Path, help="write a JSON report to FILE")
    parser.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=0,
        metavar="N",
        help="migrate with N processes (default 0: one per CPU)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip paths matching GLOB (repeatable)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no diff and no item list; counts only"
    )


def run_migrate(args: argparse.Namespace) -> int:
    mode = "write" if args.write else "check" if args.check else "diff"
    progress = Progress(sys.stderr)  # a counter on a terminal, a line every few seconds in a log
    results = migrate_paths(
        args.paths, Options(todo=args.todo), jobs=args.jobs, exclude=args.exclude, progress=progress
    )
    if mode == "write":
        write_results(results)
    elif not args.quiet:
        for result in results:
            sys.stdout.write(unified_diff(result))
        sys.stdout.flush()
    report = Report.build(mode, results)
    lines = report.summary_lines()
    if args.quiet:  # errors and the counts only
        lines = [line for line in lines[:-1] if line.startswith("error: ")] + lines[-1:]
    for line in lines:
        print(line, file=sys.stderr)
    if args.report is not None:
        try:
            args.report.write_text(report.to_json(), encoding="utf-8")
        except OSError as err:
            print(f"error: cannot write report {args.report}: {err.strerror or err}", file=sys.stderr)
            return 2
    return report.exit_code()

"""Command-line interface: one sub-command per module in `analysis/commands/`.

Each command module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Any, NoReturn

from . import commands
from .errors import AnalysisError, DataError, is_rust_panic


def _command_modules() -> list[Any]:
    mods = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            mods.append(importlib.import_module(f"{commands.__name__}.{info.name}"))
    return mods


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one error format: a bad command line prints one `error: …` line (with where to find
    the usage) and exits with status 2, as every other bad input does."""

    def error(self, message: str) -> NoReturn:
        """Print `error: message` and exit with status 2."""
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every sub-command registered."""
    parser = _Parser(prog="python -m analysis", description="Tokenizer Lab analysis engine")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _check_argv(argv: list[str]) -> None:
    """Refuse arguments that are not valid UTF-8 (the shell passed raw bytes: Python keeps them as lone
    surrogates, which would fail much later, deep inside a command)."""
    for a in argv:
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            shown = a.encode("utf-8", "surrogateescape")[:60]
            raise DataError(f"an argument is not valid UTF-8 text: {shown!r}") from None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; bad input prints `error: …` to stderr and exits with status 2.

    Commands check their inputs where they enter and raise AnalysisError. As a last resort, the failures bad
    input can still cause in libraries (a file system error, text that is not UTF-8, memory, recursion, a
    panic in a Rust library) are also printed as one `error:` line, never as a traceback; anything else is a
    bug and keeps its traceback.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        _check_argv(argv)
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad command line (2: its `error:` line is printed)
        return e.code if isinstance(e.code, int) else 2
    try:
        return int(args._run(args) or 0)
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        print(f"error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except UnicodeError as e:
        print(f"error: text that is not valid UTF-8 ({e})", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory: the input is too large for this machine", file=sys.stderr)
        return 2
    except RecursionError:
        print("error: the input is nested too deeply", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BaseException as e:
        if is_rust_panic(e):
            print(f"error: the input made a Rust library fail: {e}", file=sys.stderr)
            return 2
        raise

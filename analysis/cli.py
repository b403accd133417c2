"""Command-line interface: one sub-command per module in `analysis/commands/`.

Each command module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Any

from . import commands
from .errors import AnalysisError


def _command_modules() -> list[Any]:
    mods = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            mods.append(importlib.import_module(f"{commands.__name__}.{info.name}"))
    return mods


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every sub-command registered."""
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Tokenizer Lab analysis engine")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; bad input prints `error: …` to stderr and exits with status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

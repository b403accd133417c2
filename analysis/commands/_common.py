"""What several sub-commands share: the tokenizer argument, the output-folder arguments and strict JSON output."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..outputs import json_ready, strict_json
from ..sources import load
from ..tokenizer import LoadedTokenizer


def add_tokenizer_argument(p: argparse.ArgumentParser, flag: str | None = None, **kw) -> None:
    """Add a TOKENIZER argument (folder, tokenizer.json file or hub id) plus --revision/--token."""
    if flag:
        p.add_argument(flag, dest="tokenizer", required=True, help="folder, tokenizer.json or hub id", **kw)
    else:
        p.add_argument("tokenizer", help="folder, tokenizer.json file or hub id", **kw)
    p.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    p.add_argument("--token", default=None, help="hub access token (gated or private repos)")


def load_from_args(args: argparse.Namespace, source: str | None = None) -> LoadedTokenizer:
    """Load the tokenizer an argument names."""
    return load(source or args.tokenizer, revision=args.revision, token=args.token)


def add_force_argument(p: argparse.ArgumentParser) -> None:
    """Add --force: replace a non-empty --out folder whole (without it, such a folder is refused)."""
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing non-empty --out folder (it is replaced whole, never merged)",
    )


def print_json(obj: Any) -> None:
    """Print one strict JSON document to stdout (UTF-8, no ASCII escaping; numpy values and sets converted,
    NaN and infinities written as null)."""
    sys.stdout.write(strict_json(json_ready(obj)) + "\n")

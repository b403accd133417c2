"""What several sub-commands share: the tokenizer argument and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

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


def print_json(obj: Any) -> None:
    """Print one JSON document to stdout (UTF-8, no ASCII escaping; numpy scalars and sets converted)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")

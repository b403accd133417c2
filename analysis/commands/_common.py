"""Arguments shared by several sub-commands."""

from __future__ import annotations

import argparse

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

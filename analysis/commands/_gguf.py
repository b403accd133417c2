"""`--gguf` on the exporting commands (`extend`, `prune`, `reuse`): a GGUF file for llama.cpp written into the
`--out` folder next to the Hugging Face files (:func:`analysis.model.gguf_model.export_gguf`)."""

from __future__ import annotations

import argparse
from typing import Any

from analysis.errors import DataError
from analysis.model.gguf_model import DTYPES, GgufWriteInfo, export_gguf
from analysis.tokenizer.tokenizer import LoadedTokenizer


def add_gguf_arguments(p: argparse.ArgumentParser) -> None:
    """Add --gguf and --gguf-type."""
    p.add_argument(
        "--gguf",
        action="store_true",
        help="also write <out-name>.gguf into --out for llama.cpp: with the model's tensors when a model is "
        "exported, vocabulary-only otherwise",
    )
    p.add_argument(
        "--gguf-type",
        choices=DTYPES,
        default="f32",
        help="type of the resized (from a GGUF model) or converted tensors in the GGUF (default f32)",
    )


def check_gguf_arguments(args: argparse.Namespace) -> None:
    """--gguf needs --out (checked before the work)."""
    if getattr(args, "gguf", False) and not getattr(args, "out", None):
        raise DataError("--gguf needs --out (the GGUF is written into that folder)")


def write_gguf_from_args(
    args: argparse.Namespace, tok: LoadedTokenizer, base: LoadedTokenizer | None
) -> dict[str, Any] | None:
    """With --gguf: write the GGUF of `tok` (the edited tokenizer; `base` the original) into --out; its summary."""
    if not getattr(args, "gguf", False):
        return None
    info = export_gguf(
        args.out, tok, model_source=getattr(args, "model", None), base=base, dtype=args.gguf_type
    )
    return info.to_json() if isinstance(info, GgufWriteInfo) else info

"""How the export check sees an R-BPE export: the folder holds the original tokenizer, the target tokenizer and the
id map (no single tokenizer.json), so the check gets an :class:`analysis.evaluate.export_check.EditedCodec` —
llama.cpp and the pre-flight checks read the original tokenizer (R-BPE keeps every id and the vocabulary size), the
round trip "after" is R-BPE's own encode/decode, and each broken language carries its role: ``reused`` (its script's
ids were given to the target: the method's own price), ``target`` or ``kept`` (collateral damage the protections
exist to prevent)."""

from __future__ import annotations

import os
from pathlib import Path

from analysis.evaluate.export_check import EditedCodec

from .reuse import MAPPING_FILE, ReuseTokenizer
from .segments import language_role

#: The method's own price, stated in the report.
PRICE = (
    "R-BPE gives the ids of scripts it deems unused to the target language: languages written in a reused script "
    "no longer decode to themselves — the method's own price. A broken language of another role (kept, target) "
    "is collateral damage: the protections (--protect symbols,usage; on by default, off with --paper-exact) "
    "exist to prevent it."
)


def reuse_codec(folder: str | os.PathLike) -> EditedCodec | None:
    """The export-check view of an R-BPE folder (written by `reuse --out` or the Token reuse page); None when
    `folder` is not one."""
    root = Path(folder)
    if not (root.is_dir() and (root / MAPPING_FILE).is_file()):
        return None
    rt = ReuseTokenizer.load(root)
    reusable = tuple(rt.info.get("reusable_blocks", []))

    def round_trip(text: str) -> str:
        return rt.decode(rt.encode(text))

    def role(lines: list[str]) -> str:
        return language_role(lines, rt.target_blocks, reusable)

    return EditedCodec(
        tokenizer=rt.old,
        base=rt.old,
        round_trip=round_trip,
        role=role,
        expected_roles=("reused",),
        note=PRICE,
    )

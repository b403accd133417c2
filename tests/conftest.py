"""Shared fixtures: where the shared assets live, and loaded tokenizers (cached per session)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets")).resolve()
TOKENIZERS = ASSETS / "tokenizers"
FLORES = ASSETS / "flores200"
ALL_TOKENIZERS = sorted(p.name for p in TOKENIZERS.iterdir()) if TOKENIZERS.is_dir() else []
BPE_TOKENIZERS = [n for n in ALL_TOKENIZERS if n not in ("bert-base-uncased", "pegasus-unigram")]

if not TOKENIZERS.is_dir():
    raise RuntimeError(f"shared assets not found at {ASSETS}; set TOKLAB_ASSETS")


@cache
def load_shared(name: str):
    """Load (once per test session) a tokenizer folder from the shared assets."""
    from analysis import load

    return load(TOKENIZERS / name)


@pytest.fixture(scope="session")
def shared_tokenizer():
    """A function name → LoadedTokenizer for the shared assets (cached)."""
    return load_shared


def flores_lines(lang: str, n: int | None = None) -> list[str]:
    """The devtest lines of one FLORES-200 language (first n)."""
    lines = (FLORES / "devtest" / f"{lang}.devtest").read_text(encoding="utf-8").splitlines()
    return lines[:n] if n else lines

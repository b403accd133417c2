"""Tokenizer integrity (analysis.bpe.integrity, `python -m analysis integrity`) on the shared tokenizers: every id
either comes back alone from its own bytes or is listed with its reason."""

from __future__ import annotations

import json

import pytest
from support import TOKENIZERS, load_shared

from analysis.bpe.integrity import integrity
from analysis.bpe.stt import stt_report
from analysis.cli import main


def test_gpt2_every_id_accounted_for():
    gpt2 = load_shared("gpt2")
    rep = integrity(gpt2)
    c = rep.counts
    assert rep.ids == gpt2.vocab_size == rep.round_trip + len(rep.rows)
    assert c["special"] == 1 and rep.rows[-1].token == "<|endoftext|>"
    assert c["byte piece"] > 0 and c["unreachable"] == len(stt_report(gpt2).unreachable) == 0
    byte = next(r for r in rep.rows if r.reason == "byte piece")
    assert "⟨" in byte.readable  # part of a UTF-8 character: not text on its own


def test_wordpiece_continuations_and_no_stt():
    bert = integrity(load_shared("bert-base-uncased"))
    assert bert.counts["continuation"] > 0 and bert.notes  # ##pieces; no STT for WordPiece
    assert bert.counts["pre-tokenizer splits it"] > 0  # [unused0] is cut at its brackets


@pytest.mark.slow
def test_unreachable_comes_from_the_stt_and_normalised_away_from_the_normalizer():
    llama3 = integrity(load_shared("llama-3.1")).counts
    assert llama3["unreachable"] == len(stt_report(load_shared("llama-3.1")).unreachable) > 0  # STT, reused
    qwen3 = integrity(load_shared("qwen3")).counts
    assert qwen3["normalised away"] > 0  # NFC composes its decomposed tokens


def test_cli(capsys):
    assert main(["integrity", str(TOKENIZERS / "gpt2"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ids"] == 50257 and doc["counts"]["special"] == 1
    assert doc["listed"]["special"][0]["id"] == 50256
    assert main(["integrity", str(TOKENIZERS / "gpt2"), "--quiet"]) == 0
    assert "come back alone" in capsys.readouterr().out

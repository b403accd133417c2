"""Speculative-decoding compatibility (llama.cpp's draft/target rules) on real tokenizers: gpt2 extended by 100
tokens stays a valid pair with its original, by 500 does not; each rule refuses with its reason; the export check
carries the verdict with `--base`."""

from __future__ import annotations

import json

import pytest
from support import TOKENIZERS, flores_lines, load_shared

from analysis.cli import main
from analysis.evaluate.speculative import (
    SPEC_VOCAB_MAX_SIZE_DIFFERENCE,
    largest_compatible_extension,
    speculative_compatibility,
    vocab_compatibility,
)
from analysis.methods.extension.plan import plan
from analysis.tokenizer.export import write_folder
from analysis.tokenizer.gguf_export import gguf_vocab


@pytest.fixture(scope="module")
def gpt2_plan():
    """Continued BPE training of gpt2 on Estonian, applied at any N up to 500."""
    return plan(load_shared("gpt2"), "continued", flores_lines("est_Latn")[:800], 500)


def test_gpt2_plus_100_is_compatible_and_plus_500_is_not(gpt2_plan):
    gpt2 = load_shared("gpt2")
    ok = speculative_compatibility(gpt2_plan.apply(100).tokenizer, gpt2)
    assert ok.compatible and (ok.target_tokens, ok.draft_tokens) == (50357, 50257)
    edge = speculative_compatibility(gpt2_plan.apply(SPEC_VOCAB_MAX_SIZE_DIFFERENCE + 1).tokenizer, gpt2)
    assert not edge.compatible
    no = speculative_compatibility(gpt2_plan.apply(500).tokenizer, gpt2)
    assert not no.compatible and "differ by 500 tokens" in no.reason and "at most 128" in no.reason
    assert largest_compatible_extension(gpt2) == 128


def test_each_rule_refuses_with_its_reason():
    gpt2, llama2 = load_shared("gpt2"), load_shared("llama-2")
    assert "vocabulary types differ" in speculative_compatibility(gpt2, llama2).reason
    base = gguf_vocab(gpt2, pre="default")
    bos = gguf_vocab(gpt2, pre="default")
    bos.add_bos = True
    assert vocab_compatibility(base, bos).reason.startswith("BOS differs")
    renamed = gguf_vocab(gpt2, pre="default")
    renamed.tokens[7] = "renamed"
    low = gguf_vocab(gpt2, pre="default")
    low.tokens[3] = "renamed"  # ids below 5 are not compared
    assert "token 7 differs" in vocab_compatibility(base, renamed).reason
    assert vocab_compatibility(base, low).compatible
    assert largest_compatible_extension(load_shared("pegasus-unigram")) == 0  # no GGUF form this app writes


def test_export_check_with_base_reports_speculative(tmp_path, capsys, gpt2_plan):
    out = write_folder(gpt2_plan.apply(500).tokenizer, tmp_path / "ext")
    args = ["export-check", str(out), "--base", str(TOKENIZERS / "gpt2"), "--langs", "est_Latn"]
    assert main([*args, "--max-lines", "5", "--no-parity", "--no-probe", "--json"]) == 0
    spec = json.loads(capsys.readouterr().out)["speculative"]
    assert spec["compatible"] is False and "500 tokens" in spec["reason"]

"""Drift between two tokenizers or two loadings of one (analysis.measure.drift and `python -m analysis drift`), on
the shared tokenizers: SmolLM2's tokenizer.json and its GGUF agree on every line compared; Llama-3.1 and Qwen3 do
not, and their counts equal a direct count."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from support import SMOLLM, TOKENIZERS, flores_lines, load_shared, need_smollm

from analysis.cli import main
from analysis.errors import DataError
from analysis.measure import fast_encode as fe
from analysis.measure.drift import CONTENT_CLASSES, drift, identical_mask
from analysis.texts import probes
from analysis.tokenizer.sources import load


def test_identical_mask_compares_each_line_whatever_the_lengths_before_it():
    """Lines of other lengths shift the flat arrays: each line is still compared with its own counterpart."""
    a = [[1, 2], [], [3, 4, 5], [6], [7, 8]]
    b = [[1, 2], [], [3, 4], [6], [7, 9]]
    flat = [np.array([i for line in x for i in line], dtype=np.int64) for x in (a, b)]
    lens = [np.array([len(line) for line in x], dtype=np.int64) for x in (a, b)]
    assert identical_mask(flat[0], lens[0], flat[1], lens[1]).tolist() == [True, True, False, True, False]


def test_probe_sets_are_deterministic_and_hold_what_they_name():
    assert probes.numbers_and_dates() == probes.numbers_and_dates()
    assert any("\u200d" in s for s in probes.emoji_sequences())  # ZWJ sequences
    assert any("\t" in s for s in probes.whitespace_runs()) and any(
        " " * 20 in s for s in probes.whitespace_runs()
    )


def test_gpt2_tokenizer_json_and_its_vocab_and_merges_agree_on_every_id(tmp_path):
    """Two loadings of one tokenizer: tokenizer.json and the slow files (vocab.json + merges.txt) alone."""
    slow = tmp_path / "gpt2-slow"
    slow.mkdir()
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(TOKENIZERS / "gpt2" / name, slow / name)
    rep = drift(
        load_shared("gpt2"), load(slow), "est_Latn,zho_Hans", content=["numbers", "whitespace", "emoji"]
    )
    assert rep.identical_everywhere and all(
        r.tokens_a == r.tokens_b > 0 for r in (*rep.languages, *rep.content)
    )


def test_llama31_vs_qwen3_counts_equal_a_direct_count():
    a, b = load_shared("llama-3.1"), load_shared("qwen3")
    rep = drift(a, b, ["est_Latn", "zho_Hans"], content=["numbers"])
    for row in rep.languages:
        lines = flores_lines(row.name)
        assert row.lines == len(lines)
        for tok, got in ((a, row.tokens_a), (b, row.tokens_b)):
            assert got == sum(len(tok.tokenizer.encode(s, add_special_tokens=False).ids) for s in lines)
        assert row.identical < 1 and row.first_diff is not None  # other vocabularies, other ids
    numbers = rep.content[0]
    d = numbers.first_diff
    assert numbers.name == "numbers" and d is not None
    assert "".join(d.tokens_a) == "".join(d.tokens_b) == d.text  # both sides spell the same line
    assert len(d.ids_b) > len(d.ids_a)  # Qwen3 splits every digit, Llama-3.1 groups three
    parts = {p.part for p in rep.pipeline}
    assert {"normalizer", "special tokens", "vocabulary size", "chat template"} <= parts


def test_cli_json_rows_and_bad_input(capsys):
    gpt2 = str(TOKENIZERS / "gpt2")
    assert main(["drift", gpt2, gpt2, "--langs", "est_Latn", "--content", "emoji", "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["languages"]
    assert {"lang", "tokens_a", "tokens_b", "identical"} <= set(row) and row["lang"] == "est_Latn"
    assert row["identical"] == 1.0 and doc["identical_everywhere"] and doc["pipeline"] == []
    assert doc["content"][0]["content"] == "emoji"
    assert main(["drift", gpt2, gpt2, "--langs", "none", "--content", "poetry"]) == 2
    assert "unknown content class 'poetry'" in capsys.readouterr().err
    assert main(["drift", gpt2, gpt2, "--langs", "xx_Nope", "--content", "none"]) == 2


def test_unknown_class_is_refused_before_any_work():
    with pytest.raises(DataError, match="unknown content class"):
        drift(load_shared("gpt2"), load_shared("gpt2"), None, content=["prose", "poetry"])


@pytest.mark.slow  # converting the GGUF's tokenizer takes seconds on a cold cache (once per run: the disk cache)
@need_smollm
def test_smollm2_tokenizer_json_and_its_gguf_agree_on_every_id(monkeypatch):
    """Two loadings of one tokenizer (tokenizer.json and the tokenizer converted from the GGUF's metadata): the
    drift finds no difference on three languages of three scripts and on every content class (prose, code,
    numbers, whitespace, emoji).

    That the two agree on every input is tests/tokenizer/test_gguf_tokenizer.py's: the converted document equals
    the tokenizer.json's, and equal documents make equal tokenizers. A sweep of all 204 languages here ran the
    same Rust tokenizer twice over 40 MB of FLORES for no other path of the drift (`--langs all` is
    `FloresData.resolve_many`'s, tests/texts/test_flores.py). Tokenizers' own ids: the fast encoder's side
    comparison is tests/measure/test_fast_encode.py's."""
    monkeypatch.setenv(fe.ENV_SWITCH, "tokenizers")
    langs = ["est_Latn", "zho_Hans", "tha_Thai"]
    rep = drift(load_shared("smollm2-135m-instruct"), load(SMOLLM), langs)
    assert [r.name for r in rep.languages] == langs and rep.identical_everywhere
    assert [r.name for r in rep.content] == list(CONTENT_CLASSES) and not rep.notes
    assert not any(r.first_diff for r in (*rep.languages, *rep.content))
    assert all(r.identical == 1.0 and r.tokens_a == r.tokens_b > 0 for r in (*rep.languages, *rep.content))

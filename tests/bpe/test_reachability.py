"""Self-Tokenization Test: acceptance counts on real tokenizers, categories, explanations, CLI."""

from __future__ import annotations

import csv
import io
import json
import random
from contextlib import redirect_stdout

import pytest
from support import BPE_TOKENIZERS, TOKENIZERS, flores_lines, load_shared

from analysis import LoadedTokenizer
from analysis.bpe.stt import (
    _private_model,
    explain_unreachable,
    never_produced,
    self_tokenize,
    stt_counts,
    stt_report,
    stt_result,
    stt_tokenize_fn,
    unreachable_ids,
)
from analysis.cli import main
from analysis.errors import UnsupportedTokenizerError


def _toy(vocab: dict[str, int], merges: list[list[str]], **model) -> LoadedTokenizer:
    doc = {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": None,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges, **model},
    }
    return LoadedTokenizer.from_document(doc, name="toy")


# ------------------------------------------------------------------------------------------ acceptance
def test_gpt2_has_no_unreachable_tokens():
    tok = load_shared("gpt2")
    c = stt_counts(tok)
    assert c["unreachable"] == 0 and c["special"] == 1 and c["reachable"] == 50256
    assert unreachable_ids(tok) == set()
    # the raw test (added tokens kept) finds exactly <|endoftext|>
    raw = {i for i, ids in self_tokenize(tok).items() if ids != [i]}
    assert raw == {tok.vocab["<|endoftext|>"]}


def test_llama2_byte_fallback_pieces_are_their_own_class():
    tok = load_shared("llama-2")
    s = stt_report(tok).summary()
    assert s["unreachable"] == 0 and s["byte_fallback"] == 256 and s["special"] == 3
    assert s["reachable"] + s["byte_fallback"] + s["special"] == 32000


@pytest.mark.slow
def test_llama31_has_588_unreachable_tokens_paper_table9():
    tok = load_shared("llama-3.1")
    s = stt_report(tok).summary()
    assert s["unreachable"] == 588 == s["merge_skip_only"]
    assert s["unreachable_multi"] == 0 and s["special"] == 256
    assert len(s["unreachable_tokens"]) == 588
    assert {"id", "token"} <= set(s["unreachable_tokens"][0])
    assert len(unreachable_ids(tok)) == 588


@pytest.mark.slow
def test_qwen3_has_no_unreachable_tokens():
    assert stt_counts(load_shared("qwen3"))["unreachable"] == 0


@pytest.mark.slow
def test_sentinel_trick_equals_private_model_llama31():
    """ignore_merges tokenizers: tokenize(s + sentinel) on the shared model == a private ignore_merges=False copy."""
    tok = load_shared("llama-3.1")
    fast = stt_tokenize_fn(tok)
    slow = _private_model(tok).tokenize
    rnd = random.Random(0)
    words = rnd.sample(sorted(tok.vocab), 5000) + [tok.id_to_token[i] for i in sorted(unreachable_ids(tok))]
    for w in words:
        assert [t.id for t in fast(w)] == [t.id for t in slow(w)], w
    assert tok.tokenizer.model.ignore_merges is True  # the shared model was never changed


@pytest.mark.parametrize("name", ["gpt2", "llama-2"])
def test_compact_stt_result_equals_the_full_table(name):
    """stt_result keeps only a mask plus the pieces of unreachable ids; it must say what self_tokenize says."""
    tok = load_shared(name)
    res = stt_result(tok)
    full = self_tokenize(tok)
    assert set(full) == set(tok.vocab.values())
    for i, ids in full.items():
        assert res.tokenization(i) == ids
        assert bool(res.mask[i]) == (ids == [i])
    assert set(res.pieces) == {i for i, ids in full.items() if ids != [i]}
    assert res.tokenization(10**9) is None  # outside the model


def test_stt_never_mutates_the_tokenizer():
    tok = load_shared("smollm2-135m-instruct")
    before = tok.tokenizer.to_str()
    stt_report(tok)
    assert tok.tokenizer.to_str() == before


# ------------------------------------------------------------------------------------------ categories
def test_categories_on_a_toy_vocabulary():
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "ca": 6, "[UNK]": 7, "QQ": 8, "cab": 9}
    # "abc": a+b fires first (rank 0), then ab+c; "cab" has no merge at all
    merges = [["a", "b"], ["b", "c"], ["ab", "c"], ["c", "a"]]
    tok = _toy(vocab, merges, unk_token="[UNK]", fuse_unk=True)
    rep = stt_report(tok)
    cat = {r.token: r.category for r in rep.rows}
    assert cat["abc"] == "reachable" and cat["ab"] == "reachable" and cat["bc"] == "reachable"
    assert cat["cab"] == "unreachable_multi"  # c+a fires first, then no merge joins ca+b
    assert cat["QQ"] == "unreachable_other_single"  # both Q unknown: fused into one [UNK]
    assert cat["[UNK]"] == "unk"
    s = rep.summary()
    assert s["unreachable"] == 2 and {t["token"] for t in s["unreachable_tokens"]} == {"cab", "QQ"}


def test_merge_skip_only_when_ignore_merges_is_on():
    vocab = {"a": 0, "b": 1, "c": 2, "bc": 3, "ab": 4, "abc": 5}
    merges = [["b", "c"], ["a", "b"], ["ab", "c"]]  # "abc": b+c first, then nothing makes a+bc
    off = _toy(vocab, merges)
    on = _toy(vocab, merges, ignore_merges=True)
    assert stt_counts(off)["unreachable_multi"] == 1
    c = stt_counts(on)
    assert c["merge_skip_only"] == 1 and c["unreachable"] == 1 and c["unreachable_multi"] == 0
    assert [t.value for t in on.tokenizer.model.tokenize("abc")] == ["abc"]  # the real model skips merges


def test_explain_unreachable_names_the_winning_merge():
    vocab = {"a": 0, "b": 1, "c": 2, "bc": 3, "ab": 4, "abc": 5}
    merges = [["b", "c"], ["a", "b"], ["ab", "c"]]
    tok = _toy(vocab, merges)
    e = explain_unreachable(tok, "abc")
    assert e["actual_tokens"] == ["a", "bc"]
    assert e["candidates"][0]["left"] == "ab" and e["candidates"][0]["right"] == "c"
    assert e["candidates"][0]["blocked_by"] == {"left": "b", "right": "c", "result": "bc", "rank": 0}
    assert "#0" in e["reason"] and "#2" in e["reason"]
    assert e["actual_tree"]["reachable"] is False


def test_explain_on_llama31_token():
    tok = load_shared("llama-3.1")
    e = explain_unreachable(tok, tok.vocab["Ġviá»ĩc"])
    assert e["actual_tokens"] == ["Ġvi", "á»ĩ", "c"]
    blocked = [c for c in e["candidates"] if c["blocked_by"]]
    assert blocked and all(c["blocked_by"]["rank"] < c["rank"] for c in blocked)


def test_never_produced_in_practice():
    tok = load_shared("gpt2")
    lines = flores_lines("eng_Latn", 200)
    never = set(never_produced(tok, lines))
    seen = {i for e in tok.tokenizer.encode_batch(lines, add_special_tokens=False) for i in e.ids}
    assert never and not never & seen
    assert len(never) + len(seen - set(tok.added_ids)) == len(tok.vocab) - 1  # minus <|endoftext|>


def test_non_bpe_refused():
    with pytest.raises(UnsupportedTokenizerError, match="BPE"):
        stt_report(load_shared("bert-base-uncased"))


@pytest.mark.parametrize("name", [n for n in BPE_TOKENIZERS if n in ("mistral-7b-v0.1", "mistral-7b-v0.3")])
def test_mistral_counts(name):
    s = stt_counts(load_shared(name))
    assert s["unreachable"] == 0 and s["byte_fallback"] == 256


# ------------------------------------------------------------------------------------------ CLI
def _cli(*argv) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(list(argv))
    return rc, buf.getvalue()


def test_cli_json_and_csv(tmp_path):
    out = tmp_path / "stt.csv"
    rc, text = _cli("stt", str(TOKENIZERS / "llama-2"), "--json", "--csv", str(out))
    assert rc == 0
    d = json.loads(text)
    for k in (
        "reachable",
        "unreachable",
        "byte_fallback",
        "special",
        "merge_skip_only",
        "unreachable_tokens",
    ):
        assert k in d
    assert d["byte_fallback"] == 256 and d["unreachable_tokens"] == []
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 32000
    assert rows[3 + 0x41]["category"] == "byte_fallback" and rows[3 + 0x41]["token"] == "<0x41>"


def test_cli_bad_input(capsys):
    assert main(["stt", str(TOKENIZERS / "bert-base-uncased")]) == 2
    assert "BPE" in capsys.readouterr().err


def test_cli_tree():
    rc, text = _cli("stt", str(TOKENIZERS / "gpt2"), "--tree", " unbelievable")
    assert rc == 0
    lines = text.splitlines()
    assert lines[0].startswith("' unbelievable' [24479]") and "#" in lines[0]
    assert any(line.startswith("    ") for line in lines)
    rc, text = _cli("stt", str(TOKENIZERS / "gpt2"), "--tree", "Ġunbelievable", "--json")
    assert json.loads(text)["reachable"] is True

"""Extension methods (analysis.methods.extension): continued training vs naive baselines, STT, compression, English."""

from __future__ import annotations

from functools import cache

import pytest
from support import ASSETS, flores_lines, load_shared

from analysis.bpe import unreachable_ids
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.methods.extension import (
    PrefixSimulator,
    append_to_model,
    extend,
    filter_merges,
    methods_for,
    plan,
    regen_merges,
    simulated_unreachable,
    tokenization_change,
)
from analysis.texts.corpora import Source, corpus
from analysis.texts.flores import split_lines as flores_split

EST_CORPUS = ASSETS / "corpora" / "text" / "est_Latn.txt.gz"


def est_text():
    """FLORES est_Latn training lines (first 800) + the shared Estonian corpus."""
    return corpus(Source("flores-train", "est_Latn:800"), Source("file", str(EST_CORPUS)))


@cache
def plans(name: str, n: int):
    """(continued plan, regen plan, merges plan) on the Estonian text, the naive ones sharing one aux tokenizer."""
    tok = load_shared(name)
    text = est_text()
    cont = plan(tok, "continued", text, n)
    regen = plan(tok, "regen", text, n)
    merges = plan(tok, "merges", text, n, aux=regen.aux)
    return cont, regen, merges


@cache
def simulator(name: str) -> PrefixSimulator:
    _, held = flores_split("est_Latn")
    return PrefixSimulator(load_shared(name), {"est": held, "eng": flores_lines("eng_Latn")})


# ---------------------------------------------------------------------------------------------- unit tests
def test_regen_merges_order_and_all_splits():
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "ca": 6}
    # new tokens in rank order: abc (score -1) then ca (score -2)
    m = regen_merges(["abc", "ca"], vocab)
    # abc has two splits: (ab, c) and (a, bc); longer left first; then ca
    assert m == [("ab", "c"), ("a", "bc"), ("c", "a")]


def test_filter_merges_keeps_only_complete_new_merges():
    tok = load_shared("gpt2")
    have = tok.merges[0]
    new = ["Ġtere", "Ġte"]
    cands = [have, ("Ġte", "re"), ("Ġt", "ere"), ("zzz", "q"), ("Ġte", "re")]
    out = filter_merges(tok, new, cands)
    assert have not in out and ("zzz", "q") not in out
    assert out.count(("Ġte", "re")) == 1
    assert ("Ġt", "ere") in out or "Ġt" not in tok.vocab or "ere" not in tok.vocab


def test_tokenization_change_metrics():
    r = tokenization_change([[1, 2, 3], [4, 5]], [[1, 2, 3], [45]])
    assert r["exact_match"] == 0.5
    assert r["levenshtein"] == pytest.approx((0 + 2 / 2) / 2)


def test_methods_for_each_model_type():
    assert methods_for(load_shared("gpt2")) == ["continued", "regen", "merges", "add-tokens"]
    assert methods_for(load_shared("bert-base-uncased")) == ["wordpiece", "add-tokens"]
    assert methods_for(load_shared("pegasus-unigram")) == ["add-tokens"]
    with pytest.raises(UnsupportedTokenizerError):
        plan(load_shared("pegasus-unigram"), "continued", ["x y"], 5)
    with pytest.raises(DataError):
        plan(load_shared("gpt2"), "nonsense", ["x y"], 5)


def test_new_ids_follow_every_existing_id_and_specials_keep_theirs():
    tok = load_shared("llama-2")
    ext = extend(tok, "continued", flores_lines("est_Latn")[:200], 40)
    assert ext.added_ids == list(range(32000, 32040))
    assert ext.tokenizer.tokenizer.encode("Tere").ids[0] == 1  # <s> still 1
    gpt = load_shared("gpt2")
    e2 = extend(gpt, "regen", flores_lines("est_Latn")[:200], 30)
    assert e2.added_ids[0] == 50257 and e2.tokenizer.tokenizer.token_to_id("<|endoftext|>") == 50256


def test_add_tokens_method_and_simulator_agree():
    tok = load_shared("gpt2")
    train, held = flores_split("est_Latn")
    p = plan(tok, "add-tokens", train[:400], 80)
    ext = p.apply(80)
    assert ext.n_added > 0 and all(a.content in ext.added for a in ext.tokenizer.added_tokens[-ext.n_added :])
    assert unreachable_ids(ext.tokenizer) == unreachable_ids(tok)  # added tokens are outside the model
    sim = PrefixSimulator(tok, {"est": held})
    rows = [[t.lstrip("\x00") for t in r] for r in sim.added_line_tokens(ext.added, ["est"])["est"]]
    real = [e.tokens for e in ext.tokenizer.tokenizer.encode_batch(held, add_special_tokens=False)]
    assert rows == real


def test_wordpiece_extension_appends_in_index_order():
    tok = load_shared("bert-base-uncased")
    p = plan(tok, "wordpiece", flores_lines("est_Latn")[:400], 60)
    ext = p.apply(60)
    assert ext.n_added == 60
    assert ext.added_ids == list(range(len(tok.vocab), len(tok.vocab) + 60))
    assert all(t not in tok.vocab for t in ext.added)
    held = flores_lines("est_Latn")[800:]
    used = {t for e in ext.tokenizer.tokenizer.encode_batch(held) for t in e.tokens} & set(ext.added)
    assert used, "some WordPiece tokens are used on held-out Estonian"
    assert ext.tokenizer.tokenizer.encode("tere").ids[0] == tok.vocab["[CLS]"]


@pytest.mark.slow
def test_simulator_matches_real_tokenizer_small():
    tok = load_shared("llama-2")
    train, held = flores_split("est_Latn")
    sim = PrefixSimulator(tok, {"est": held})
    for method in ("continued", "regen", "merges"):
        p = plan(tok, method, train, 150)
        ext = p.apply(100)
        new_ids = dict(zip(ext.added, ext.added_ids))
        changed = sim.segment(p.merges(100), p.tokens(100))
        rows = sim.line_tokens("est", changed)
        real = [e.ids for e in ext.tokenizer.tokenizer.encode_batch(held, add_special_tokens=False)]
        assert [sim.ids(r, new_ids) for r in rows] == real, method
        bad = unreachable_ids(ext.tokenizer) & set(ext.added_ids)
        assert sorted(ext.tokenizer.id_to_token[i] for i in bad) == sorted(
            simulated_unreachable(tok, p.merges(100), p.tokens(100))
        )


# ---------------------------------------------------------------------------------------------- paper checks
@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama-3.1", "qwen3"])
def test_naive_extension_leaves_unreachable_tokens_continued_none(name):
    cont, regen, merges = plans(name, 1000)
    counts = {}
    for p in (cont, regen, merges):
        ext = p.apply(1000)
        assert ext.n_added == 1000
        bad = unreachable_ids(ext.tokenizer) & set(ext.added_ids)
        counts[p.method] = len(bad)
        sim = simulated_unreachable(ext.base, p.merges(1000), p.tokens(1000))
        assert len(sim) == len(bad), p.method
    assert counts["continued"] == 0
    assert counts["regen"] > 0
    assert counts["merges"] > counts["regen"], counts


@pytest.mark.slow
@pytest.mark.parametrize("n", [1000, 4000])
def test_continued_beats_regen_on_heldout_estonian_llama3(n):
    cont, regen, _ = plans("llama-3.1", 4000)
    sim = simulator("llama-3.1")
    b0 = sim.measure([], [], ["est"])["est"]["bytes_per_token"]
    bc = sim.measure(cont.merges(n), cont.tokens(n), ["est"])["est"]["bytes_per_token"]
    br = sim.measure(regen.merges(n), regen.tokens(n), ["est"])["est"]["bytes_per_token"]
    assert bc > br > b0, (bc, br, b0)


@pytest.mark.slow
def test_english_tokenization_stays_99pct_exact_at_1000():
    cont, regen, _ = plans("llama-3.1", 4000)
    sim = simulator("llama-3.1")
    base = sim.base_line_tokens("eng")
    for p in (cont, regen):
        rows = sim.line_tokens("eng", sim.segment(p.merges(1000), p.tokens(1000), ["eng"]))
        ch = tokenization_change(base, rows)
        assert ch["exact_match"] >= 0.99, (p.method, ch)


@pytest.mark.slow
def test_simulator_matches_real_llama3_at_1000():
    cont, regen, _ = plans("llama-3.1", 4000)
    sim = simulator("llama-3.1")
    _, held = flores_split("est_Latn")
    for p in (cont, regen):
        ext = p.apply(1000)
        new_ids = dict(zip(ext.added, ext.added_ids))
        rows = sim.line_tokens("est", sim.segment(p.merges(1000), p.tokens(1000)))
        real = [e.ids for e in ext.tokenizer.tokenizer.encode_batch(held, add_special_tokens=False)]
        assert [sim.ids(r, new_ids) for r in rows] == real, p.method
        assert ext.tokenizer.tokenizer.encode("Tere").ids[0] == 128000  # BOS kept


def test_append_to_model_skips_existing_tokens():
    tok = load_shared("gpt2")
    ext = append_to_model(tok, ["the", "Ġtere", "Ġtere"], [("Ġte", "re")], "continued")
    assert ext.added == ["Ġtere"]

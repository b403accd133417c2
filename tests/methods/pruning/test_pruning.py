"""Pruning orders, removal that keeps the tokenizer valid, curves, prune-then-extend, CLI (the page: tests/app/test_prune_page.py)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from support import FLORES, TOKENIZERS, flores_lines, load_shared

from analysis.bpe import unreachable_ids, vocabulary_structure
from analysis.cli import main
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.methods import pruning as P
from analysis.tokenizer.sources import load

SAFE = ("leaf-last-n", "leaf-frequency", "merge-based")


@cache
def mix() -> tuple[str, ...]:
    """The 50/50 Estonian/English FLORES mix (first 800 lines of each)."""
    return tuple(P.mix_texts([flores_lines("est_Latn", 800), flores_lines("eng_Latn", 800)], by="lines"))


@cache
def orders(name: str) -> dict[str, P.PruneOrder]:
    """Every corpus/structure order of a shared tokenizer (computed once per session)."""
    tok = load_shared(name)
    counts = P.token_counts(tok, mix())
    return {
        "last-n": P.last_n_order(tok),
        "frequency": P.frequency_order(tok, counts),
        "leaf-last-n": P.leaf_last_n_order(tok),
        "leaf-frequency": P.leaf_frequency_order(tok, counts),
        "merge-based": P.merge_based_order(tok, mix()),
    }


def new_unreachable(tok, res: P.PruneResult, orig: set[int]) -> list[int]:
    """Original ids of tokens that STT cannot reach after pruning but could before."""
    back = {n: o for o, n in res.id_map.items()}
    return [back[i] for i in unreachable_ids(res.tokenizer) if back[i] not in orig]


# ----------------------------------------------------------------------------------------- removal
@pytest.mark.parametrize("name", [pytest.param("llama-3.1", marks=pytest.mark.slow), "llama-2"])
def test_removal_keeps_tokenizer_consistent(name: str) -> None:
    tok = load_shared(name)
    order = orders(name)["last-n"]
    res = P.prune_by_order(tok, order, 1500)
    new = res.tokenizer
    assert new.vocab_size == tok.vocab_size - 1500 == len(res.id_map)
    # contiguous ids 0..N-1 over model + added, in old-id order
    assert sorted(new.id_to_token) == list(range(new.vocab_size))
    olds = sorted(res.id_map)
    assert [res.id_map[o] for o in olds] == list(range(len(olds)))
    for o, n in list(res.id_map.items())[::97]:
        assert new.id_to_token[n] == tok.id_to_token[o]
    # no merge touches a removed token
    removed = {tok.id_to_token[i] for i in res.removed}
    assert not any(a in removed or b in removed or a + b in removed for a, b in new.merges)
    assert res.merges_removed == len(tok.merges) - len(new.merges) > 0 or name == "llama-2"
    # added/special tokens keep their strings, get their new ids; post-processor follows
    for a in tok.added_tokens:
        assert new.tokenizer.token_to_id(a.content) == res.id_map[a.id]
    enc_old = tok.tokenizer.encode("Hello world")
    enc_new = new.tokenizer.encode("Hello world")
    assert enc_new.ids == [res.id_map[i] for i in enc_old.ids]
    assert enc_new.ids[0] == res.id_map[enc_old.ids[0]]  # BOS from the post-processor
    dec = new.config.get("added_tokens_decoder")
    if dec:
        assert all(new.id_to_token[int(k)] == v["content"] for k, v in dec.items())
    arr = res.id_map_array
    assert (arr[res.removed] == -1).all()


def test_removal_refuses_needed_tokens_and_unknown_ids() -> None:
    tok = load_shared("llama-2")
    with pytest.raises(DataError):
        P.prune(tok, [tok.vocab["<unk>"]])
    with pytest.raises(DataError):
        P.prune(tok, [10**7])
    with pytest.raises(DataError):
        orders("llama-2")["leaf-last-n"].prefix(10**6)
    with pytest.raises(UnsupportedTokenizerError):
        P.last_n_order(load_shared("bert-base-uncased"))
    with pytest.raises(DataError):
        P.compute_order(tok, "leaf-frequency", None)
    with pytest.raises(DataError):
        P.compute_order(tok, "no-such-order", None)


@pytest.mark.slow
def test_orders_exclude_protected_and_cover_vocab() -> None:
    tok = load_shared("llama-3.1")
    prot = P.protected_ids(tok)
    assert set(tok.added_ids) <= prot and len(P.alphabet_ids(tok)) == 256
    for name, o in orders("llama-3.1").items():
        assert not prot & set(o.ids), name
        assert len(set(o.ids)) == len(o.ids), name
    o = orders("llama-3.1")["frequency"]
    c = P.token_counts(tok, mix())
    keys = [(int(c[i]), -i) for i in o.ids[:5000]]
    assert keys == sorted(keys)


# ------------------------------------------------------------------- structure safety, every N
def _positions(order: P.PruneOrder) -> dict[int, int]:
    return {t: k for k, t in enumerate(order.ids)}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("llama-3.1", marks=pytest.mark.slow),
        pytest.param("qwen3", marks=pytest.mark.slow),
        "llama-2",
    ],
)
def test_safe_orders_remove_parents_before_parts_at_every_n(name: str) -> None:
    """For every prefix: a surviving token's merge parts survive (checked for all N at once)."""

    tok = load_shared(name)
    vs = vocabulary_structure(tok)
    inf = 10**9
    for oname in SAFE:
        pos = _positions(orders(name)[oname])
        bad = [t for t, (a, b) in vs.split.items() if min(pos.get(a, inf), pos.get(b, inf)) < pos.get(t, inf)]
        assert not bad, (oname, [tok.id_to_token[t] for t in bad[:5]])
    # leaf orders stop at the alphabet: nothing atomic is ever output
    for oname in ("leaf-last-n", "leaf-frequency"):
        assert not vs.atomic & set(orders(name)[oname].ids)
    # the naive frequency order does break that rule
    pos = _positions(orders(name)["frequency"])
    assert any(min(pos.get(a, inf), pos.get(b, inf)) < pos.get(t, inf) for t, (a, b) in vs.split.items())


def _stt_ns(tok, order_len: int) -> list[int]:
    big = min(order_len, 100_000 if tok.vocab_size > 100_000 else int(order_len * 0.8))
    return [1000, order_len // 4, big]


@pytest.mark.parametrize("name", [pytest.param("llama-3.1", marks=pytest.mark.slow), "llama-2"])
def test_safe_orders_create_no_unreachable_tokens_stt(name: str) -> None:
    """STT (Rust model) after pruning by leaf-last-n / leaf-frequency / merge-based at small and large N.

    One byte-level BPE (Llama-3.1) and one SentencePiece BPE (Llama-2); Qwen3, another byte-level BPE of the
    same kind, re-ran the same path on more data (47 s) and its safe orders are still checked at every N by
    `test_safe_orders_remove_parents_before_parts_at_every_n`."""
    tok = load_shared(name)
    orig = unreachable_ids(tok)
    pruner = P.Pruner(tok)
    for oname in SAFE:
        order = orders(name)[oname]
        ns = _stt_ns(tok, len(order)) if oname != "leaf-last-n" else [len(order) // 2]
        for n in ns:
            res = pruner.prune(order.prefix(n))
            assert new_unreachable(tok, res, orig) == [], (oname, n)


@pytest.mark.parametrize(
    "name,n", [pytest.param("llama-3.1", 100_000, marks=pytest.mark.slow), ("llama-2", 10_000)]
)
def test_naive_frequency_creates_unreachable_tokens(name: str, n: int) -> None:
    tok = load_shared(name)
    res = P.prune_by_order(tok, orders(name)["frequency"], n)
    bad = new_unreachable(tok, res, unreachable_ids(tok))
    assert len(bad) > 50


# ---------------------------------------------------------------------------- paper 000 Table 4
@pytest.mark.slow
def test_llama31_english_bpt_leaf_frequency_vs_last_n() -> None:
    """Prune 32,000 (50/50 et/en FLORES mix, 800 lines each): held-out English BPT drops no more with
    leaf frequency than with last-N."""
    tok = load_shared("llama-3.1")
    held_en = flores_lines("eng_Latn")[800:]
    held_et = flores_lines("est_Latn")[800:]
    assert len(held_en) == 212
    base = P.bytes_per_token(tok, held_en)
    pruner = P.Pruner(tok)
    lf = pruner.prune(orders("llama-3.1")["leaf-frequency"].prefix(32000)).tokenizer
    ln = pruner.prune(orders("llama-3.1")["last-n"].prefix(32000)).tokenizer
    bpt_lf, bpt_ln = P.bytes_per_token(lf, held_en), P.bytes_per_token(ln, held_en)
    assert base - bpt_lf <= base - bpt_ln
    assert bpt_lf <= base
    assert P.bytes_per_token(lf, held_et) >= P.bytes_per_token(ln, held_et)


# ------------------------------------------------------------------------------- other orders
def test_merge_counts_agree_with_the_rust_encoder() -> None:
    """Replay final-token counts = encode_batch counts (no specials, ignore_merges off)."""
    for name in ("llama-3.1", "llama-2"):
        tok = load_shared(name)
        lines = list(mix()[:200]) + list(mix()[-200:])
        tcounts, mcounts = P.merge_counts(tok, lines)
        enc = P.token_counts(tok, lines, add_special_tokens=False)
        assert {i: c for i, c in tcounts.items()} == {i: int(c) for i, c in enumerate(enc) if c}, name
        # every merge applied consumes its two parts: parts' scores >= the result's
        assert sum(mcounts.values()) > sum(tcounts.values()) / 2


def test_leaf_frequency_moves_counts_to_parts() -> None:
    tok = load_shared("llama-2")
    o = orders("llama-2")["leaf-frequency"]

    vs = vocabulary_structure(tok)
    counts = P.token_counts(tok, mix())
    # the first tokens popped are zero-count leaves, highest id first
    first = o.ids[:50]
    assert all(counts[i] == 0 for i in first) and list(first) == sorted(first, reverse=True)
    # a popped token's key is at least its own count (counts of pruned parents were added)
    for t in o.ids[-2000:]:
        assert o.keys[t] >= counts[t]
    assert any(o.keys[t] > counts[t] for t in o.ids if t in vs.split or t in vs.downstream)


def test_script_order_llama31() -> None:
    tok = load_shared("llama-3.1")
    o = P.script_order(tok, ["Latin"])
    ids = set(o.ids)
    assert tok.vocab["ĠÐ³Ð»Ð°Ð·"] in ids  # " глаз"
    assert tok.vocab["Ġthe"] not in ids and tok.vocab["Ġ123"] not in ids if "Ġ123" in tok.vocab else True
    assert tok.vocab["Ġthe"] not in ids
    assert list(o.ids) == sorted(o.ids, reverse=True)
    with_cyr = set(P.script_order(tok, ["Latin", "Cyrillic"]).ids)
    assert tok.vocab["ĠÐ³Ð»Ð°Ð·"] not in with_cyr and with_cyr < ids

    vs = vocabulary_structure(tok)
    # closed: a kept token never needs a pruned part
    assert not [t for t, (a, b) in vs.split.items() if t not in ids and (a in ids or b in ids)]


def test_score_order_plugs_in_external_scores() -> None:
    tok = load_shared("llama-2")
    rng = np.random.default_rng(0)
    scores = rng.random(tok.vocab_size)
    safe = P.score_order(tok, scores)
    plain = P.score_order(tok, scores, structure_safe=False)
    assert [scores[i] for i in plain.ids[:100]] == sorted(scores[i] for i in plain.ids[:100])

    vs = vocabulary_structure(tok)
    pos = _positions(safe)
    inf = 10**9
    assert not [
        t for t, (a, b) in vs.split.items() if min(pos.get(a, inf), pos.get(b, inf)) < pos.get(t, inf)
    ]
    assert safe.ids[0] in vs.leaves


def test_mix_texts_balances_bytes() -> None:
    et, en = flores_lines("est_Latn", 800), flores_lines("eng_Latn", 800)
    m = P.mix_texts([et, en[:200]])
    b_et = sum(len(x.encode()) for x in m if x in set(et))
    b_en = sum(len(x.encode()) for x in m if x in set(en))
    assert abs(b_et - b_en) / b_en < 0.05
    with pytest.raises(DataError):
        P.mix_texts([et, []])
    assert len(P.mix_texts([et, en], by="lines")) == 1600
    assert P.mix_texts([et, en[:100]], [3, 1], by="lines") == et[:300] + en[:100]


def test_flores_mix_is_the_first_lines_of_each_language_and_holds_out_the_rest() -> None:
    et, en = flores_lines("est_Latn"), flores_lines("eng_Latn")
    texts, held = P.flores_mix(["est_Latn", "eng_Latn"], 800)
    assert texts == et[:800] + en[:800]
    assert held == {"est_Latn": et[800:], "eng_Latn": en[800:]}
    upload = ["üks kaks kolm " * 20] * 50  # an upload: equal shares of bytes, the upload's lines kept whole
    mixed, _ = P.flores_mix(["est_Latn"], 800, [upload])
    assert mixed == P.mix_texts([et[:800], upload], by="bytes") and upload[0] in mixed
    assert P.flores_mix([], 800) == ([], {})


# ------------------------------------------------------------------------------------- curves
@pytest.mark.slow
def test_prune_curve_from_one_order() -> None:
    tok = load_shared("llama-2")
    order = orders("llama-2")["leaf-frequency"]
    texts = {"eng": flores_lines("eng_Latn")[800:], "est": flores_lines("est_Latn")[800:]}
    ns = P.curve_points(20000, 3)
    assert ns == [0, 10000, 20000]
    pts = P.prune_curve(tok, order, ns, texts, stt=True)
    assert [p.n for p in pts] == ns
    assert [p.vocab_size for p in pts] == [tok.vocab_size - n for n in ns]
    assert pts[0].bytes_per_token["eng"] == pytest.approx(P.bytes_per_token(tok, texts["eng"]))
    assert pts[0].bytes_per_token["eng"] >= pts[1].bytes_per_token["eng"] >= pts[2].bytes_per_token["eng"]
    assert all(p.unreachable == 0 for p in pts)
    # the fast path (ids kept, model swapped) measures exactly what a full prune measures
    full = P.prune_by_order(tok, order, 10000).tokenizer
    assert pts[1].bytes_per_token["est"] == pytest.approx(P.bytes_per_token(full, texts["est"]), rel=1e-12)
    naive = P.prune_curve(tok, orders("llama-2")["frequency"], [10000], texts, stt=True)[0]
    res = P.prune_by_order(tok, orders("llama-2")["frequency"], 10000)
    assert naive.unreachable == len(unreachable_ids(res.tokenizer)) > 0
    assert naive.bytes_per_token["eng"] == pytest.approx(
        P.bytes_per_token(res.tokenizer, texts["eng"]), rel=1e-12
    )


# ---------------------------------------------------------------------------- prune + extend
@pytest.mark.slow
def test_prune_then_extend_keeps_size_and_reachability() -> None:
    tok = load_shared("smollm2-135m-instruct")
    lines = list(P.mix_texts([flores_lines("est_Latn", 400), flores_lines("eng_Latn", 400)]))
    counts = P.token_counts(tok, lines)
    order = P.leaf_frequency_order(tok, counts)
    et_train = flores_lines("est_Latn", 800)
    r = P.prune_then_extend(tok, order, 1000, et_train)
    assert r.tokenizer.vocab_size == tok.vocab_size
    assert len(r.pruned) == 1000 and len(r.added) == 1000
    assert unreachable_ids(r.tokenizer) == set()
    held = flores_lines("est_Latn")[800:]
    assert P.bytes_per_token(r.tokenizer, held) > P.bytes_per_token(tok, held)
    for o, n in list(r.id_map.items())[::101]:
        assert r.tokenizer.id_to_token[n] == tok.id_to_token[o]
    e = P.extend_then_prune(tok, 1000, et_train, "leaf-frequency", lines)
    assert e.tokenizer.vocab_size == tok.vocab_size
    assert unreachable_ids(e.tokenizer) == set()
    assert len(e.added) == 1000  # new tokens are protected
    # Table 8: the two orders give close compression
    a, b = P.bytes_per_token(r.tokenizer, held), P.bytes_per_token(e.tokenizer, held)
    assert abs(a - b) / a < 0.02


# ---------------------------------------------------------------------------------------- CLI
@pytest.mark.slow
def test_cli_prune_json(tmp_path: Path) -> None:
    out = tmp_path / "pruned"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(
            [
                "prune",
                "--tokenizer",
                str(TOKENIZERS / "llama-2"),
                "--order",
                "leaf-frequency",
                "--text",
                str(FLORES / "devtest" / "est_Latn.devtest"),
                "--text",
                str(FLORES / "devtest" / "eng_Latn.devtest"),
                "--n",
                "2000",
                "--out",
                str(out),
                "--json",
            ]
        )
    assert rc == 0
    data = json.loads(buf.getvalue())
    assert data["removed"] == 2000 and data["vocab_size"] == 30000 and data["unreachable"] == 0
    again = load(out)
    assert again.vocab_size == 30000
    rep = json.loads((out / "prune_report.json").read_text())
    assert len(rep["id_map"]) == 30000
    # bad input: clear error, exit status 2
    with redirect_stdout(io.StringIO()):
        assert (
            main(
                [
                    "prune",
                    "--tokenizer",
                    str(TOKENIZERS / "llama-2"),
                    "--order",
                    "frequency",
                    "--n",
                    "10",
                    "--out",
                    str(tmp_path / "x"),
                ]
            )
            == 2
        )

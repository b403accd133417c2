"""Dynamic tokenization (methods.md §9): boundaries, exact concatenation, monotone lengths, tie-breaking,
incremental == naive recount, FVT rows, CLI (the page: tests/app/test_dynamic_page.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from contextlib import redirect_stdout

import numpy as np
import pytest
from safetensors.numpy import load_file
from support import ROOT, SMOLLM, TOKENIZERS, flores_lines, load_shared, need_smollm

from analysis.adapt.fvt import fvt_pieces
from analysis.cli import main
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.methods.dynamic import (
    BOUNDARIES,
    PairRules,
    batch_fvt_embeddings,
    dynamic_batches,
    dynamic_tokenize,
    fvt_embeddings,
    merge_incremental,
    merged_offsets,
    special_frame,
)

BATCH = flores_lines("eng_Latn", 24) + flores_lines("est_Latn", 8) + flores_lines("rus_Cyrl", 8)


def _naive(seqs: list[list[str]], valid, m: int) -> tuple[list[list[str]], list[tuple[str, str, int]]]:
    """Recount-everything reference written independently of the module's baseline."""
    seqs = [list(s) for s in seqs]
    done = []
    for _ in range(m):
        c: Counter = Counter()
        for s in seqs:
            for a, b in zip(s, s[1:]):
                if valid(a, b):
                    c[(a, b)] += 1
        if not c:
            break
        top = max(c.values())
        pair = next(p for p in c if c[p] == top)  # first inserted among the most frequent
        done.append((pair[0], pair[1], top))
        new = []
        for s in seqs:
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == pair:
                    out.append(s[i] + s[i + 1])
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            new.append(out)
        seqs = new
    return seqs, done


@pytest.mark.parametrize("name", ["gpt2", "llama-2", "llama-3.1", "mistral-7b-v0.1"])
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_incremental_equals_naive_recount(name, boundary):
    tok = load_shared(name)
    res = dynamic_tokenize(tok, BATCH, 60, boundary)
    rules = PairRules(tok, boundary)
    seqs, done = _naive(res.base_tokens, rules.valid, 60)
    assert res.tokens == seqs
    assert [(m.left, m.right, m.count) for m in res.merges] == done
    assert len(res.merges) == 60 or res.exhausted


@pytest.mark.parametrize("name", ["gpt2", "llama-2", "llama-3.1", "qwen3", "mistral-7b-v0.1"])
def test_concatenation_spans_and_monotone_lengths(name):
    tok = load_shared(name)
    res = dynamic_tokenize(tok, BATCH, 120, "pretokens")
    assert sum(res.lengths_after) < sum(res.lengths_before)
    for base, merged, spans in zip(res.base_tokens, res.tokens, res.spans):
        assert "".join(merged) == "".join(base)
        assert [("".join(base[a:b])) for a, b in spans] == merged
        assert spans[0][0] == 0 and spans[-1][1] == len(base)
    curve = res.merges2seqlen
    assert len(curve) == len(res.merges) + 1
    assert all(b < a for a, b in zip(curve, curve[1:]))  # every merge replaces at least one occurrence
    assert curve[0] == pytest.approx(np.mean(res.lengths_before))
    assert curve[-1] == pytest.approx(np.mean(res.lengths_after))
    # offsets of merged tokens cover the text pieces of their base tokens
    offs = merged_offsets(res, 0)
    assert offs[0][0] == res.base_offsets[0][0][0] and offs[-1][1] == res.base_offsets[0][-1][1]


@pytest.mark.parametrize("name", ["gpt2", "llama-3.1", "llama-2", "mistral-7b-v0.1"])
def test_word_boundaries_never_crossed(name):
    tok = load_shared(name)
    marks = "ĠĊĉ" if tok.is_byte_level else "▁"
    for boundary in ("word", "word_hyphen", "pretokens"):
        res = dynamic_tokenize(tok, BATCH, 400, boundary)
        merged = {m.merged for m in res.merges}
        assert merged
        for t in merged:
            assert not any(c in marks for c in t[1:]) or all(c in marks for c in t), (boundary, t)
            text = tok.readable(t) if tok.is_byte_level else t.replace("▁", " ")
            assert len(text.split()) <= 1
        if boundary == "word_hyphen":
            rules = PairRules(tok, boundary)
            for m in res.merges:
                lt, rt = rules.token_bytes(m.left), rules.token_bytes(m.right)
                for a, b in ((lt, rt), (rt, lt)):
                    try:
                        a_s, b_s = a.decode().strip(), b.decode().strip()
                    except UnicodeDecodeError:
                        continue
                    if a_s in {",", ".", ";", ":", "(", ")"} and b_s and b_s[0].isalnum():
                        pytest.fail(f"word_hyphen merged punctuation {m}")


def test_pretokens_boundary_matches_pre_tokenizer():
    tok = load_shared("gpt2")
    res = dynamic_tokenize(tok, BATCH, 300, "pretokens")
    pre = tok.tokenizer.pre_tokenizer
    for m in res.merges:
        try:
            text = tok.token_bytes(m.merged).decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert len(pre.pre_tokenize_str(text)) == 1, m
    # 'word' allows "said," which the GPT-2 pre-tokenizer splits
    word = dynamic_tokenize(tok, BATCH, 300, "word")
    assert any(m.merged.endswith(",") and len(m.merged) > 1 for m in word.merges)
    assert not any(m.merged.endswith(",") and m.merged[:-1].strip("Ġ").isalpha() for m in res.merges)


def test_space_like_rules_and_specials():
    gpt2 = PairRules(load_shared("gpt2"), "sentence")
    assert gpt2.valid("Ġ", "the")  # a leading space joins the word
    assert not gpt2.valid("the", "Ġ")  # never a space inside or at the end
    assert gpt2.valid("Ġ", "Ġ")  # all space-like
    assert not gpt2.valid("Ċ", "Ċ")  # \n\n always rejected
    assert not gpt2.valid("<|endoftext|>", "Ġthe")
    assert gpt2.valid("\u00e2\u0122", "\u0136")  # bytes E2 80 + 94 … a partial character: accepted
    llama = PairRules(load_shared("llama-2"), "word")
    assert llama.valid("▁hel", "lo") and not llama.valid("lo", "▁world")
    assert not llama.valid("a", "<0x0A>") and llama.valid("<0xE2>", "<0x80>")
    hy = PairRules(load_shared("gpt2"), "word_hyphen")
    assert hy.valid("well", "-") and hy.valid("-", "known") and not hy.valid("said", ",")
    with pytest.raises(UnsupportedTokenizerError):
        PairRules(load_shared("bert-base-uncased"), "word")
    with pytest.raises(DataError):
        PairRules(load_shared("gpt2"), "paragraph")


def test_most_frequent_pair_and_ties_against_brute_force():
    tok = load_shared("gpt2")
    rules = PairRules(tok, "pretokens")
    # a hand-made batch: (a, b) and (c, d) tie at 2; (c, d) occurs first → chosen first
    seqs = [["Ġc", "d", "Ġa", "b"], ["Ġa", "b", "Ġc", "d"], ["Ġx", "y", "Ġx", "y", "Ġx"]]
    # (Ġx, y) twice too, but its first occurrence is later than (Ġc, d) and (Ġa, b)
    toks, _, steps, _, _ = merge_incremental(seqs, rules, 3)
    assert [(s.left, s.right, s.count) for s in steps] == [("Ġc", "d", 2), ("Ġa", "b", 2), ("Ġx", "y", 2)]
    # overlapping occurrences: counted raw, replaced left to right without overlap
    toks, _, steps, curve, _ = merge_incremental([["a", "a", "a", "a", "a"]], rules, 1)
    assert steps[0].count == 4 and steps[0].replaced == 2 and toks == [["aa", "aa", "a"]] and curve == [5, 3]
    # brute force on real text: every step's pair is the max of a fresh valid-pair count
    batch = [
        t.tokens for t in tok.tokenizer.encode_batch(flores_lines("fra_Latn", 6), add_special_tokens=False)
    ]
    cur = [list(s) for s in batch]
    toks, _, steps, _, _ = merge_incremental(batch, rules, 15)
    for st in steps:
        c = Counter(p for s in cur for p in zip(s, s[1:]) if rules.valid(*p))
        assert c[(st.left, st.right)] == st.count == max(c.values())
        cur, _ = _naive(cur, lambda a, b, p=(st.left, st.right): (a, b) == p, 1)
    assert cur == toks


def test_exhaustion_and_reduction_inverse():
    tok = load_shared("llama-3.1")
    texts = flores_lines("deu_Latn", 10)
    full = dynamic_tokenize(tok, texts, 100_000, "pretokens")
    assert full.exhausted and len(full.merges) < 100_000
    # exhausted at pre-token level: every merged token is one pre-token of the text
    pre = [len(tok.tokenizer.pre_tokenizer.pre_tokenize_str(t)) for t in texts]
    assert full.lengths_after == pre
    curve = full.reduction_curve()
    k = full.merges_for_reduction(10.0)
    assert k is not None and curve[k] >= 10.0 and (k == 0 or curve[k - 1] < 10.0)
    assert full.merges_for_reduction(100.0, relative_to_max=True) == len(full.merges)
    assert full.merges_for_reduction(99.0) is None
    short = dynamic_tokenize(tok, texts, 5, "pretokens")
    assert short.merges2seqlen == full.merges2seqlen[:6] and not short.exhausted
    with pytest.raises(DataError):
        short.reduction_curve(relative_to_max=True)
    zero = dynamic_tokenize(tok, texts, 0)
    assert zero.tokens == zero.base_tokens and zero.merges == []
    with pytest.raises(DataError):
        dynamic_tokenize(tok, [], 5)


@pytest.mark.parametrize("name", ["gpt2", "llama-2"])
def test_fvt_rows_are_means_of_constituent_rows(name):
    tok = load_shared(name)
    res = dynamic_tokenize(tok, BATCH[:12], 40, "pretokens")
    new = [m.merged for m in res.merges]
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((tok.vocab_size, 8)).astype(np.float32)
    rows = fvt_embeddings(tok, new, emb)
    model = tok.fresh_tokenizer(merges_only=True).model
    for t, row in zip(new, rows):
        ids = fvt_pieces(tok, t)
        if "<0x" not in t:
            assert ids == [x.id for x in model.tokenize(t)]
        assert ids and np.allclose(row, emb[ids].mean(axis=0), atol=1e-6)
    # out-of-range piece → unk row (or the mean of all rows when there is no unk token)
    small = emb[:100]
    far = fvt_embeddings(tok, new[:3], small)
    unk = tok.vocab.get(tok.unk_token) if tok.unk_token else None
    expect = small[unk] if unk is not None and unk < 100 else small.mean(axis=0)
    for t, row in zip(new[:3], far):
        if max(fvt_pieces(tok, t)) >= 100:
            assert np.allclose(row, expect)
    torch = pytest.importorskip("torch")
    trow = fvt_embeddings(tok, new[:5], torch.from_numpy(emb))
    assert isinstance(trow, torch.Tensor) and np.allclose(trow.numpy(), rows[:5], atol=1e-6)


@pytest.mark.slow
def test_cli_json_and_text(tmp_path):
    f = tmp_path / "batch.txt"
    f.write_text("the tokenization of Tallinnas\n\ntokenization in Tallinnast, Tallinnas\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "analysis", "dynamic", str(TOKENIZERS / "gpt2"), "--file", str(f),
         "--text", "Tallinn", "--merges", "3", "--boundary", "word", "--target", "5", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    res = dynamic_tokenize(
        load_shared("gpt2"),
        ["Tallinn", "the tokenization of Tallinnas", "tokenization in Tallinnast, Tallinnas"],
        3,
        "word",
    )
    assert d["n_sequences"] == 3 and d["boundary"] == "word"
    assert d["lengths_before"] == res.lengths_before and d["lengths_after"] == res.lengths_after
    assert [m["merged"] for m in d["merges"]] == [m.merged for m in res.merges]
    assert (res.merges[0].merged, res.merges[0].count) == ("ĠTallinn", 3)  # the most frequent pair first
    assert d["merges2seqLen"] == res.merges2seqlen and d["merges_for_target"] == res.merges_for_reduction(5)
    assert d["total_after"] < d["total_before"]
    assert (
        main(["dynamic", str(TOKENIZERS / "llama-2"), "--text", "dynamic tokenization", "--merges", "2"]) == 0
    )
    assert main(["dynamic", str(TOKENIZERS / "llama-2")]) == 2  # no batch → clear error, exit 2


# --------------------------------------------------------------------------------------------------
# Special tokens, sampled merge counts, FVT embeddings for a model
# --------------------------------------------------------------------------------------------------
def test_special_tokens_count_and_never_merge():
    tok = load_shared("llama-2")
    texts = BATCH[:10]
    plain = dynamic_tokenize(tok, texts, 30)
    framed = dynamic_tokenize(tok, texts, 30, special_tokens=True)
    assert special_frame(tok) == ([("<s>", 1)], [])
    assert framed.lengths_before == [n + 1 for n in plain.lengths_before]
    assert all(seq[0] == "<s>" for seq in framed.tokens) and framed.to_json()["special_tokens"]
    assert not any("<s>" in m.left + m.right for m in framed.merges)
    assert [m.merged for m in framed.merges] == [m.merged for m in plain.merges]  # specials change no merge
    assert merged_offsets(framed, 0)[0] == (0, 0)
    # a tokenizer whose post-processor adds nothing
    assert special_frame(load_shared("gpt2")) == ([], [])
    gpt2 = dynamic_tokenize(load_shared("gpt2"), texts, 5, special_tokens=True)
    assert gpt2.lengths_before == dynamic_tokenize(load_shared("gpt2"), texts, 5).lengths_before


def test_sampled_merge_counts_per_batch():
    tok = load_shared("llama-2")
    texts = flores_lines("est_Latn", 40)
    runs = dynamic_batches(tok, texts, batch_size=16, seed=3)
    again = dynamic_batches(tok, texts, batch_size=16, seed=3)
    assert [r.to_json() for r in runs] == [r.to_json() for r in again]  # reproducible
    assert [r.sequences for r in runs] == [16, 16, 8]
    for r, k in zip(runs, range(0, 40, 16)):
        batch = texts[k : k + 16]
        full = dynamic_tokenize(tok, batch, 10**6)
        assert r.m_max == len(full.merges) and full.exhausted and 0 <= r.merges <= r.m_max
        one = dynamic_tokenize(tok, batch, r.merges)
        assert (r.tokens_before, r.tokens_after, r.tokens_at_max) == (
            sum(one.lengths_before),
            sum(one.lengths_after),
            sum(full.lengths_after),
        )
        assert 0 <= r.reduction_of_max_pct <= 100
    other = dynamic_batches(tok, texts, batch_size=16, seed=4)
    assert [r.merges for r in other] != [r.merges for r in runs]
    fixed = dynamic_batches(tok, texts, batch_size=16, merges=50)
    assert [r.merges for r in fixed] == [50, 50, 50]
    with pytest.raises(DataError):
        dynamic_batches(tok, texts, batch_size=0)


def test_batch_embeddings_for_a_model(tiny_llama2):
    path, matrix = tiny_llama2
    tok = load_shared("llama-2")
    res = dynamic_tokenize(tok, BATCH[:12], 40)
    emb = batch_fvt_embeddings(res, tok, path)
    assert emb.tokens == res.unique_tokens and emb.rows.shape == (len(res.unique_tokens), 8)
    spans = {t: res.base_ids[k][a] for k, seq in enumerate(res.tokens) for t, (a, b) in zip(seq, res.spans[k])
             if b - a == 1}  # fmt: skip
    for t, new, row in zip(emb.tokens, emb.merged, emb.rows):
        if new:
            assert emb.pieces[t] == fvt_pieces(tok, t) and np.allclose(
                row, matrix[emb.pieces[t]].mean(0), atol=1e-6
            )
        else:
            assert np.array_equal(row, matrix[spans[t]])
    r = emb.report()
    assert r["rows_computed"] == sum(emb.merged) > 0 and r["new_rows_bytes"] == r["rows_computed"] * 8 * 4
    assert r["tokens_saved"] == sum(res.lengths_before) - sum(res.lengths_after) > 0
    assert 0 < r["reduction_pct"] < r["attention_cost_reduction_pct"] < 100
    assert r["model_rows"] == 32000


@pytest.mark.slow
def test_cli_batches_specials_and_embeddings(tiny_llama2, tmp_path):
    path, matrix = tiny_llama2
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["dynamic", str(TOKENIZERS / "llama-2"), "--flores", "est_Latn", "--n", "20", "--batch-size", "8",
                   "--sample-merges", "--seed", "1", "--special-tokens", "--json"])  # fmt: skip
    assert rc == 0
    doc = json.loads(buf.getvalue())
    runs = dynamic_batches(load_shared("llama-2"), flores_lines("est_Latn", 20), batch_size=8, seed=1,
                           special_tokens=True)  # fmt: skip
    assert doc["batches"] == [r.to_json() for r in runs] and doc["sampled"] and doc["special_tokens"]
    out = tmp_path / "emb"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["dynamic", str(TOKENIZERS / "llama-2"), "--flores", "est_Latn", "--n", "8", "--merges", "20",
                   "--model", str(path), "--embeddings-out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    doc = json.loads(buf.getvalue())
    rows = load_file(str(out / "embeddings.safetensors"))["embeddings"]
    meta = json.loads((out / "tokens.json").read_text(encoding="utf-8"))
    assert rows.shape == (len(meta["tokens"]), 8) and meta["tokens"] == doc["unique_tokens"]
    assert doc["embeddings"]["rows_computed"] == sum(meta["merged"])
    with redirect_stdout(io.StringIO()):
        assert main(["dynamic", str(TOKENIZERS / "llama-2"), "--text", "a b", "--sample-merges"]) == 2
        assert (
            main(["dynamic", str(TOKENIZERS / "llama-2"), "--text", "a b", "--embeddings-out", str(out)]) == 2
        )
        assert main(["dynamic", str(TOKENIZERS / "llama-2"), "--text", "a b", "--model", str(path),
                     "--embeddings-out", str(out)]) == 2  # fmt: skip  # a non-empty folder is refused


@need_smollm
@pytest.mark.slow
def test_batch_embeddings_smollm2_gguf():
    tok = load_shared("smollm2-135m-instruct")
    res = dynamic_tokenize(tok, flores_lines("est_Latn", 16), 60)
    emb = batch_fvt_embeddings(res, tok, SMOLLM)
    r = emb.report()
    assert emb.rows.shape == (len(res.unique_tokens), 576) and np.isfinite(emb.rows).all()
    assert r["rows_computed"] > 0 and r["model_rows"] == tok.vocab_size and r["tokens_saved"] > 0

"""analysis.methods.undertrained: magikarp indicators, reference choice, round trip, verification, classes, CLI.

Real models come from $TOKLAB_MODELS (tests/fetch_models.sh); a tiny Llama (tests/conftest.py, `tiny_model`) is
trained on English FLORES text with a tokenizer that also learned Estonian, so some vocabulary tokens are never
seen.
"""

from __future__ import annotations

import collections
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from support import MINILM, ROOT, SMOLLM, TOKENIZERS, load_shared, need_minilm, need_smollm

from analysis import load
from analysis.errors import DataError, ModelLoadError
from analysis.methods.undertrained import (
    OK,
    OK_SPECIAL,
    UNDECODEABLE,
    analyze,
    auto_references,
    compute_indicators,
    first_principal_component,
    health_table,
    load_lm,
    parse_reference_spec,
    place_lm,
    round_trip_categories,
    select_candidates,
    stt_status,
    token_class,
    verdict_for,
    verify_result,
)
from analysis.model.matrix import EmbeddingWeights, Matrix
from analysis.model.models import parse_max_memory


# ------------------------------------------------------------------------------------------ round trip
def test_round_trip_gpt2_matches_methods_reference_numbers():
    rt = round_trip_categories(load_shared("gpt2"))
    c = collections.Counter(rt.categories)
    assert c[OK] == 49912 and c[OK_SPECIAL] == 1 and c[UNDECODEABLE] == 344  # methods.md §2.2 / §12.2
    assert not rt.prefix_mode


def test_round_trip_sentencepiece_prefix_mode():
    tok = load_shared("llama-2")
    rt = round_trip_categories(tok)
    assert rt.prefix_mode
    i = tok.vocab["▁the"]
    assert rt.decoded[i] == " the" and rt.categories[i] == OK


def test_stt_status_joins_reachability():
    st = stt_status(load_shared("smollm2-135m-instruct"))
    c = collections.Counter(st.values())
    assert c["special"] == 17 and c["reachable"] == 49152 - 17
    assert stt_status(load_shared("bert-base-uncased")) == {}  # STT applies to BPE only


# ------------------------------------------------------------------------------------------ references
@pytest.mark.slow
def test_auto_references_per_vocabulary():
    gpt2 = auto_references(load_shared("gpt2"))
    assert list(range(177, 188)) == [
        i for i in gpt2.ids if 177 <= i <= 187
    ]  # magikarp's GPT-2 refs (0xF5-0xFF)
    assert all("UTF-8" in gpt2.reasons[i] for i in gpt2.ids)
    bert = load_shared("bert-base-uncased")
    r = auto_references(bert)
    assert [bert.id_to_token[i] for i in r.ids] == [f"[unused{k}]" for k in range(10)]
    assert len(r.held_out) == 984
    gemma = auto_references(load_shared("gemma"))
    names = {load_shared("gemma").id_to_token[i] for i in gemma.ids}
    assert "<unused0>" in names and "<0xFF>" in names
    llama3 = load_shared("llama-3.1")
    r3 = auto_references(llama3)
    assert any("reserved" in llama3.id_to_token[i] for i in r3.ids)
    assert any("UTF-8" in r3.reasons[i] for i in r3.ids)
    # rows beyond the tokenizer are references too
    rp = auto_references(load_shared("bert-base-uncased"), n_rows=30522 + 5, max_named=0)
    assert rp.ids == list(range(30522, 30527))


def test_parse_reference_spec():
    bert = load_shared("bert-base-uncased")
    assert parse_reference_spec("1-3, 7,[unused9]", bert) == [1, 2, 3, 7, 10]
    with pytest.raises(DataError):
        parse_reference_spec("no-such-token-xyz", bert)


# ------------------------------------------------------------------------------------------ indicators
def _weights(inp: np.ndarray, out: np.ndarray | None, tied: bool) -> EmbeddingWeights:
    return EmbeddingWeights(
        Matrix(inp, "F32", "in"),
        None if out is None else Matrix(out, "F32", "out"),
        None,
        tied=tied,
        has_lm_head=True,
        format="test",
        files=[],
    )


def test_indicators_against_direct_formulas():
    rng = np.random.default_rng(1)
    e = rng.standard_normal((300, 16)).astype(np.float32)
    u = rng.standard_normal((300, 16)).astype(np.float32)
    u += np.outer(rng.standard_normal(300) * 3, rng.standard_normal(16)).astype(
        np.float32
    )  # a dominant direction
    u[5] = 0.0  # zero row: cosine denominator clipped, no NaN
    refs = [10, 11, 12]
    ind = compute_indicators(_weights(e, u, tied=False), refs, remove_pc1=True)
    assert list(ind) == ["input_norm", "cosine", "cosine_nopc1", "l2_distance"]
    np.testing.assert_allclose(ind["input_norm"], np.linalg.norm(e, axis=1), rtol=1e-5)
    m = u[refs].mean(0)
    cos = 1 - (u @ m) / np.maximum(np.linalg.norm(u, axis=1) * np.linalg.norm(m), 1e-6)
    np.testing.assert_allclose(ind["cosine"], cos, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ind["l2_distance"], np.linalg.norm(u - m, axis=1), rtol=1e-4)
    assert np.isfinite(ind["cosine"]).all()
    # PC1 removal: compare with an exact SVD
    c = u - u.mean(0)
    pc = np.linalg.svd(c, full_matrices=False)[2][0]
    _, pc2 = first_principal_component(Matrix(u, "F32", "u"))
    assert abs(abs(float(pc @ pc2)) - 1) < 1e-3
    p = c - np.outer(c @ pc, pc)
    mp = p[refs].mean(0)
    cos_p = 1 - (p @ mp) / np.maximum(np.linalg.norm(p, axis=1) * np.linalg.norm(mp), 1e-6)
    np.testing.assert_allclose(ind["cosine_nopc1"], cos_p, atol=2e-3)
    # tied without references is an error
    with pytest.raises(DataError):
        compute_indicators(_weights(e, None, tied=True), None)


def test_corrupt_rows_are_left_out_of_every_indicator(recwarn):
    """Rows holding NaN, an infinity or values whose square overflows float32 (corrupt weights) get non-finite
    indicators and take part in nothing else: not the reference mean (one reference is corrupt here), not the mean
    row or the first principal component. Before, `--pc1` on such a model ended in numpy's "Eigenvalues did not
    converge" traceback, and a corrupt reference row made every cosine NaN."""
    rng = np.random.default_rng(2)
    u = rng.standard_normal((300, 16)).astype(np.float32)
    u += np.outer(rng.standard_normal(300) * 3, rng.standard_normal(16)).astype(np.float32)
    bad = [5, 11, 40]
    u[5, 3], u[11, 0], u[40] = np.nan, np.inf, 3e38  # 11 is a reference
    refs = [10, 11, 12]
    ind = compute_indicators(_weights(u, u, tied=False), refs, remove_pc1=True)
    for name, values in ind.items():
        assert set(np.flatnonzero(~np.isfinite(values))) == set(bad), name
    good = np.setdiff1d(np.arange(300), bad)
    clean = u[good].astype(np.float64)
    m = u[[10, 12]].astype(np.float64).mean(0)  # the usable references only
    cos = 1 - (clean @ m) / (np.linalg.norm(clean, axis=1) * np.linalg.norm(m))
    np.testing.assert_allclose(ind["cosine"][good], cos, rtol=1e-4, atol=1e-5)
    mu = clean.mean(0)
    pc = np.linalg.svd(clean - mu, full_matrices=False)[2][0]
    _, pc2 = first_principal_component(Matrix(u, "F32", "u"))
    assert abs(abs(float(pc @ pc2)) - 1) < 1e-3
    p = (clean - mu) - np.outer((clean - mu) @ pc, pc)
    r = u[[10, 12]].astype(np.float64) - mu
    mp = (r - np.outer(r @ pc, pc)).mean(0)
    cos_p = 1 - (p @ mp) / (np.linalg.norm(p, axis=1) * np.linalg.norm(mp))
    np.testing.assert_allclose(ind["cosine_nopc1"][good], cos_p, atol=2e-3)
    assert not [
        str(w.message) for w in recwarn if issubclass(w.category, RuntimeWarning)
    ]  # notes say it, not numpy
    u[[10, 12]] = np.nan
    with pytest.raises(DataError, match="none of the 3 reference rows holds finite values"):
        compute_indicators(_weights(u, u, tied=False), refs)


def test_select_candidates_only_round_trip_tokens():
    ind = np.array([0.1, 0.2, 0.05, 0.9, 0.3] * 20)
    cats = [OK, OK, UNDECODEABLE, OK, OK_SPECIAL] * 20
    thr, cands = select_candidates(ind, cats, percentile=30)
    okv = ind[[i for i, c in enumerate(cats) if c == OK]]
    assert thr == pytest.approx(np.percentile(okv, 30))
    assert all(cats[i] in (OK, OK_SPECIAL) and ind[i] <= thr for i in cands)
    assert not any(cats[i] == UNDECODEABLE for i in cands)
    assert list(ind[cands]) == sorted(ind[cands])


def test_verdicts():
    assert verdict_for(0.95, True) == "strong_rejected"
    assert verdict_for(0.5, True) == "weak_rejected"
    assert verdict_for(0.05, False) == "verification_encoding_failed"
    assert verdict_for(0.0005, True) == "strong_verified"
    assert verdict_for(0.005, True) == "weak_verified"


@pytest.mark.parametrize(
    "text,cls",
    [
        ("<|im_start|>", "Special tokens"),
        (" 2024", "Digits and numbers"),
        ("-12", "Digits and numbers"),
        ('");', "Punctuation"),
        ("——", "Punctuation"),
        ("get_value", "Variable or function names"),
        ("InstoreAndOnline", "Variable or function names"),
        (" HTTPServer", "Variable or function names"),
        ("OOLEAN", "ALL-CAPS Latin words"),
        (" trieve", "Other Latin words"),
        ("Hello", "Other Latin words"),
        ("ção", "Other Latin words"),
        ("итися", "Non-Latin words or characters"),
        (" サーティ", "Non-Latin words or characters"),
        ("ab12", "Other"),
        ("⟨E2 80⟩", "Other"),
    ],
)
def test_token_class_rules(text, cls):
    assert token_class(text) == cls


# ------------------------------------------------------------------------------------------ real models
@need_minilm
def test_minilm_unused_tokens_rank_lowest_on_cosine():
    tok = load(MINILM)
    res = analyze(str(MINILM), tok)
    # the automatic choice proposes [unused0]..[unused9] for a BERT vocabulary
    assert [tok.id_to_token[i] for i in res.references.ids] == [f"[unused{k}]" for k in range(10)]
    assert res.main == "cosine" and not res.has_lm_head
    cos = res.indicators["cosine"][: res.n_tokens]
    rank = np.empty(len(cos), dtype=int)
    rank[np.argsort(cos, kind="stable")] = np.arange(len(cos))
    others = [i for t, i in tok.vocab.items() if t.startswith("[unused") and i not in res.references.ids]
    assert len(others) == 984
    share = float(np.mean(rank[others] < 0.05 * len(cos)))
    assert share >= 0.95, share
    assert res.reference_validation()["share_lowest_5pct"] == pytest.approx(share)
    with pytest.raises(ModelLoadError, match="no LM head"):
        verify_result(res, str(MINILM), tok, 3)


@pytest.mark.slow
@need_minilm
def test_cli_json_minilm():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis",
            "undertrained",
            "--model",
            str(MINILM),
            "--json",
            "--refs",
            "1-10",
            "--max-candidates",
            "5",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tied"] is True and doc["reference_ids"] == list(range(1, 11)) and doc["indicator"] == "cosine"
    assert len(doc["candidates"]) == 5 and {"id", "token", "indicator"} <= set(doc["candidates"][0])
    bad = subprocess.run(
        [sys.executable, "-m", "analysis", "undertrained", "--model", "/nonexistent/x.safetensors"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert bad.returncode == 2 and "error:" in bad.stderr and "Traceback" not in bad.stderr


# ------------------------------------------------------------------------------------------ tiny trained model
# (the `tiny_model` fixture lives in tests/conftest.py: the page tests in tests/app/ use it too)
@pytest.mark.slow
def test_tiny_model_unseen_tokens_at_bottom_and_verified(tiny_model):
    import torch  # noqa: PLC0415 - heavy

    folder, counts = tiny_model["folder"], tiny_model["counts"]
    # it learned: an untrained model (init std 0.02) predicts nearly uniformly, loss ≈ ln V (6.40 for V = 600);
    # one epoch takes the loss over the whole text at least 1 nat lower, and below the unigram entropy (5.49),
    # so the model uses context, not only token frequencies (measured 4.91-4.95 over 5 seeds)
    uniform = math.log(tiny_model["vocab"])
    assert abs(tiny_model["loss_before"] - uniform) < 0.1, tiny_model
    assert tiny_model["loss_after"] < tiny_model["loss_before"] - 1.0, tiny_model
    assert tiny_model["loss_after"] < tiny_model["unigram_entropy"], tiny_model
    # what the indicator rests on: a never-seen token's input row gets no gradient, so it never moves
    assert tiny_model["unseen_moved"] == 0.0
    tok = load(folder)
    res = analyze(str(folder), tok)
    assert not res.tied and res.main == "input_norm"
    cats = res.round_trip.categories
    unseen = [i for i in range(tiny_model["vocab"]) if counts[i] == 0 and cats[i] == OK]
    seen = [i for i in range(tiny_model["vocab"]) if counts[i] > 0 and cats[i] == OK]
    assert len(unseen) >= 20
    ind = res.main_values
    assert ind[unseen].max() < np.percentile(ind[seen], 5)  # every never-seen token below the seen bulk
    unseen_set = set(unseen)
    ok_cands = [i for i in res.candidates if cats[i] == OK]
    assert ok_cands and np.mean([i in unseen_set for i in ok_cands]) >= 0.9
    ok_cands = [i for i in ok_cands if i in unseen_set]
    # verification confirms them (and runs batched with a stop flag that keeps partial results)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lm = load_lm(str(folder), device="cpu")
        seen_progress = []
        stop_after = {"n": 0}

        def should_stop():
            stop_after["n"] += 1
            return stop_after["n"] > 1  # allow one batch, then stop

        part = verify_result(
            res,
            str(folder),
            tok,
            6,
            batch_size=3,
            lm=lm,
            should_stop=should_stop,
            progress=lambda d, t, m="": seen_progress.append((d, t)),
        )
        assert len(part) == 3 and len(res.verifications) == 3 and seen_progress[-1] == (3, 6)
        verify_result(res, str(folder), tok, 6, batch_size=3, lm=lm)  # resumes with the remaining ones
    finally:
        torch.set_num_threads(threads)
    assert len(res.verifications) == 6
    checked = [i for i in ok_cands if i in res.verifications]
    assert len(checked) >= 4
    for i in checked:
        v = res.verifications[i]
        assert v.verdict in ("strong_verified", "weak_verified") and v.max_prob < 0.01, (i, v)
    table = health_table(res, {i: "reachable" for i in range(res.n_tokens)})
    assert len(table) == res.n_rows and {"stt", "class", "script", "verdict", "input_norm"} <= set(
        table.columns
    )
    assert table.loc[checked[0], "verdict"].endswith("verified")


# ------------------------------------------------------------------------------------------ SmolLM2 (GGUF)
@need_smollm
@pytest.mark.slow
def test_smollm2_cli_pipeline_with_verification(tmp_path):
    """The whole pipeline on CPU from the CLI: GGUF weights + its own tokenizer, the top 4 candidates verified.

    Verification costs ~2-6 s of CPU per candidate (three prompts of ~200 tokens, three steps each), so the test
    verifies the top of the ranking, where the known glitch tokens are; more candidates would run the same path."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis",
            "undertrained",
            "--model",
            str(SMOLLM),
            "--verify",
            "4",
            "--device",
            "cpu",
            "--tokenizer",
            str(TOKENIZERS / "smollm2-135m-instruct"),
            "--json",
            "--csv",
            str(tmp_path / "health.csv"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1500,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["tied"] is True and doc["indicator"] == "cosine" and doc["reference_ids"]
    verified = [c for c in doc["candidates"] if "verdict" in c]
    assert len(verified) == 4
    # the reference tokens (SmolLM2's unused specials) are skipped: the 4 are real candidates, and the known
    # glitch tokens among them are verified (max probability ~1e-4, 30-100x under the 0.01 threshold)
    assert not any(c["reference"] for c in verified)
    assert sum(c["max_prob"] < 0.01 for c in verified) >= 3
    by_token = {c["token"]: c for c in verified}
    assert all(by_token[t]["verdict"].endswith("_verified") for t in ("MetaInfoClass", "swigfaiss"))
    # computed here, or read back from the run's disk store when another test computed them
    t = doc["timings_s"]
    assert t.get("verify_per_candidate", 0) > 0 or t["verify_stored"] == 4
    assert (tmp_path / "health.csv").stat().st_size > 1000


# ------------------------------------------------------------------------------------------ verification placement
@pytest.mark.slow
def test_verification_with_device_map_split_by_max_memory(tiny_model):
    """The device_map path on CPU: a max_memory cap splits the tiny model between CPU memory and disk offload;
    verification gives the same probabilities and verdicts as the model on one device."""
    folder = tiny_model["folder"]
    tok = load(folder)
    res = analyze(str(folder), tok)
    one = verify_result(res, str(folder), tok, 4, device="cpu", batch_size=2)
    assert res.placement["device_map"] is None and res.placement["reason"] == "CPU"
    assert res.timings["verify_per_candidate"] > 0
    split = analyze(str(folder), tok)
    # the embeddings (600 × 48 float32 = 113 KiB) and a layer fit under 300 KiB, the rest goes to disk
    got = verify_result(split, str(folder), tok, 4, device="cpu", max_memory={"cpu": "300KiB"}, batch_size=2)
    summary = split.placement["device_map_summary"]
    assert split.placement["device_map"] == "auto" and set(summary) == {"cpu", "disk"}, split.placement
    assert [v.id for v in got] == [v.id for v in one]
    for a, b in zip(one, got):
        assert a.verdict == b.verdict
        assert abs(a.max_prob - b.max_prob) <= 1e-6 + 1e-4 * a.max_prob


@pytest.mark.slow
def test_verifications_are_kept_and_read_back_without_loading_the_model(tiny_model, tmp_path, monkeypatch):
    """Verifications go to the disk store: the same model, tokenizer and placement read them back without loading
    the model; more candidates load it for the new ones only; another batch size is computed; a damaged store
    file is computed again."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    folder = str(tiny_model["folder"])
    tok = load(folder)
    res = analyze(folder, tok)
    first = verify_result(res, folder, tok, 4, device="cpu", batch_size=2)
    assert len(first) == 4 and res.timings["verify_stored"] == 0 and res.timings["verify_per_candidate"] > 0

    def must_not_load():
        raise AssertionError("the model was loaded although every candidate was stored")

    again = analyze(folder, tok)
    got = verify_result(again, folder, tok, 4, device="cpu", batch_size=2, lm=must_not_load)
    assert [v.as_dict() for v in got] == [v.as_dict() for v in first]  # exactly what was measured
    assert again.timings["verify_stored"] == 4 and "verify_per_candidate" not in again.timings
    assert again.placement["input_device"] == "cpu" and again.placement["reason"] == "CPU"

    loads: list[int] = []

    def place():
        loads.append(1)
        return place_lm(folder, device="cpu")

    more = analyze(folder, tok)
    six = verify_result(more, folder, tok, 6, device="cpu", batch_size=2, lm=place)
    assert loads == [1] and more.timings["verify_stored"] == 4 and len(six) == 6
    assert [v.id for v in six[:4]] == [v.id for v in first]

    other = analyze(folder, tok)  # another batch size is another entry
    verify_result(other, folder, tok, 2, device="cpu", batch_size=1)
    assert other.timings["verify_stored"] == 0 and other.timings["verify_per_candidate"] > 0

    for p in (tmp_path / "cache" / "store" / "undertrained-verified").glob("*.json"):
        p.write_text('{"version": "1", "data": {"verifications": {"0": {"id": "x"}}}}', encoding="utf-8")
    damaged = analyze(folder, tok)
    back = verify_result(damaged, folder, tok, 4, device="cpu", batch_size=2)
    assert damaged.timings["verify_stored"] == 0 and [v.id for v in back] == [v.id for v in first]
    assert [v.verdict for v in back] == [v.verdict for v in first]


def test_placement_and_max_memory_spec(tmp_path):
    assert parse_max_memory("0=20GiB, cuda:1=10GB,cpu=64GiB") == {0: "20GiB", 1: "10GB", "cpu": "64GiB"}
    assert parse_max_memory("") is None
    for bad in ("0=20", "gpu=3GiB", "cpu"):
        with pytest.raises(DataError):
            parse_max_memory(bad)

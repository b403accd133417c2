"""Model check (analysis.model.bpb / check / omp / warmup / model_check and `model-check`): bits per byte equal a
plain transformers computation, the sliding window scores every token once, the new rows' measures (mass on new
ids, KL on unchanged spans) follow their definitions, OMP finds sparse codes, the peft warm-up changes only the new
rows, and bad input is refused before any model is built."""

from __future__ import annotations

import io
import itertools
import json
import math
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from support import SMOLLM, TOKENIZERS, flores_lines, load_shared, need_smollm

from analysis.adapt.omp import hidden_space_rows, omp
from analysis.adapt.vocab_map import aligned_positions, byte_lengths, new_ids
from analysis.adapt.warmup import WarmupConfig, _distill_loss, _distill_pairs, warm_up
from analysis.cli import build_parser, main
from analysis.commands.model_check import _check
from analysis.errors import DataError
from analysis.evaluate.comparison import LanguageCheck, compare, kl_from_mass
from analysis.evaluate.flags import ARGMAX, MASS_LIMIT, flag_languages, flag_rows
from analysis.evaluate.model_check import RowSwap, heldout_texts, load_pair, model_check, resolve_pair
from analysis.methods.extension import ExtendResult, export_extension, plan
from analysis.model import bpb
from analysis.model.bpb import (
    GPU_BUDGET_SCALE,
    LOGIT_BUDGET,
    attention_kernels,
    batch_tokens_for,
    bits_per_byte,
    gpu_logit_budget,
    prefix_token,
    segments,
)
from analysis.model.models import load_causal_lm
from analysis.texts.flores import split_lines

LN2 = math.log(2)


def _reference_bits(model, ids_per_line: list[list[int]], prefix: int) -> float:
    """Σ −log₂ p with transformers alone: one plain forward per line, log_softmax, sum."""
    nats = 0.0
    with torch.no_grad():
        for ids in ids_per_line:
            x = torch.tensor([[prefix, *ids]])
            logp = torch.log_softmax(model(x).logits[0].double(), dim=-1)
            nats -= float(logp[torch.arange(len(ids)), torch.tensor(ids)].sum())
    return nats / LN2


# ------------------------------------------------------------------------------------------ a tiny edited pair
@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A tiny untied Llama on GPT-2's vocabulary (+ its tokenizer files) and its export extended with 60
    Estonian tokens (FVT rows)."""
    root = tmp_path_factory.mktemp("mc")
    gpt2 = load_shared("gpt2")
    src = root / "orig"
    cfg = transformers.LlamaConfig(vocab_size=gpt2.vocab_size, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                   max_position_embeddings=512, tie_word_embeddings=False, bos_token_id=50256,
                                   eos_token_id=50256)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(src), safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(TOKENIZERS / "gpt2" / f, src / f)
    train, held = split_lines("est_Latn")
    ext = plan(gpt2, "continued", train, 60).apply(60)
    out = root / "edited"
    export_extension(ExtendResult(ext, 60, heldout={"est": held}), out, model=src)
    return src, out


def test_sliding_window_scores_every_token_once():
    seq = list(range(100, 137))  # prefix + 36 tokens
    for window, stride in ((8, 4), (10, 9), (37, 5), (40, 20), (5, 1)):
        segs = segments([seq], window=window, stride=stride)
        scored = [p for s in segs for p in s.target_positions]
        assert scored == list(range(1, len(seq))), (window, stride)
        assert all(len(s.ids) <= window for s in segs)
        assert all(
            tuple(seq[s.offset + p] for p in range(s.first + 1, len(s.ids))) == s.targets for s in segs
        )
        # after the first window every scored token has at least window − stride tokens of context
        assert all(s.first >= window - stride - 1 for s in segs[1:])
    with pytest.raises(DataError, match="stride"):
        segments([seq], window=8, stride=8)


@pytest.mark.slow
def test_bpb_equals_plain_transformers_and_windows_stay_close(pair):
    src, _ = pair
    model = load_causal_lm(src).model
    tok = load_shared("gpt2")
    lines = flores_lines("est_Latn", 4) + flores_lines("eng_Latn", 3)
    got = bits_per_byte(model, tok, lines, batch_tokens=90)  # several batches, padding inside each
    p = prefix_token(tok, model.config)
    assert (p.id, p.source) == (50256, "tokenizer BOS") or p.source.startswith("config")
    ids = [e.ids for e in tok.tokenizer.encode_batch(lines, add_special_tokens=False)]
    ref = _reference_bits(model, ids, p.id)
    n_bytes = sum(len(s.encode("utf-8")) for s in lines)
    assert got.bytes == n_bytes and got.tokens == sum(map(len, ids))
    assert abs(got.bpb - ref / n_bytes) < 1e-4
    windowed = bits_per_byte(model, tok, lines, window=16, stride=8)  # every line longer than the window
    assert windowed.tokens == got.tokens and windowed.bpb != got.bpb
    assert abs(windowed.bpb - got.bpb) < 0.05 * got.bpb  # a 1-layer model gains little from far context


def test_batches_hold_the_logit_budget_on_the_cpu_and_grow_with_a_gpus_free_memory(pair):
    model = load_causal_lm(pair[0]).model
    vocab = model.get_output_embeddings().weight.shape[0]
    assert batch_tokens_for(model) == max(64, LOGIT_BUDGET // vocab)  # CPU weights: the fixed budget
    assert batch_tokens_for(model, 64 * vocab * 3) == 64 * 3
    assert gpu_logit_budget(0) == LOGIT_BUDGET  # never below the CPU's
    assert (
        gpu_logit_budget(60 * 2 * LOGIT_BUDGET) == 2 * LOGIT_BUDGET
    )  # a tenth of free memory, 6 bytes a logit
    assert gpu_logit_budget(10**14) == GPU_BUDGET_SCALE * LOGIT_BUDGET  # capped


def test_attention_kernels_leave_out_cudnn_on_cuda_only(monkeypatch):
    def enabled() -> tuple[bool, bool, bool, bool]:
        cuda = torch.backends.cuda
        return (cuda.cudnn_sdp_enabled(), cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(),
                cuda.math_sdp_enabled())  # fmt: skip

    before = enabled()
    assert before[0]  # torch's own choice may pick cuDNN's attention
    with attention_kernels("cuda:0"):
        assert enabled() == (False, True, True, True)
    assert enabled() == before  # restored on the way out
    with attention_kernels("cpu"):
        assert enabled() == before
    monkeypatch.setattr(bpb, "CUDA_SDPA", None)  # PyTorch's choice
    with attention_kernels("cuda"):
        assert enabled() == before
    monkeypatch.setattr(bpb, "CUDA_SDPA", ("MATH",))
    with attention_kernels("cuda"):
        assert enabled() == (False, False, False, True)


def test_aligned_positions_are_same_token_same_bytes():
    gpt2 = load_shared("gpt2")
    ext = plan(gpt2, "continued", split_lines("est_Latn")[0], 60).apply(60)
    new = ext.tokenizer
    line = flores_lines("est_Latn", 1)[0]
    o = [0, *gpt2.tokenizer.encode(line, add_special_tokens=False).ids]
    n = [0, *new.tokenizer.encode(line, add_special_tokens=False).ids]
    assert o != n
    pairs = aligned_positions(o, n, byte_lengths(gpt2), byte_lengths(new), lambda a, b: a == b)
    assert pairs and len(pairs) < len(n) - 1
    for p, q in pairs:
        assert o[p] == n[q] and b"".join(gpt2.token_bytes(gpt2.id_to_token[i]) for i in o[1:p]) == b"".join(
            new.token_bytes(new.id_to_token[i]) for i in n[1:q]
        )
    added = set(new_ids(gpt2, new))
    assert added == set(range(gpt2.vocab_size, gpt2.vocab_size + 60))
    assert not any(n[q] in added for _, q in pairs)


@pytest.mark.slow
def test_compare_measures_follow_their_definitions(pair):
    src, out = pair
    original, edited = load_pair(src, out, device="cpu")
    texts = {"est_Latn": flores_lines("est_Latn")[900:904], "eng_Latn": flores_lines("eng_Latn")[900:903]}
    run = compare(original.model, original.tok, edited.model, edited.tok, texts)
    est, eng = run.languages["edited"]
    assert est.tokens_edited < est.tokens_original and eng.tokens_edited == eng.tokens_original
    # English is tokenized the same way: every position is unchanged, the context is the same, and the old rows
    # are the original's, so each position's KL is −ln(1 − its mass on new ids) (means agree to 2nd order)
    assert eng.unchanged_positions == eng.tokens_original
    assert eng.kl_unchanged == pytest.approx(kl_from_mass(eng.mass_new_on_old_text), rel=1e-2)
    assert eng.kl_unchanged > 0
    assert eng.bits_edited > eng.bits_original and eng.mass_removed is None
    # the mass on new ids, recomputed with transformers alone on the first Estonian line (old tokenization)
    line = texts["est_Latn"][0]
    ids = [50256, *original.tok.tokenizer.encode(line, add_special_tokens=False).ids]
    with torch.no_grad():
        probs = torch.softmax(edited.model(torch.tensor([ids])).logits[0, :-1].double(), dim=-1)
    mass_first = float(probs[:, original.tok.vocab_size :].sum(1).mean())
    one = compare(original.model, original.tok, edited.model, edited.tok, {"x": [line]})
    assert abs(one.languages["edited"][0].mass_new_on_old_text - mass_first) < 1e-5
    uses = run.new_tokens["edited"]
    assert len(uses) == 60 and sum(u.occurrences for u in uses) > 0
    assert all(0 <= u.max_prob <= 1 for u in uses)


@pytest.mark.slow
def test_one_pass_per_model_equals_the_three_pass_reading(pair):
    """The original's states through the edited head (mass on new ids; unchanged lines not read again) give the
    figures of reading the text with the edited model itself, for every variant of a bake-off."""
    src, out = pair
    original, edited = load_pair(src, out, device="cpu")
    texts = {"est_Latn": flores_lines("est_Latn")[900:903], "eng_Latn": flores_lines("eng_Latn")[900:902]}
    swap = RowSwap(original, edited)
    variants = swap.variants(["mean"])
    # loud rows: the new ids' output rows are 4 × a frequent token's, so that they win the argmax and both
    # readings' argmax counts and best probabilities are compared on non-zero values
    e, w, b = swap.exported
    loud = (e, 4 * edited.model.get_output_embeddings().weight.detach()[[13] * len(swap.ids)].clone(), b)
    variants.append(("loud", lambda: swap.write(loud)))
    try:
        runs = [compare(original.model, original.tok, edited.model, edited.tok, texts, variants=variants,
                        shared_states=shared) for shared in (None, False)]  # fmt: skip
    finally:
        swap.write(swap.exported)
    assert runs[0].shared_states and not runs[1].shared_states
    assert sum(u.argmax_count for u in runs[0].new_tokens["loud"]) > 0
    for name in ("exported", "mean", "loud"):
        for fast, slow in zip(runs[0].languages[name], runs[1].languages[name]):
            a, b = fast.to_json(), slow.to_json()
            assert {k: v for k, v in a.items() if not isinstance(v, float)} == {
                k: v for k, v in b.items() if not isinstance(v, float)
            }
            for k, v in b.items():
                if isinstance(v, float):
                    assert a[k] == pytest.approx(v, rel=1e-4, abs=1e-7), (name, fast.lang, k)
        uses = {u.id: u for u in runs[1].new_tokens[name]}
        for u in runs[0].new_tokens[name]:
            v = uses[u.id]
            assert (u.occurrences, u.argmax_count, u.misplaced_argmax) == (
                v.occurrences,
                v.argmax_count,
                v.misplaced_argmax,
            )
            assert u.max_prob == pytest.approx(v.max_prob, rel=1e-4, abs=1e-7)
            assert u.misplaced_max_prob == pytest.approx(v.misplaced_max_prob, rel=1e-4, abs=1e-7)


def test_bakeoff_scores_each_init_on_the_same_bytes_and_restores_the_rows(pair):
    src, out = pair
    original, edited = load_pair(src, out, device="cpu")
    before = edited.model.get_input_embeddings().weight.detach().clone()
    texts = {"est_Latn": flores_lines("est_Latn")[900:903]}
    res = model_check(original, edited, texts, inits=("fvt", "mean", "random"))
    assert torch.equal(edited.model.get_input_embeddings().weight, before)
    doc = res.to_json()
    assert doc["bakeoff"]["inits"] == ["exported", "fvt", "mean", "random"]
    row = doc["bakeoff"]["languages"][0]["inits"]
    assert (
        len({r["bytes"] for r in row.values()}) == 1 and len({r["bpb_original"] for r in row.values()}) == 1
    )
    # the export used FVT: the same rows give the same figures; other inits give others
    assert row["fvt"]["bpb_edited"] == pytest.approx(row["exported"]["bpb_edited"], abs=1e-9)
    assert row["mean"]["bpb_edited"] != row["fvt"]["bpb_edited"]
    assert res.languages[0].lang == "est_Latn" and res.languages[0].variant == "exported"


def test_a_row_scaled_50_times_is_flagged_and_rows_at_the_mean_are_not(pair):
    """The flag rule (analysis.evaluate.flags) on one pass with two variants: every new output row at the mean of
    the original rows (inside their hull: never the argmax, so nothing flagged), then the same with one row
    50 × its exported (FVT) row (it wins where other tokens are next: flagged, the only one)."""
    src, out = pair
    original, edited = load_pair(src, out, device="cpu")
    swap = RowSwap(original, edited)
    e, w, b = swap.exported
    mean = w.clone()
    mean[:] = original.model.get_output_embeddings().weight.detach().float().mean(0)
    loud = mean.clone()
    loud[0] = 50 * w[0]
    variants = [("mean", lambda: swap.write((e, mean, b))), ("loud", lambda: swap.write((e, loud, b)))]
    texts = {"est_Latn": flores_lines("est_Latn")[900:902], "eng_Latn": flores_lines("eng_Latn")[900:901]}
    try:
        run = compare(original.model, original.tok, edited.model, edited.tok, texts, variants=variants)
    finally:
        swap.write(swap.exported)
    assert flag_rows(run.new_tokens["mean"]) == []
    assert all(u.misplaced_argmax == 0 for u in run.new_tokens["mean"])
    flagged = flag_rows(run.new_tokens["loud"])
    assert [r.id for r in flagged] == [swap.ids[0]] and flagged[0].reason == ARGMAX
    assert flagged[0].misplaced_argmax > flagged[0].occurrences
    for u in run.new_tokens["loud"]:  # the misplaced measures are parts of the overall ones
        assert u.misplaced_argmax <= u.argmax_count and u.misplaced_max_prob <= u.max_prob
    assert flag_languages(run.languages["mean"]) == []


def test_a_language_is_flagged_when_new_ids_take_over_half_the_mass_of_old_text():
    def lang(code: str, mass: float | None) -> LanguageCheck:
        return LanguageCheck(code, "edited", 1, 10, 8.0, 9.0, 5, 4, mass, None, 0, None)

    flagged = flag_languages([lang("est_Latn", 0.93), lang("eng_Latn", 0.02), lang("zho_Hans", None)])
    assert [c.lang for c in flagged] == ["est_Latn"] and MASS_LIMIT == 0.5
    assert flagged[0].to_json()["kl_nats"] == pytest.approx(-math.log(1 - 0.93))


@pytest.mark.slow
def test_hewitt_mass_grows_with_the_norm_of_random_rows(pair):
    src, out = pair
    original, edited = load_pair(src, out, device="cpu")
    ids = new_ids(original.tok, edited.tok)
    texts = {"est_Latn": flores_lines("est_Latn")[900:903]}
    masses = []
    for scale in (0.0, 1.0, 50.0):
        with torch.no_grad():
            gen = torch.Generator().manual_seed(0)
            rows = torch.randn(len(ids), 16, generator=gen) * scale
            edited.model.get_output_embeddings().weight[ids] = rows
        masses.append(compare(original.model, original.tok, edited.model, edited.tok, texts)
                      .languages["edited"][0].mass_new_on_old_text)  # fmt: skip
    assert masses[0] < masses[1] < masses[2] and masses[2] > 0.9


def test_omp_recovers_a_sparse_code_and_matches_brute_force():
    gen = torch.Generator().manual_seed(0)
    d = torch.randn(12, 6, generator=gen)
    truth = torch.zeros(3, 12)
    truth[0, [1, 7]] = torch.tensor([2.0, -1.0])
    truth[1, [3, 4]] = torch.tensor([0.5, 1.5])
    truth[2, [0, 11]] = torch.tensor([1.0, 1.0])
    y = truth @ d
    idx, coef = omp(d, y, 2)
    for i in range(3):
        assert set(idx[i].tolist()) == set(torch.nonzero(truth[i]).flatten().tolist())
        torch.testing.assert_close(coef[i] @ d[idx[i]], y[i], atol=1e-5, rtol=0)
    # a dense target: OMP's residual is no better than the best pair found by brute force, and its
    # coefficients are the least-squares fit on the atoms it chose
    z = torch.randn(1, 6, generator=gen)
    idx, coef = omp(d, z, 2)

    def residual(atoms: list[int]) -> float:
        a = d[atoms].T.double()
        return float((a @ torch.linalg.lstsq(a, z[0].double()).solution - z[0].double()).norm())

    best = min(residual(list(s)) for s in itertools.combinations(range(12), 2))
    got = float((coef[0].double() @ d[idx[0]].double() - z[0].double()).norm())
    assert got >= best - 1e-9
    sol = torch.linalg.lstsq(d[idx[0]].T.double(), z[0].double()).solution
    torch.testing.assert_close(coef[0].double(), sol, atol=1e-5, rtol=0)
    with pytest.raises(DataError, match="atoms"):
        omp(d, z, 13)


@pytest.mark.slow
def test_omp_init_codes_hidden_states_and_applies_the_codes_to_rows(pair):
    """A 'new token' whose pieces are one anchor token has that anchor's hidden state: OMP codes it with that
    anchor alone (coefficient 1), so its row is the anchor's row; a real two-piece token gets a row that is not
    its FVT mean."""
    src, _ = pair
    model = load_causal_lm(src).model
    emb = model.get_input_embeddings().weight.detach()
    head = model.get_output_embeddings().weight.detach()
    rows_e, rows_w = hidden_space_rows(model, [emb, head], [[300], [262, 4494]], 50256, k=4, anchors=512)
    torch.testing.assert_close(rows_e[0], emb[300], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(rows_w[0], head[300], atol=1e-4, rtol=1e-4)
    assert not torch.allclose(rows_e[1], emb[[262, 4494]].mean(0), atol=1e-3)
    with pytest.raises(DataError, match="anchor"):
        hidden_space_rows(model, [emb], [[300]], 50256, k=4, anchors=3)


@pytest.mark.slow
def test_warmup_changes_only_the_new_rows_and_lowers_the_loss(pair):
    src, out = pair
    original, edited = load_pair(src, out, device="cpu")
    ids = new_ids(original.tok, edited.tok)
    before = {k: v.detach().clone() for k, v in edited.model.state_dict().items()}
    train = {"est_Latn": split_lines("est_Latn")[0][:200]}
    held = {"est_Latn": flores_lines("est_Latn")[900:903]}
    res = warm_up(
        original, edited, train, held, WarmupConfig(steps=30, tokens_per_step=256, lr=3e-2, eval_every=15)
    )
    assert res.steps_done == 30 and [p["step"] for p in res.curve] == [0, 15, 30]
    assert np.mean(res.losses[-5:]) < np.mean(res.losses[:5])
    after = res.model.state_dict()
    assert set(after) == set(before)
    for k, v in before.items():
        if v.shape[0] == edited.model.config.vocab_size and v.ndim == 2:
            rest = torch.ones(v.shape[0], dtype=torch.bool)
            rest[ids] = False
            assert torch.equal(after[k][rest], v[rest]), k
            assert not torch.equal(after[k][ids], v[ids]), k
        else:
            assert torch.equal(after[k], v), k
    for k, v in edited.model.state_dict().items():  # the edited model given is not changed
        assert torch.equal(v, before[k])
    dist = warm_up(
        original, edited, train, held, WarmupConfig(steps=4, objective="distill", tokens_per_step=128)
    )
    assert dist.steps_done == 4 and all(np.isfinite(dist.losses))


def test_distillation_loss_is_the_full_models_hidden_state_mse(pair):
    """The distillation step reads the models' bodies only (no vocabulary head) and keeps the frozen original's
    hidden states per line: its loss equals the plain definition (the full models' ``hidden_states[-1]`` at the
    aligned boundaries, recomputed every step) on the same lines, and the kept states serve the next steps."""
    import random  # noqa: PLC0415 - a seeded draw for this test only

    src, out = pair
    original, edited = load_pair(src, out, device="cpu")
    lines = split_lines("est_Latn")[0][:60]
    ids = set(new_ids(original.tok, edited.tok))
    enc_o = [original.tok.tokenizer.encode(s, add_special_tokens=False).ids for s in lines]
    enc_n = [edited.tok.tokenizer.encode(s, add_special_tokens=False).ids for s in lines]
    pairs = _distill_pairs(enc_o, enc_n, byte_lengths(original.tok), byte_lengths(edited.tok), ids)
    assert len(pairs) > 5
    targets: dict = {}
    for step in range(3):
        got = _distill_loss(original, edited.model, pairs, 96, random.Random(step), "cpu", targets)
        rng, chosen, n = random.Random(step), [], 0
        while n < 96:
            k = rng.randrange(len(pairs))
            chosen.append(k)
            n += len(pairs[k][1])
        sq, count = 0.0, 0
        with torch.no_grad():
            for k in chosen:
                o, nw, al = pairs[k]
                h_o = original.model(torch.tensor([o]), output_hidden_states=True).hidden_states[-1][0]
                h_n = edited.model(torch.tensor([nw]), output_hidden_states=True).hidden_states[-1][0]
                for p, q in al:
                    sq += float(((h_n[q] - h_o[p]) ** 2).sum())
                    count += h_o.shape[-1]
        assert abs(float(got.detach()) - sq / count) <= 1e-5 * max(1.0, sq / count)
    assert 0 < len(targets) <= len(pairs)


def _cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(args)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_cli_json_shape_and_warmed_export(pair, tmp_path: Path):
    src, out = pair
    rc, text, err = _cli(["model-check", "--original", str(src), "--edited", str(out), "--langs", "est_Latn,eng_Latn",
                          "--lines", "2", "--inits", "mean,omp", "--warmup-steps", "2", "--warmup-tokens", "64",
                          "--objective", "distill",
                          "--out", str(tmp_path / "warm"), "--json"])  # fmt: skip
    assert rc == 0
    for stage in (
        "loading the original model",
        "loading the edited model",
        "est_Latn: lines read",
        "warm-up step",
    ):
        assert "model-check: " in err and stage in err, (stage, err)  # named stages on stderr, --json or not
    doc = json.loads(text)
    assert [c["lang"] for c in doc["languages"]] == ["est_Latn", "eng_Latn"]
    for c in doc["languages"]:
        assert {"lang", "bpb_original", "bpb_edited", "delta_bpb", "tokens_per_byte_original",
                "tokens_per_byte_edited", "mass_new_on_old_text", "kl_unchanged"} <= set(c)  # fmt: skip
        assert c["lines"] == 2 and c["bpb_original"] > 0
    assert doc["bakeoff"]["inits"] == ["exported", "mean", "omp"] and doc["n_new_tokens"] == 60
    assert len(doc["new_tokens"]) == 60
    assert isinstance(doc["flagged_new_rows"], list) and isinstance(doc["flagged_languages"], list)
    assert doc["bakeoff"]["flagged"].keys() == {"exported", "mean", "omp"}
    for u in doc["new_tokens"]:
        ut = u["undertrained"]
        assert ut["indicator"] and 0 <= ut["rank_share"] <= 1 and isinstance(ut["candidate"], bool)
    assert [p["step"] for p in doc["warmup"]["curve"]] == [0, 1, 2] and doc["warmup"][
        "objective"
    ] == "distill"
    assert (tmp_path / "warm" / "model.safetensors").is_file() and (
        tmp_path / "warm" / "tokenizer.json"
    ).is_file()
    rc, text, _ = _cli(["model-check", "--original", str(src), "--edited", str(out), "--langs", "eng_Latn",
                        "--lines", "1", "--quiet"])  # fmt: skip
    assert rc == 0 and "eng_Latn: BPB" in text and _ == ""  # --quiet: nothing on stderr
    assert "new rows flagged" in text or "new row flagged" in text


@pytest.mark.slow
def test_bad_inputs_are_refused_before_loading(pair, tmp_path: Path):
    src, out = pair
    tok_only = tmp_path / "tok_only"
    tok_only.mkdir()
    shutil.copy(out / "tokenizer.json", tok_only / "tokenizer.json")
    rc, _, err = _cli(["model-check", "--original", str(src), "--edited", str(tok_only)])
    assert rc == 2 and "tokenizer-only" in err and "Traceback" not in err
    wrong = tmp_path / "wrong"  # the edited tokenizer with the ORIGINAL model: 60 ids without rows
    shutil.copytree(src, wrong)
    shutil.copy(out / "tokenizer.json", wrong / "tokenizer.json")
    with pytest.raises(DataError, match="does not match"):
        resolve_pair(src, wrong)
    rc, _, err = _cli(["model-check", "--original", str(src), "--edited", str(wrong)])
    assert rc == 2 and "does not match" in err
    rc, _, err = _cli(
        ["model-check", "--original", str(src), "--edited", str(out), "--max-memory", "cpu=1MB"]
    )
    assert rc == 2 and "too big" in err
    rc, _, err = _cli(["model-check", "--original", str(src), "--edited", str(out), "--inits", "zeros"])
    assert rc == 2 and "unknown init" in err
    rc, _, err = _cli(["model-check", "--original", str(src), "--edited", str(out), "--lines", "0"])
    assert rc == 2 and "--lines" in err
    warm = tmp_path / "busy"
    warm.mkdir()
    (warm / "x").write_text("x")
    rc, _, err = _cli(["model-check", "--original", str(src), "--edited", str(out), "--warmup-steps", "1",
                       "--out", str(warm)])  # fmt: skip
    assert rc == 2 and "not empty" in err and (warm / "x").read_text() == "x"


@pytest.mark.slow
def test_rbpe_folder_reused_ids_are_new_and_removed(tmp_path: Path):
    """An R-BPE model folder (reuse --model): every id keeps its number, the reused ids count as new and as removed;
    Arabic is read the R-BPE way, English exactly as before (same positions, all unchanged)."""
    from analysis.methods import reuse  # noqa: PLC0415 - the method, only for this test
    from analysis.methods.reuse.model import export_model  # noqa: PLC0415

    llama = load_shared("llama-3.1")
    rt = reuse.build_reuse_tokenizer(llama, split_lines("arb_Arab")[0][:300])
    src = tmp_path / "orig"
    cfg = transformers.LlamaConfig(vocab_size=llama.vocab_size, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                   max_position_embeddings=512, tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(src), safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZERS / "llama-3.1" / f, src / f)
    export_model(rt, src, tmp_path / "rbpe")
    rc, text, err = _cli(["model-check", "--original", str(src), "--edited", str(tmp_path / "rbpe"), "--langs",
                          "arb_Arab,eng_Latn", "--lines", "2", "--json"])  # fmt: skip
    assert rc == 0, err
    doc = json.loads(text)
    assert doc["n_new_tokens"] == doc["n_removed_tokens"] == len(rt.reused_ids)
    arb, eng = doc["languages"]
    assert (
        arb["tokens_edited"] != arb["tokens_original"] and arb["unchanged_positions"] < arb["tokens_edited"]
    )
    assert arb["mass_removed"] > 0 and arb["mass_new_on_old_text"] is not None
    assert eng["tokens_edited"] == eng["tokens_original"] == eng["unchanged_positions"]
    assert {u["id"] for u in doc["new_tokens"]} == set(rt.reused_ids)


# ------------------------------------------------------------------------------------------ the real SmolLM2
@need_smollm
@pytest.mark.slow
def test_smollm2_bpb_equals_transformers_alone_on_five_languages():
    """The unedited SmolLM2 (GGUF): bits per byte of the engine (batched, padded) = one plain transformers
    forward per line with transformers' own GGUF tokenizer, to 1e-3, on 2 held-out lines × 5 languages."""
    lm = load_causal_lm(SMOLLM).model
    ours = load_shared("smollm2-135m-instruct")
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(SMOLLM.parent), gguf_file=SMOLLM.name)
    texts = heldout_texts(["est_Latn", "eng_Latn", "fin_Latn", "rus_Cyrl", "zho_Hans"], 2)
    for lang, lines in texts.items():
        got = bits_per_byte(lm, ours, lines)
        prefix = prefix_token(ours, lm.config)
        ids = [hf_tok(s, add_special_tokens=False)["input_ids"] for s in lines]
        ref = _reference_bits(lm, ids, prefix.id) / sum(len(s.encode("utf-8")) for s in lines)
        assert abs(got.bpb - ref) < 1e-3, lang


def test_cli_langs_all_means_every_flores_language():
    args = build_parser().parse_args(["model-check", "--original", "x", "--edited", "y", "--langs", "all"])
    langs, inits = _check(args)
    assert len(langs) == 204 and "est_Latn" in langs and inits == []

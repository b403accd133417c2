"""Transplant (analysis.adapt.transplant, `transplant`): a tokenizer whose ids are a permutation of the model's
own gives the same logits on every text; a tokenizer that extends the model's gives the rows `extend --model`
gives; tokens match by bytes across spellings; special tokens map by role; OMP's screened Gram form agrees with
brute-force least squares; the folder loads in transformers, passes the model check, and (slow) in llama.cpp."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from support import flores_lines, load_shared

from analysis.adapt import omp as omp_module
from analysis.adapt.embeddings import init_rows
from analysis.adapt.omp import DEFAULT_ANCHORS, omp
from analysis.adapt.transplant import (
    pieces_of_bytes,
    plan_transplant,
    read_for_model_check,
    special_roles,
    transplant,
)
from analysis.cli import main
from analysis.errors import DataError
from analysis.evaluate.model_check import load_pair, model_check
from analysis.methods.extension import ExtendResult, export_extension, plan
from analysis.model.models import load_causal_lm
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Tere hommikust, kuidas läheb?",
    "数字 123 and ünïcödé!",
]


def _tokenizer(lines: list[str]) -> dict:
    """A small byte-level BPE (300 ids, <|endoftext|> at 0) trained on `lines`, as a tokenizer.json document."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<|endoftext|>"], show_progress=False)  # fmt: skip
    tk.train_from_iterator(lines, trainer=tr)
    return json.loads(tk.to_str())


def _save_model(folder: Path, doc: dict, *, tied: bool) -> None:
    """A tiny random Llama (hidden 16, one layer) for the tokenizer `doc`, saved with it."""
    cfg = transformers.LlamaConfig(vocab_size=len(doc["model"]["vocab"]), hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                   max_position_embeddings=256, tie_word_embeddings=tied, bos_token_id=0,
                                   eos_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():  # a bias-free head has nothing to check; make rows distinct and not tiny
        model.get_input_embeddings().weight.normal_(0, 1)
    model.save_pretrained(str(folder), safe_serialization=True)
    (folder / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")


def _permuted(doc: dict, seed: int = 1) -> tuple[dict, np.ndarray]:
    """The same tokenizer with its ids permuted: (document, perm with new id = perm[old id])."""
    vocab = doc["model"]["vocab"]
    perm = np.random.default_rng(seed).permutation(len(vocab))
    out = json.loads(json.dumps(doc))
    out["model"]["vocab"] = {s: int(perm[i]) for s, i in vocab.items()}
    for a in out["added_tokens"]:
        a["id"] = int(perm[a["id"]])
    return out, perm


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny model folder per head kind (tied, untied) on a small byte-level BPE."""
    doc = _tokenizer(flores_lines("eng_Latn", 200) + flores_lines("est_Latn", 100))
    root = tmp_path_factory.mktemp("transplant")
    out = {}
    for tied in (True, False):
        f = root / ("tied" if tied else "untied")
        f.mkdir()
        _save_model(f, doc, tied=tied)
        out[tied] = f
    return doc, out


def _logits(folder: Path | str, ids: list[int]) -> np.ndarray:
    model = load_causal_lm(folder).model
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


@pytest.mark.parametrize("tied", [True, False])
def test_permuted_ids_reproduce_the_logits_exactly(tiny, tmp_path: Path, tied: bool) -> None:
    doc, folders = tiny
    pdoc, perm = _permuted(doc)
    a = load(folders[tied] / "tokenizer.json")
    b = LoadedTokenizer.from_document(pdoc, "permuted")
    res = transplant(folders[tied], b, tmp_path / "out", init="random")
    assert res.plan.counts()["initialised"] == 0 and res.tied is tied
    assert (res.plan.src[perm] == np.arange(len(perm))).all()  # B's id perm[i] carries A's row i
    for text in TEXTS:
        ids_a = a.tokenizer.encode(text, add_special_tokens=False).ids
        ids_b = b.tokenizer.encode(text, add_special_tokens=False).ids
        assert ids_b == [int(perm[i]) for i in ids_a]
        la, lb = _logits(folders[tied], ids_a), _logits(tmp_path / "out", ids_b)
        np.testing.assert_array_equal(lb[:, perm], la)
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["vocab_size"] == len(perm) and cfg["eos_token_id"] == int(perm[0])
    assert load(tmp_path / "out").digest == b.digest  # the folder's tokenizer is B


def test_model_check_reads_a_transplant_through_its_map(tiny, tmp_path: Path) -> None:
    doc, folders = tiny
    pdoc, _ = _permuted(doc, seed=2)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "tokenizer.json").write_text(json.dumps(pdoc), encoding="utf-8")
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["transplant", "--model", str(folders[False]), "--tokenizer", str(tmp_path / "b"), "--init", "mean",
                   "--out", str(tmp_path / "out"), "--langs", "eng_Latn,est_Latn", "--lines", "3", "--json"])  # fmt: skip
    assert rc == 0
    rows = json.loads(buf.getvalue())["languages"]
    assert [r["lang"] for r in rows] == ["eng_Latn", "est_Latn"]
    for r in rows:  # the same model under other ids: the same bits on the same bytes
        assert math.isclose(r["bpb_edited"], r["bpb_original"], rel_tol=1e-6)
        assert r["tokens_per_byte_edited"] == r["tokens_per_byte_original"]
    a = load(folders[False] / "tokenizer.json")
    _, vocab = read_for_model_check(tmp_path / "out", a)
    assert vocab.new == [] and vocab.removed == []


@pytest.mark.parametrize("init", ["fvt", "omp"])
def test_an_extended_tokenizer_gets_the_rows_extend_gives(tiny, tmp_path: Path, init: str) -> None:
    doc, folders = tiny
    a = load(folders[False] / "tokenizer.json")
    ext = plan(a, "continued", flores_lines("est_Latn", 150), 30).apply(30)
    export_extension(ExtendResult(ext, 30), tmp_path / "ext", model=folders[False], init=init)
    res = transplant(folders[False], ext.tokenizer, tmp_path / "tp", init=init, omp_candidates=None)
    assert res.plan.counts()["initialised"] == 30
    e = load_causal_lm(tmp_path / "ext").model
    t = load_causal_lm(tmp_path / "tp").model
    for get in ("get_input_embeddings", "get_output_embeddings"):
        torch.testing.assert_close(getattr(t, get)().weight, getattr(e, get)().weight, atol=1e-5, rtol=1e-5)
    if (
        init == "fvt"
    ):  # the bake-off on the transplant: its fvt variant is the exported rows, on the same bytes
        original, edited = load_pair(folders[False], tmp_path / "tp", reader=read_for_model_check)
        res = model_check(original, edited, {"est_Latn": flores_lines("est_Latn", 2)}, inits=["fvt", "mean"])
        rows = {name: langs[0] for name, langs in res.bakeoff.items()}
        assert set(rows) == {"exported", "fvt", "mean"}
        assert math.isclose(rows["fvt"].bpb_edited, rows["exported"].bpb_edited, rel_tol=1e-6)


def test_tokens_match_by_bytes_across_spellings() -> None:
    sp, bl = load_shared("llama-2"), load_shared("gpt2")
    p = plan_transplant(bl, sp, a_rows=len(bl.id_to_token), need_pieces=False)
    the = sp.vocab["▁the"]
    assert bl.id_to_token[int(p.src[the])] == "Ġthe"
    assert bl.id_to_token[int(p.src[sp.vocab["<0x41>"]])] == "A"  # a byte-fallback piece is its byte
    # a partial UTF-8 character: byte-level alphabet on one side, <0xNN> pieces on the other
    assert pieces_of_bytes(sp, "é".encode()[:1]) == [sp.vocab["<0xC3>"]]
    assert pieces_of_bytes(bl, "é".encode()[:1]) == [bl.vocab["Ã"]]
    assert pieces_of_bytes(sp, b" the") == [the]


@pytest.mark.slow
def test_special_tokens_map_by_role_and_report_the_rest() -> None:
    smol, llama, qwen = load_shared("smollm2-135m-instruct"), load_shared("llama-3.1"), load_shared("qwen3")
    cfg = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    assert special_roles(llama)["bos"] == llama.tokenizer.token_to_id(
        "<|begin_of_text|>"
    )  # its post-processor's
    p = plan_transplant(smol, llama, a_rows=len(smol.id_to_token), a_config=cfg, need_pieces=False)
    roles = {r.role: r for r in p.roles}
    assert (roles["bos"].b_token, roles["bos"].a_token, roles["bos"].status) == (
        "<|begin_of_text|>",
        "<|im_start|>",
        "mapped by role",
    )
    assert (roles["turn_end"].b_token, roles["turn_end"].a_token) == ("<|eot_id|>", "<|im_end|>")
    assert (roles["end_of_text"].b_token, roles["end_of_text"].a_token) == (
        "<|end_of_text|>",
        "<|endoftext|>",
    )
    assert roles["pad"].status == "only in A"
    q = plan_transplant(smol, qwen, a_rows=len(smol.id_to_token), a_config=cfg, need_pieces=False)
    qroles = {r.role: r for r in q.roles}
    assert qroles["turn_start"].status == "same token"
    assert "<think>" not in [r.b_token for r in q.roles]  # not a role: initialised from its text
    assert q.src[qwen.tokenizer.token_to_id("<think>")] == -1
    with pytest.raises(DataError, match="does not fit"):
        plan_transplant(smol, qwen, a_rows=100, need_pieces=False)


@pytest.mark.parametrize("gram_max", [0, omp_module.GRAM_MAX])  # candidate Gram blocks computed / gathered
def test_screened_omp_agrees_with_brute_force_least_squares(monkeypatch, gram_max: int) -> None:
    monkeypatch.setattr(omp_module, "GRAM_MAX", gram_max)
    gen = torch.Generator().manual_seed(0)
    d = torch.randn(40, 30, generator=gen)
    truth = torch.zeros(2, 40)
    truth[0, [3, 17]] = torch.tensor([1.5, -2.0])
    truth[1, [8, 30]] = torch.tensor([0.7, 1.1])
    idx, coef = omp(d, truth @ d, 2, candidates=12)  # screening active: 12 of 40 atoms per target
    for i in range(2):
        assert set(idx[i].tolist()) == set(torch.nonzero(truth[i]).flatten().tolist())
        torch.testing.assert_close(coef[i] @ d[idx[i]], (truth @ d)[i], atol=1e-5, rtol=0)
    z = torch.randn(3, 30, generator=gen)
    idx, coef = omp(d, z, 4, candidates=39)
    exact_idx, exact_coef = omp(d, z, 4)
    for i in range(3):  # the coefficients are the least-squares fit on the chosen atoms
        sol = torch.linalg.lstsq(d[idx[i]].T.double(), z[i].double()).solution
        torch.testing.assert_close(coef[i].double(), sol, atol=1e-5, rtol=0)
        sol = torch.linalg.lstsq(d[exact_idx[i]].T.double(), z[i].double()).solution
        torch.testing.assert_close(exact_coef[i].double(), sol, atol=1e-5, rtol=0)
    # brute force over every pair of atoms: OMP's fit is never better than the best pair's, and is the exact
    # least-squares fit of the pair it chose
    idx, coef = omp(d, z[:1], 2, candidates=20)
    got = float((coef[0].double() @ d[idx[0]].double() - z[0].double()).norm())

    def residual(atoms: list[int]) -> float:
        a = d[atoms].T.double()
        return float((a @ torch.linalg.lstsq(a, z[0].double()).solution - z[0].double()).norm())

    assert got >= min(residual([i, j]) for i in range(40) for j in range(i + 1, 40)) - 1e-9
    assert math.isclose(got, residual(idx[0].tolist()), rel_tol=1e-6)


def test_screening_keeps_the_rows_a_target_is_made_of() -> None:
    """A target made of 3 atoms, and 5 decoys that correlate with it more than any of the 3: screened to 5
    candidates, OMP only sees the decoys and misses the target; with the 3 kept among the candidates it is exact."""
    gen = torch.Generator().manual_seed(0)
    d = torch.randn(40, 30, generator=gen)
    y = d[[3, 17, 25]].mean(0, keepdim=True)
    d[35:] = y + 0.05 * torch.randn(5, 30, generator=gen)
    idx, coef = omp(d, y, 5, candidates=5)
    assert set(idx[0].tolist()) == set(range(35, 40))
    assert float((coef[0] @ d[idx[0]] - y[0]).norm() / y.norm()) > 1e-3
    idx, coef = omp(d, y, 5, candidates=5, keep=torch.tensor([[3, 17, 25, -1]]))
    assert {3, 17, 25} <= set(idx[0].tolist())
    torch.testing.assert_close(coef[0] @ d[idx[0]], y[0], atol=1e-5, rtol=0)


def test_embed_omp_gets_the_fvt_row_it_codes_when_its_pieces_lie_beyond_the_anchors() -> None:
    """Without a donor, OMP in embedding space codes a new token's FVT row (the mean of the rows of its pieces)
    over the dictionary and applies the code to the same rows: the best it can give is that FVT row, and only when
    the pieces' rows are atoms. GPT-2 reads Estonian words with pieces beyond its first 8,192 ids (the anchors):
    the dictionary takes them in, and OMP at k = 16 in 128 dimensions gives the FVT rows (it gave rows 38 % off
    for SmolLM2 ← Qwen3 when the pieces were missing)."""
    gpt2 = load_shared("gpt2")
    e = torch.randn(
        max(gpt2.id_to_token) + 1, 128, generator=torch.Generator().manual_seed(0)
    )  # a tiny model's rows
    words = sorted({w for line in flores_lines("est_Latn", 20) for w in line.split() if w.isalpha()})
    readings = [pieces_of_bytes(gpt2, (" " + w).encode("utf-8")) for w in words]
    readings = [p for p in readings if 2 <= len(p) <= 4 and max(p) >= DEFAULT_ANCHORS][:40]
    assert len(readings) == 40
    pieces = {len(e) + r: p for r, p in enumerate(readings)}  # new ids after the model's rows
    new = list(pieces)
    fvt = init_rows(e, None, None, gpt2, gpt2, new, "fvt", pieces=pieces)[0]
    coded = init_rows(e, None, None, gpt2, gpt2, new, "omp", pieces=pieces, omp_k=16, omp_candidates=128)[0]
    torch.testing.assert_close(coded, fvt, atol=1e-4, rtol=1e-4)


def _donor(
    folder: Path, a_folder: Path, b_rows: int, d_rows: int
) -> dict[int, tuple[int, float, int, float]]:
    """A donor model for B = A + new tokens (B's first ids are A's): its rows of the shared tokens are A's rows in
    another space (a random linear map to width 24; input and output maps differ), the row of each new token j is
    c·(a shared token's row), input and output with their own token and factor; `d_rows` rows in all. Returns
    j → (input atom, input factor, output atom, output factor)."""
    a = load_causal_lm(a_folder).model
    e, w = a.get_input_embeddings().weight.detach(), a.get_output_embeddings().weight.detach()
    n_a = e.shape[0]
    gen = torch.Generator().manual_seed(3)
    cfg = transformers.LlamaConfig(vocab_size=d_rows, hidden_size=24, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=False)  # fmt: skip
    d = transformers.LlamaForCausalLM(cfg)
    truth = {}
    with torch.no_grad():
        de, dw = d.get_input_embeddings().weight, d.get_output_embeddings().weight
        de[:n_a] = e @ torch.randn(16, 24, generator=gen)
        dw[:n_a] = w @ torch.randn(16, 24, generator=gen)
        for j in range(n_a, min(b_rows, d_rows)):
            s, t = (int(x) for x in torch.randint(1, n_a, (2,), generator=gen))
            c, c2 = 0.5 + torch.rand(2, generator=gen).tolist()[0], -1.5 + torch.rand(1, generator=gen).item()
            de[j], dw[j] = c * de[s], c2 * dw[t]
            truth[j] = (s, c, t, c2)
    d.save_pretrained(str(folder), safe_serialization=True)
    return truth


def test_donor_omp_recovers_the_rows_a_donor_implies(tiny, tmp_path: Path) -> None:
    """With a donor (a model of B's tokenizer), each new token's donor row is coded over the shared tokens' donor
    rows, input and output each in their own space, and the codes are applied to A's rows: here the known
    answer c·(A's row of the atom); tokens beyond the donor's rows get FVT's rows and a warning. Without a
    donor, OMP in embedding space with k ≥ the width reproduces FVT exactly."""
    doc, folders = tiny
    a = load(folders[False] / "tokenizer.json")
    ext = plan(a, "continued", flores_lines("est_Latn", 150), 30).apply(30)
    n_b = max(ext.tokenizer.id_to_token) + 1
    truth = _donor(tmp_path / "donor", folders[False], n_b, n_b - 5)
    res = transplant(folders[False], ext.tokenizer, tmp_path / "tp", init="omp", k=4, omp_candidates=None,
                     donor=tmp_path / "donor")  # fmt: skip
    assert res.omp["space"] == "donor" and res.omp["beyond_donor_rows"] == 5
    assert any("beyond the donor" in w for w in res.warnings)
    a_m, t_m = load_causal_lm(folders[False]).model, load_causal_lm(tmp_path / "tp").model
    ea, wa = a_m.get_input_embeddings().weight, a_m.get_output_embeddings().weight
    et, wt = t_m.get_input_embeddings().weight, t_m.get_output_embeddings().weight
    assert len(truth) == 25
    for j, (s, c, t, c2) in truth.items():
        torch.testing.assert_close(et[j], c * ea[s], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(wt[j], c2 * wa[t], atol=1e-4, rtol=1e-4)
    fvt = transplant(folders[False], ext.tokenizer, tmp_path / "fvt", init="fvt")
    f_m = load_causal_lm(tmp_path / "fvt").model
    late = torch.arange(n_b - 5, n_b)
    torch.testing.assert_close(et[late], f_m.get_input_embeddings().weight[late])
    emb = transplant(folders[False], ext.tokenizer, tmp_path / "emb", init="omp", k=16, omp_candidates=None)
    assert emb.omp["space"] == "embed" and fvt.plan.initialised == emb.plan.initialised
    new = torch.as_tensor(fvt.plan.initialised)
    e_m = load_causal_lm(tmp_path / "emb").model
    for get in ("get_input_embeddings", "get_output_embeddings"):
        torch.testing.assert_close(getattr(e_m, get)().weight[new], getattr(f_m, get)().weight[new], atol=1e-4,
                                   rtol=1e-4)  # fmt: skip
    with pytest.raises(DataError, match="--donor is for --init omp"):
        transplant(folders[False], ext.tokenizer, tmp_path / "x", init="fvt", donor=tmp_path / "donor")


def test_cli_refuses_a_donor_without_omp(tiny, tmp_path: Path, capsys) -> None:
    _, folders = tiny
    rc = main(["transplant", "--model", str(folders[True]), "--tokenizer", str(folders[True] / "tokenizer.json"),
               "--init", "fvt", "--donor", str(folders[False]), "--out", str(tmp_path / "out"), "--no-check"])  # fmt: skip
    assert rc == 2 and "error: --donor is for --init omp" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_gguf_round_trip_through_llama_cpp(tmp_path: Path) -> None:
    """A tiny Llama on SmolLM2's vocabulary given Qwen3's tokenizer: transformers and llama.cpp load the folder,
    both tokenize FLORES as Qwen3 does, and llama.cpp's next-token log-probabilities are the model's."""
    pytest.importorskip("llama_cpp")
    from analysis.model.gguf_model import compare_logprobs  # noqa: PLC0415 - llama.cpp, slow lane only
    from analysis.model.llamacpp import llama_tokenize, open_gguf  # noqa: PLC0415

    smol, qwen = load_shared("smollm2-135m-instruct"), load_shared("qwen3")
    src = tmp_path / "smol"
    cfg = transformers.LlamaConfig(vocab_size=len(smol.id_to_token), hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                   max_position_embeddings=512, tie_word_embeddings=True, bos_token_id=1,
                                   eos_token_id=2)  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(src), safe_serialization=True)
    (src / "tokenizer.json").write_text(smol.to_json(), encoding="utf-8")
    res = transplant(src, qwen, tmp_path / "out", init="mean", gguf=True)
    assert res.gguf is not None and res.gguf["vocab"]["pre"] == "qwen2"
    gguf = tmp_path / "out" / "out.gguf"
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "out"))
    llm = open_gguf(gguf)
    try:
        for line in flores_lines("zho_Hans", 5) + flores_lines("est_Latn", 5):
            ids = qwen.tokenizer.encode(line, add_special_tokens=False).ids
            assert hf.encode(line, add_special_tokens=False) == ids
            assert llama_tokenize(llm, line, add_special=False) == ids
    finally:
        llm.close()
    cmp = compare_logprobs(tmp_path / "out", gguf, qwen, flores_lines("est_Latn", 1)[0], max_tokens=32)
    assert cmp.top1_same == 1.0 and cmp.max_abs_diff < 1e-2

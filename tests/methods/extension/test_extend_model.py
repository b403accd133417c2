"""The model follows an extension (analysis.methods.extension.model): embeddings and LM head grown to the new ids, new
rows by FVT / mean / multivariate normal, old rows and tied weights kept, logits on unchanged text unchanged."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from support import FLORES, SMOLLM, flores_lines, load_shared, need_smollm

from analysis.adapt.embeddings import mvn_rows, remap_embeddings
from analysis.adapt.fvt import fvt_pieces
from analysis.cli import main
from analysis.errors import DataError
from analysis.methods.extension import ExtendResult, export_extension, plan
from analysis.model.models import load_causal_lm
from analysis.texts.flores import split_lines

TRAIN, HELD = split_lines("est_Latn")
ENGLISH = " ".join(flores_lines("eng_Latn")[900:903])


def _tiny(vocab_size: int, tied: bool) -> transformers.LlamaForCausalLM:
    cfg = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                   tie_word_embeddings=tied, bos_token_id=50256, eos_token_id=50256)  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def _logits(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


@pytest.fixture(scope="module")
def extended():
    gpt2 = load_shared("gpt2")
    p = plan(gpt2, "continued", TRAIN, 150)
    return gpt2, p.apply(150)


@pytest.mark.parametrize("tied", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_export_grows_the_model_and_keeps_old_rows(extended, tmp_path: Path, tied: bool):
    gpt2, ext = extended
    src = tmp_path / "src"
    original = _tiny(gpt2.vocab_size, tied)
    original.save_pretrained(str(src), safe_serialization=True)
    res = ExtendResult(ext, 150, heldout={"est": HELD})
    files = export_extension(res, tmp_path / "out", model=src)
    assert {"model.safetensors", "config.json", "tokenizer.json", "extension_report.json"} <= set(files)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "out")).eval()
    n = gpt2.vocab_size + 150
    assert model.config.vocab_size == n == ext.tokenizer.vocab_size
    assert model.config.bos_token_id == model.config.eos_token_id == 50256  # special ids unchanged
    e_old, e_new = original.get_input_embeddings().weight, model.get_input_embeddings().weight
    h_new = model.get_output_embeddings().weight
    assert e_new.shape[0] == h_new.shape[0] == n
    assert (h_new.data_ptr() == e_new.data_ptr()) == tied
    assert torch.equal(e_new[: gpt2.vocab_size], e_old)
    for tid, tok in list(zip(ext.added_ids, ext.added))[::15]:  # FVT: the mean of the pieces' original rows
        pieces = fvt_pieces(gpt2, tok)
        assert len(pieces) >= 2 and gpt2.token_bytes(tok) == b"".join(
            gpt2.token_bytes(gpt2.id_to_token[i]) for i in pieces
        )
        torch.testing.assert_close(e_new[tid], e_old[pieces].mean(0))
        if not tied:
            torch.testing.assert_close(h_new[tid], original.get_output_embeddings().weight[pieces].mean(0))
    ids = gpt2.tokenizer.encode(ENGLISH, add_special_tokens=False).ids
    assert (
        ids == ext.tokenizer.tokenizer.encode(ENGLISH, add_special_tokens=False).ids
    )  # only unchanged tokens
    np.testing.assert_allclose(
        _logits(model, ids)[:, : gpt2.vocab_size], _logits(original, ids), rtol=0, atol=1e-5
    )
    report = json.loads((tmp_path / "out" / "extension_report.json").read_text(encoding="utf-8"))
    assert (
        report["model"]["new_rows"] == n
        and report["model"]["initialised"] == 150
        and report["model"]["tied"] == tied
    )


def test_multivariate_normal_rows_share_mean_and_covariance():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(16, 16, generator=gen) * torch.linspace(0.1, 2.0, 16)  # anisotropic, correlated
    rows = torch.randn(20_000, 16, generator=gen) @ a + 3.0
    sample = mvn_rows(rows, 20_000, torch.Generator().manual_seed(1))
    cov_rows, cov_sample = torch.cov(rows.T), torch.cov(sample.T)
    assert torch.linalg.norm(cov_sample - cov_rows) < 0.1 * torch.linalg.norm(cov_rows)
    assert torch.linalg.norm(sample.mean(0) - rows.mean(0)) < 0.1 * torch.linalg.norm(rows.std(0))
    singular = torch.cat([rows[:5], rows[:5]])  # fewer distinct rows than dimensions: still finite samples
    assert torch.isfinite(mvn_rows(singular, 3)).all()


def test_mvn_init_in_a_model(extended):
    gpt2, ext = extended
    model = _tiny(gpt2.vocab_size, False)
    e_old = model.get_input_embeddings().weight.detach().clone()
    rep = remap_embeddings(model, gpt2, ext.tokenizer, {i: i for i in gpt2.id_to_token}, init="mvn", seed=3)
    e_new = model.get_input_embeddings().weight.detach()
    new = e_new[gpt2.vocab_size :]
    assert rep.initialised == 150 and torch.equal(e_new[: gpt2.vocab_size], e_old)
    assert len({tuple(r.tolist()) for r in new}) == 150  # samples, not one mean row
    assert torch.linalg.norm(new.mean(0) - e_old.mean(0)) < 3 * float(e_old.std()) * 16**0.5 / 150**0.5


def test_wrong_model_is_refused_and_nothing_is_written(extended, tmp_path: Path):
    gpt2, ext = extended
    _tiny(1000, True).save_pretrained(str(tmp_path / "small"), safe_serialization=True)
    with pytest.raises(DataError, match="embedding rows"):
        export_extension(ExtendResult(ext, 150), tmp_path / "out", model=tmp_path / "small")
    assert not (tmp_path / "out").exists()
    with pytest.raises(DataError, match="init"):
        export_extension(ExtendResult(ext, 150), tmp_path / "out", model=tmp_path / "small", init="zeros")


@need_smollm
@pytest.mark.slow
def test_cli_extends_smollm2_gguf_and_keeps_english_logits(tmp_path: Path):
    """`extend --tokenizer SmolLM2.gguf --model SmolLM2.gguf --method continued --n 500` (the tokenizer embedded in
    the GGUF file): AutoModelForCausalLM loads the written model, it has a row per token, and its logits on
    English (only unchanged tokens) are the original's."""
    out = tmp_path / "smol"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["extend", "--tokenizer", str(SMOLLM), "--model", str(SMOLLM),
                   "--method", "continued", "--text", str(FLORES / "devtest" / "est_Latn.devtest"), "--n", "500",
                   "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    rep = json.loads(buf.getvalue())
    assert rep["added"] == 500 and rep["model"]["initialised"] == 500 and rep["model"]["tied"]
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    new_tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert model.get_input_embeddings().weight.shape[0] >= len(new_tok) == 49152 + 500
    assert model.config.vocab_size == 49152 + 500
    original = load_causal_lm(SMOLLM).model
    base = load_shared("smollm2-135m-instruct")
    ids = base.tokenizer.encode(ENGLISH, add_special_tokens=False).ids
    assert new_tok.encode(ENGLISH, add_special_tokens=False) == ids
    after, before = _logits(model, ids), _logits(original, ids)
    assert after.dtype == before.dtype == np.float32
    assert np.abs(after[:, : before.shape[1]] - before).max() < 1e-3

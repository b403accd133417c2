"""The model follows R-BPE (analysis/methods/reuse/model.py): reused rows re-initialised by FVT, size and other rows kept."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from support import SMOLLM, TOKENIZERS, flores_lines, load_shared, need_smollm

from analysis.cli import main
from analysis.errors import DataError
from analysis.methods import reuse
from analysis.methods.reuse import model as reuse_model
from analysis.texts.flores import FLORES_TRAIN_LINES

TRAIN = flores_lines("arb_Arab")[:FLORES_TRAIN_LINES]
ENGLISH = " ".join(flores_lines("eng_Latn")[FLORES_TRAIN_LINES : FLORES_TRAIN_LINES + 2])
ARABIC = flores_lines("arb_Arab")[FLORES_TRAIN_LINES]


@pytest.fixture(scope="module")
def rt() -> reuse.ReuseTokenizer:
    return reuse.build_reuse_tokenizer(load_shared("llama-3.1"), TRAIN)


def _tiny(vocab_size: int, tied: bool) -> transformers.LlamaForCausalLM:
    cfg = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def _logits(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


@pytest.mark.parametrize("tied", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_reused_rows_follow_fvt_and_the_rest_is_untouched(rt, tmp_path: Path, tied: bool):
    tok = rt.old
    src = tmp_path / "src"
    original = _tiny(tok.vocab_size, tied)
    original.save_pretrained(str(src), safe_serialization=True)
    rep = reuse_model.export_model(rt, src, tmp_path / "out")
    assert rep["reinitialised"] == len(rt.reused_ids) > 1000 and rep["tied"] == tied
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "out")).eval()
    assert model.config.vocab_size == original.config.vocab_size == tok.vocab_size  # the size is unchanged
    e_old, e_new = original.get_input_embeddings().weight, model.get_input_embeddings().weight
    h_new = model.get_output_embeddings().weight
    assert (h_new.data_ptr() == e_new.data_ptr()) == tied
    reused = sorted(rt.reused_ids)
    keep = np.setdiff1d(np.arange(tok.vocab_size), reused)
    assert torch.equal(e_new[keep], e_old[keep])
    # each reused row is the mean of the ORIGINAL rows of its new token's pieces under the original tokenizer
    pieces = reuse_model.reused_pieces(rt)
    for o in reused[:: len(reused) // 25]:
        # the pieces spell the new token in the original tokenizer, and none of them is reused
        assert tok.tokenizer.decode(pieces[o]) == rt.new.decode([rt.old_to_new[o]]) and len(pieces[o]) >= 1
        assert not set(pieces[o]) & rt.reused_ids
        torch.testing.assert_close(e_new[o], e_old[pieces[o]].mean(0))
        if not tied:
            h_old = original.get_output_embeddings().weight
            torch.testing.assert_close(h_new[o], h_old[pieces[o]].mean(0))
    # English uses no reused id: the logits of every id that is not reused are the original model's
    ids = rt.encode(ENGLISH)
    assert ids == tok.tokenizer.encode(ENGLISH, add_special_tokens=False).ids and not set(ids) & rt.reused_ids
    before, after = _logits(original, ids), _logits(model, ids)
    np.testing.assert_allclose(after[:, keep], before[:, keep], rtol=0, atol=1e-5)
    assert not np.allclose(after[:, reused], before[:, reused])
    # Arabic now runs through reused ids, whose rows changed
    arabic = rt.encode(ARABIC)
    assert set(arabic) & rt.reused_ids
    # the export holds the R-BPE tokenizer with its id maps, and the model report
    loaded = reuse.ReuseTokenizer.load(tmp_path / "out")
    assert loaded.new_to_old == rt.new_to_old and loaded.decode(arabic) == ARABIC
    report = reuse_model.read_model_report(tmp_path / "out")
    assert len(report["pieces"]) == len(reused) and report["init"] == "fvt"


def test_wrong_model_is_refused(rt, tmp_path: Path):
    small = _tiny(1000, True)
    small.save_pretrained(str(tmp_path / "small"), safe_serialization=True)
    with pytest.raises(DataError, match="embedding rows"):
        reuse_model.export_model(rt, tmp_path / "small", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(DataError, match="not empty"):
        reuse_model.export_model(rt, tmp_path / "small", tmp_path / "busy")


@need_smollm
@pytest.mark.slow
def test_cli_exports_smollm2_gguf(tmp_path: Path):
    """SmolLM2-135M (GGUF): `reuse --model` writes a model transformers loads, same size, English logits kept."""
    out = tmp_path / "rbpe"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["reuse", str(TOKENIZERS / "smollm2-135m-instruct"), "--preserve", "latin", "--no-corpora",
                   "--collateral", "none", "--model", str(SMOLLM), "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    rep = json.loads(buf.getvalue())
    assert rep["model"]["reinitialised"] == rep["reused_tokens"] > 0
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    original = reuse_model.load_causal_lm(SMOLLM).model
    assert model.get_input_embeddings().weight.shape == original.get_input_embeddings().weight.shape
    rt = reuse.ReuseTokenizer.load(out)
    ids = rt.encode(ENGLISH)
    assert not set(ids) & rt.reused_ids
    keep = np.setdiff1d(np.arange(model.config.vocab_size), sorted(rt.reused_ids))
    diff = np.abs(_logits(model, ids)[:, keep] - _logits(original, ids)[:, keep]).max()
    assert diff < 1e-3

"""The padding-rows check: embedding rows no token uses, the largest probability the model gives them on held-out
text, and the masking that `--fix` writes (vllm #13175: padding rows that get sampled)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import TOKENIZERS

from analysis.cli import main
from analysis.evaluate.export_check import check_export
from analysis.texts import flores
from analysis.tokenizer.export import write_folder
from analysis.tokenizer.sources import load

ROWS = 32064  # llama-2's 32,000 tokens padded to a multiple of 64, as Phi-3 pads its vocabulary


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """A tiny random Llama with 64 padding rows past llama-2's vocabulary; its head gives them a large logit."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tok = load(TOKENIZERS / "llama-2")
    folder = write_folder(tok, tmp_path_factory.mktemp("pad") / "export")
    cfg = transformers.LlamaConfig(vocab_size=ROWS, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=False)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.lm_head.weight[32000:] = model.lm_head.weight[32000:] * 50.0  # the padding rows stand out
    model.save_pretrained(str(folder), safe_serialization=True)
    return folder, tok, model


def _padding(rep):
    return next(c for c in rep.checks if c.name == "padding_rows")


def test_padding_rows_report_the_models_largest_probability(padded):
    import torch  # noqa: PLC0415

    folder, tok, model = padded
    c = _padding(check_export(folder, langs=["eng_Latn"], parity=False))
    assert c.data["count"] == ROWS - 32000 and c.data["rows"][0] == 32000
    _, held = flores.split_lines("eng_Latn")
    ids = tok.tokenizer.encode(" ".join(held[:20]), add_special_tokens=True).ids[:128]
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)[:, 32000:].max()
    assert c.data["max_probability"] == pytest.approx(float(p), rel=1e-6)
    assert c.data["max_probability"] > 1e-4 and c.status == "fail" and "--fix masks" in c.detail


def test_fix_masks_the_padding_rows_and_the_check_then_passes(tmp_path, padded, capsys):
    folder, _, _ = padded
    copy = tmp_path / "export"
    copy.mkdir()
    for f in folder.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    rc = main(["export-check", str(copy), "--no-parity", "--langs", "eng_Latn", "--fix", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert next(c for c in doc["checks"] if c["name"] == "padding_rows")["status"] == "fixed"
    gen = json.loads((copy / "generation_config.json").read_text())
    assert gen["suppress_tokens"] == list(range(32000, ROWS))
    c = _padding(check_export(copy, langs=["eng_Latn"], parity=False, probe_model=False))
    assert c.status == "pass" and "all masked" in c.detail
    assert np.all(np.asarray(c.data["rows"]) >= 32000)

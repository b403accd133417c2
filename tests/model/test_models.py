"""analysis.model.models: the one causal-LM loader (safetensors, weights-only .bin, accelerate placement, refusals)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from support import TOKENIZERS  # noqa: E402
from transformers import modeling_gguf_pytorch_utils  # noqa: E402

from analysis.adapt.embeddings import load_model  # noqa: E402
from analysis.errors import ModelLoadError  # noqa: E402
from analysis.methods.undertrained import load_lm  # noqa: E402
from analysis.model.gguf_model import write_gguf_from_hf  # noqa: E402
from analysis.model.models import CausalLM, converted_gguf, load_causal_lm  # noqa: E402
from analysis.model.source import resolve_model  # noqa: E402
from analysis.tokenizer.sources import load  # noqa: E402

IDS = [5, 17, 3, 99, 42, 7]


class Payload:
    """Any class outside the weights-only allow-list: unpickling it would run arbitrary code."""

    def __reduce__(self):
        return (print, ("unpickled!",))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A tiny random Llama saved as safetensors, and its logits on IDS."""
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    folder = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(str(folder), safe_serialization=True)
    return folder, _logits(model, "cpu")


def _logits(model, device: str) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([IDS], device=device)).logits[0].float().cpu().numpy()


def test_loads_safetensors_in_eval_mode(tiny):
    folder, expect = tiny
    lm = load_causal_lm(folder)
    assert isinstance(lm, CausalLM) and lm.source.kind == "safetensors" and lm.device == "cpu"
    assert not lm.model.training and lm.missing_keys == []
    np.testing.assert_array_equal(_logits(lm.model, lm.device), expect)
    # the embeddings' loader is the same loader
    np.testing.assert_array_equal(_logits(load_model(folder), "cpu"), expect)


def test_dtype_and_accelerate_placement(tiny):
    folder, expect = tiny
    half = load_causal_lm(folder, dtype=torch.bfloat16)
    assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
    caps = {"cpu": "1GiB"}
    placed = load_causal_lm(folder, device_map="auto", max_memory=caps)
    assert placed.device == "cpu" and caps == {"cpu": "1GiB"}  # the caller's dict is left as it was
    np.testing.assert_allclose(_logits(placed.model, placed.device), expect, rtol=1e-5, atol=1e-6)
    model, device = load_lm(str(folder), device_map="auto", max_memory={"cpu": "1GiB"})
    assert device == "cpu"


def test_weights_only_pytorch_checkpoint(tiny, tmp_path, capsys):
    folder, expect = tiny
    sd = {k: v.clone() for k, v in load_causal_lm(folder).model.state_dict().items()}
    dst = tmp_path / "bin"
    dst.mkdir()
    (dst / "config.json").write_text((folder / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    torch.save(sd, dst / "pytorch_model.bin")
    lm = load_causal_lm(dst)
    assert lm.source.kind == "pytorch"
    np.testing.assert_array_equal(_logits(lm.model, "cpu"), expect)
    # a pickle that needs more than tensors is refused, never unpickled
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "config.json").write_text((folder / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    with open(evil / "pytorch_model.bin", "wb") as f:
        pickle.dump({"model.embed_tokens.weight": Payload()}, f)
    with pytest.raises(ModelLoadError, match="cannot load the model"):
        load_causal_lm(evil)
    assert "unpickled!" not in capsys.readouterr().out


def test_refuses_what_is_not_a_causal_lm(tiny, tmp_path):
    folder, _ = tiny
    enc = tmp_path / "encoder"
    enc.mkdir()
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    cfg["architectures"] = ["BertModel"]
    (enc / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (enc / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(ModelLoadError, match="not a causal LM"):
        load_causal_lm(enc)
    with pytest.raises(ModelLoadError, match="verification is not possible"):
        load_lm(str(enc), device="cpu")
    bare = tmp_path / "no-config"
    bare.mkdir()
    (bare / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_causal_lm(bare)
    with pytest.raises(ModelLoadError):
        load_causal_lm(tmp_path / "nothing-here")


@pytest.mark.slow
def test_gguf_is_dequantized_once_and_read_back_from_the_cache(tiny_llama2, tmp_path, monkeypatch):
    """A GGUF model is converted by transformers on first use and kept as safetensors in the disk cache: the second
    load reads the cache (transformers' GGUF reader is not called again) and gives exactly the same tensors and
    config as a direct GGUF load; a cap too small for the model loads from the GGUF file every time."""
    folder, _ = tiny_llama2
    gguf_path = tmp_path / "src" / "tiny.gguf"
    gguf_path.parent.mkdir()
    write_gguf_from_hf(folder, load(TOKENIZERS / "llama-2"), gguf_path)
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    src = resolve_model(gguf_path)
    reference = transformers.AutoModelForCausalLM.from_pretrained(str(src.folder), gguf_file=src.gguf_file)

    first = load_causal_lm(gguf_path)
    cached = converted_gguf(src)
    assert cached is not None and (cached / "model.safetensors").is_file()
    assert str(tmp_path / "cache") in str(cached)

    def no_gguf_reader(*a, **k):
        raise AssertionError("the GGUF file was read again")

    monkeypatch.setattr(modeling_gguf_pytorch_utils, "load_gguf_checkpoint", no_gguf_reader)
    second = load_causal_lm(gguf_path)
    assert second.source.kind == "gguf" and second.model is not first.model
    want, got = reference.state_dict(), second.model.state_dict()
    assert set(want) == set(got) and all(torch.equal(want[k], got[k]) for k in want)
    assert second.model.config.vocab_size == reference.config.vocab_size == 32000
    assert second.model.config._name_or_path == str(src.folder)  # never the cache folder
    ids = torch.tensor([IDS])
    with torch.no_grad():
        assert torch.equal(second.model(ids).logits, reference(ids).logits)

    monkeypatch.undo()
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "small-cache"))
    monkeypatch.setenv("TOKLAB_CACHE_MAX_MB", "0.5")  # below the de-quantized model's size
    assert converted_gguf(src) is None
    direct = load_causal_lm(gguf_path)
    assert torch.equal(direct.model.get_input_embeddings().weight, reference.get_input_embeddings().weight)
    assert not (tmp_path / "small-cache" / "gguf-models").exists()

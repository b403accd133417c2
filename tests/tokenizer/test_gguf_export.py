"""The GGUF tokenizer writer: llama.cpp's pre-tokenizer hash on the shared tokenizers, token types, special ids and
flags, and a vocabulary-only file the `gguf` reader reads back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analysis.errors import DataError
from analysis.tokenizer.gguf_export import (
    KNOWN_PRE_HASHES,
    check_hash,
    gguf_bytes_vocab_only,
    gguf_model_kind,
    gguf_vocab,
    identify_pre,
    read_gguf_vocab_meta,
)
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

TOKENIZERS = Path(os.environ.get("TOKLAB_ASSETS", "../shared/assets")) / "tokenizers"


@pytest.fixture(scope="module")
def toks():
    names = ("gpt2", "llama-3.1", "qwen3", "smollm2-135m-instruct", "mistral-7b-v0.3", "bert-base-uncased")
    return {n: load(TOKENIZERS / n) for n in names}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "pre"),
    [("gpt2", "gpt-2"), ("llama-3.1", "llama-bpe"), ("qwen3", "qwen2"), ("smollm2-135m-instruct", "smollm")],
)
def test_the_pre_tokenizer_hash_names_the_shared_tokenizers(toks, name, pre):
    """The hash of llama.cpp's check text is the one its converter lists under that name."""
    h = check_hash(toks[name])
    assert KNOWN_PRE_HASHES.get(h) == pre
    assert identify_pre(toks[name]) == pre


def test_an_edit_changes_the_hash_but_not_the_name_taken_from_the_base(toks):
    """Removing a token the check text uses changes the hash (llama.cpp #8649's failure); naming the pre-tokenizer
    from the original keeps it."""
    from analysis.methods.pruning import prune  # noqa: PLC0415 - a method, only to make an edited tokenizer

    base = toks["gpt2"]
    used = base.tokenizer.encode(" sure").ids
    edited = prune(base, used).tokenizer
    assert check_hash(edited) != check_hash(base) and check_hash(edited) not in KNOWN_PRE_HASHES
    with pytest.raises(DataError, match="not one this app knows"):
        identify_pre(edited)
    assert gguf_vocab(edited, base=base).pre == "gpt-2"


def test_token_types_special_ids_and_flags(toks):
    q = gguf_vocab(toks["qwen3"])
    counts = q.type_counts()
    assert (
        q.model == "gpt2" and counts["control"] > 0 and counts["user-defined"] > 0
    )  # <think> etc. are not special
    assert q.special_ids["eos"] == toks["qwen3"].tokenizer.token_to_id("<|im_end|>") and not q.add_bos
    assert len(q.merges) == len(toks["qwen3"].merges) and q.chat_template
    llama = gguf_vocab(toks["llama-3.1"])
    assert llama.add_bos and llama.special_ids["bos"] == 128000
    m = gguf_vocab(toks["mistral-7b-v0.3"])
    assert m.model == "llama" and m.pre == "default" and m.type_counts()["byte"] == 256 and m.add_space_prefix
    assert m.scores is not None and len(m.scores) == len(m.tokens)
    assert gguf_model_kind(toks["bert-base-uncased"]) == "bert"


def test_rows_past_the_tokenizer_become_unused_pad_tokens(toks):
    v = gguf_vocab(toks["gpt2"], n_rows=50260)
    assert v.tokens[-1] == "[PAD50259]" and v.type_counts()["unused"] == 3
    with pytest.raises(DataError, match="embedding rows"):
        gguf_vocab(toks["gpt2"], n_rows=100)


def test_a_bpe_tokenizer_without_merges_is_not_written_as_gguf(toks):
    """llama.cpp refuses a BPE vocabulary without tokenizer.ggml.merges and gguf-py cannot write an empty array:
    the file written before this check loaded neither in llama.cpp nor back in this app."""
    doc = toks["gpt2"].document()
    doc["model"]["merges"] = []
    doc["model"]["vocab"] = {t: i for t, i in doc["model"]["vocab"].items() if i < 256}
    doc["added_tokens"] = []
    bare = LoadedTokenizer.from_document(doc, name="bytes only")
    with pytest.raises(DataError, match="without merges cannot be written as GGUF"):
        gguf_vocab(bare, pre="gpt-2")


@pytest.mark.slow
def test_vocab_only_file_reads_back(toks, tmp_path):
    v = gguf_vocab(toks["smollm2-135m-instruct"])
    p = tmp_path / "smol.gguf"
    p.write_bytes(gguf_bytes_vocab_only(v, "smol"))
    meta = read_gguf_vocab_meta(p)
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] == "smollm"
    assert meta["tokenizer.ggml.tokens"] == 49152 and meta["tokenizer.ggml.eos_token_id"] == 2
    back = load(p)  # transformers' GGUF reader (the app's loader) reads the file as a tokenizer
    line = "Tere hommikust, kuidas läheb?"
    assert back.tokenizer.encode(line).ids == toks["smollm2-135m-instruct"].tokenizer.encode(line).ids

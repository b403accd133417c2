"""Mutated uploads: every format the loader reads, damaged at random (seeded), gives a TokenizerLoadError or a
working tokenizer — never another exception.

Each seed file is small and real: a byte-level BPE tokenizer.json, a zipped folder with a chat template, a folder of
GPT-2-style vocab.json and merges.txt, a BERT vocab.txt, a tiktoken ranks file (GPT-2's first 600 ranks), a
SentencePiece model trained here and a vocabulary-only GGUF. The damage is
what a bad disk, a cut download or a hand-edited file does: flipped bits, a cut tail, inserted, deleted or copied
runs of bytes, and for JSON, values of the wrong type (a number where a list belongs, NaN, 2^70, nested junk). A
tokenizer that loads is then used the way the pages use it (summary, encode/decode, readable tokens, the chat
template, the exported folder, GGUF metadata). A mutation fuzzer run on these formats found two crashes this test
now guards: `added_tokens` given as a number (TypeError in the load-time checks) and a SentencePiece piece that is
not UTF-8 (protobuf hands it back as bytes: TypeError when the document was written); and one more, a vocab.txt
whose [UNK] line was damaged, which loaded and then ended `compress` in a traceback at the first unseen character
(tests/tokenizer/test_sources.py has each as a fixed case).
"""

from __future__ import annotations

import base64
import copy
import io
import json
import random
import struct
import zipfile
from collections.abc import Callable
from typing import Any

import pytest
from bad_files import tokenizer_doc
from support import TOKENIZERS, flores_lines, load_shared

from analysis import AnalysisError, load_upload
from analysis.errors import DataError, TokenizerLoadError
from analysis.texts.corpora import upload_lines
from analysis.tokenizer.export import folder_files
from analysis.tokenizer.gguf_export import gguf_bytes_vocab_only, gguf_vocab
from analysis.tokenizer.tokenizer import LoadedTokenizer
from analysis.views.chat_template import chat_templates, render_chat

CASES = 60  # mutations per format
TEXTS = ["Hello world", "héllo wörld 日本語 😀", "", " \n\t", "<s>abc</s>"]
WRONG = [None, -1, 0, 2**63, 2**70, 1e308, float("nan"), "", "x", [], {}, [1, 2], {"a": 1}, True, 3.5]
CHAT = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"


def _small_doc() -> dict:
    """A byte-level BPE document with a few merges and a special token."""
    doc = tokenizer_doc()
    vocab = doc["model"]["vocab"]
    for a, b in [("t", "h"), ("th", "e"), ("Ġ", "w"), ("Ġw", "o")]:
        vocab[a + b] = len(vocab)
        doc["model"]["merges"].append([a, b])
    doc["added_tokens"] = [
        {"id": len(vocab), "content": "<s>", "special": True, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False},
    ]  # fmt: skip
    return doc


def _zip(files: dict[str, bytes]) -> bytes:
    """A zip of a tokenizer folder."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _folder_files() -> dict[str, bytes]:
    """tokenizer.json, tokenizer_config.json (with a chat template) and special_tokens_map.json."""
    cfg = {"chat_template": CHAT, "bos_token": "<s>", "model_max_length": 1024,
           "added_tokens_decoder": {"260": {"content": "<s>", "special": True}}}  # fmt: skip
    return {
        "t/tokenizer.json": json.dumps(_small_doc()).encode(),
        "t/tokenizer_config.json": json.dumps(cfg).encode(),
        "t/special_tokens_map.json": json.dumps({"bos_token": "<s>"}).encode(),
    }


def _tiktoken() -> bytes:
    """GPT-2's first 600 ranks as a tiktoken file."""
    gpt2 = load_shared("gpt2")
    ranks = sorted(((gpt2.token_bytes(t), i) for t, i in gpt2.vocab.items()), key=lambda x: x[1])[:600]
    return b"".join(base64.b64encode(b) + b" %d\n" % i for b, i in ranks)


def _gpt2_files() -> dict[str, bytes]:
    """GPT-2's first 600 tokens as vocab.json and the merges among them as merges.txt (no tokenizer.json)."""
    gpt2 = load_shared("gpt2")
    vocab = {t: i for t, i in gpt2.vocab.items() if i < 600}
    merges = [(a, b) for a, b in gpt2.merges if a in vocab and b in vocab and a + b in vocab]
    return {
        "g/vocab.json": json.dumps(vocab).encode(),
        "g/merges.txt": ("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)).encode(),
        "g/config.json": json.dumps({"model_type": "gpt2", "vocab_size": 600}).encode(),
    }


def _damage_one_file(rng: random.Random, files: dict[str, bytes]) -> bytes:
    """Damage the bytes of one file of the folder (a JSON file's values in most cases) and zip it."""
    name = rng.choice(sorted(files))
    damage = _damage_json_bytes if name.endswith(".json") else _damage_bytes
    return _zip({**files, name: damage(rng, files[name])})


def _wordpiece() -> bytes:
    """BERT's first 1,500 vocab.txt lines."""
    lines = (TOKENIZERS / "bert-base-uncased" / "vocab.txt").read_bytes().split(b"\n")
    return b"\n".join(lines[:1500]) + b"\n"


def _sentencepiece() -> bytes:
    """A BPE SentencePiece model with byte fallback, trained on FLORES lines."""
    spm = pytest.importorskip("sentencepiece")
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(flores_lines("eng_Latn", 100) + flores_lines("deu_Latn", 50)),
        model_writer=buf, vocab_size=400, model_type="bpe", byte_fallback=True, minloglevel=2,
    )  # fmt: skip
    return buf.getvalue()


def _gguf() -> bytes:
    """A vocabulary-only GGUF of the small document."""
    tok = LoadedTokenizer.from_document(_small_doc(), name="small")
    return gguf_bytes_vocab_only(gguf_vocab(tok, pre="gpt-2"))


def _damage_bytes(rng: random.Random, data: bytes) -> bytes:
    """Flip bits, cut the tail, insert, delete or copy a run of bytes, or overwrite 8 bytes with an extreme."""
    b = bytearray(data)
    at = rng.randrange(len(b))
    kind = rng.randrange(6)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:
        del b[at:]
    elif kind == 2:
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == 3:
        del b[at : at + rng.randint(1, 64)]
    elif kind == 4:
        b[at : at + 8] = rng.choice([b"\xff" * 8, b"\0" * 8, b"\x7f" + b"\xff" * 7, b"\x80" * 8])
    else:
        src = rng.randrange(len(b))
        b[at:at] = b[src : src + rng.randint(1, 200)]
    return bytes(b)


def _damage_json(rng: random.Random, obj: Any) -> Any:
    """Replace, delete or repeat one value somewhere in a JSON document."""
    if isinstance(obj, (dict, list)) and obj:
        slot = rng.choice(list(obj)) if isinstance(obj, dict) else rng.randrange(len(obj))
        r = rng.random()
        if r < 0.3:
            obj[slot] = copy.deepcopy(rng.choice(WRONG))
        elif r < 0.4:
            del obj[slot]
        elif r < 0.5 and isinstance(obj, list):
            obj.append(copy.deepcopy(obj[slot]))
        else:
            obj[slot] = _damage_json(rng, obj[slot])
        return obj
    return copy.deepcopy(rng.choice(WRONG))


def _damage_json_bytes(rng: random.Random, data: bytes) -> bytes:
    """Damage a JSON file's values (most cases) or its bytes."""
    if rng.random() < 0.3:
        return _damage_bytes(rng, data)
    doc = json.loads(data)
    for _ in range(rng.randint(1, 3)):
        doc = _damage_json(rng, doc)
    return json.dumps(doc).encode()


def _damage_zip(rng: random.Random, files: dict[str, bytes]) -> bytes:
    """Damage one JSON file of the folder (most cases) or the zip's own bytes."""
    if rng.random() < 0.3:
        return _damage_bytes(rng, _zip(files))
    name = rng.choice(sorted(files))
    return _zip({**files, name: _damage_json_bytes(rng, files[name])})


def _use(tok: LoadedTokenizer) -> None:
    """What the pages do with a loaded tokenizer."""
    tok.inspect()
    tok.summary()
    enc = tok.tokenizer
    for text in TEXTS:
        enc.decode(enc.encode(text).ids)
    for token in list(tok.vocab)[:300]:
        tok.readable(token)
        tok.token_bytes(token)
    if chat_templates(tok):
        render_chat(tok, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    folder_files(tok)
    if tok.model_type == "BPE":
        gguf_vocab(tok, pre="gpt-2")


SEEDS: dict[str, tuple[str, Callable[[], Any], Callable[[random.Random, Any], bytes]]] = {
    "tokenizer.json": ("tokenizer.json", lambda: json.dumps(_small_doc()).encode(), _damage_json_bytes),
    "zipped folder": ("folder.zip", _folder_files, _damage_zip),
    "vocab.json + merges.txt": ("gpt2.zip", _gpt2_files, _damage_one_file),
    "WordPiece vocab.txt": ("vocab.txt", _wordpiece, _damage_bytes),
    "tiktoken": ("ranks.tiktoken", _tiktoken, _damage_bytes),
    "SentencePiece": ("tokenizer.model", _sentencepiece, _damage_bytes),
    "GGUF": ("vocab.gguf", _gguf, _damage_bytes),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(SEEDS))
def test_a_damaged_upload_loads_or_says_why(kind):
    filename, make, damage = SEEDS[kind]
    seed = make()
    intact = seed if isinstance(seed, bytes) else _zip(seed)
    _use(load_upload(filename, intact))  # the undamaged file loads and works
    rng = random.Random(f"{kind}-2026")
    outcomes = {"loaded": 0, "refused": 0}
    for case in range(CASES):
        data = damage(rng, seed)
        try:
            tok = load_upload(filename, data)
            _use(tok)
            outcomes["loaded"] += 1
        except AnalysisError as e:
            assert str(e), (kind, case)
            outcomes["refused"] += 1
        except BaseException as e:  # noqa: BLE001 - anything else (a Rust panic included) is the bug
            pytest.fail(f"{kind} case {case}: {type(e).__name__}: {e}")
    assert outcomes["refused"] > 0, outcomes  # the damage reached the loader's checks


def test_a_zip_whose_directory_does_not_fit_the_file_says_so():
    """The end record placing the central directory 1,000 bytes later than it is puts every member's header before
    the file's start: the message said "[Errno 22] Invalid argument"."""
    data = bytearray(_zip({"c/a.txt": b"tere\n", "c/b.txt": b"hommikust\n"}))
    end = data.rindex(b"PK\x05\x06")
    struct.pack_into("<I", data, end + 16, struct.unpack_from("<I", data, end + 16)[0] + 1000)
    with pytest.raises(
        DataError, match=r"c/a.txt is corrupt or truncated \(its header lies outside the zip\)"
    ):
        upload_lines("c.zip", bytes(data))


@pytest.mark.slow
def test_a_gguf_bpe_vocabulary_without_merges_is_refused_with_the_missing_field():
    """Such a file (written elsewhere: this app refuses to write one) was refused as "('scores')"."""
    vocab = gguf_vocab(LoadedTokenizer.from_document(_small_doc(), name="small"), pre="gpt-2")
    vocab.merges = []
    with pytest.raises(TokenizerLoadError, match="it lacks the field 'scores' the converter needs"):
        load_upload("vocab.gguf", gguf_bytes_vocab_only(vocab))

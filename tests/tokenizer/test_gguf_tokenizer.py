"""A GGUF model file as a tokenizer source: the tokenizer embedded in its metadata, read without the weights,
equals the model's own tokenizer; uploads respect the size cap; truncated or garbage files give a clear
TokenizerLoadError (the CLI: `error: ...`, exit 2), never a traceback.

Converting the SmolLM2 vocabulary takes ~20 s on a cold cache, so the tests that convert are marked slow; the
header reader and the damaged-file checks stay in the fast lane."""

from __future__ import annotations

import io
import json
import os
import struct

import pytest
from support import SMOLLM, flores_lines, load_shared, need_smollm

from analysis.cli import main
from analysis.errors import TokenizerLoadError
from analysis.evaluate.preflight import check_chat_template
from analysis.tokenizer.export import write_folder
from analysis.tokenizer.gguf_source import gguf_metadata, gguf_tensor_shapes
from analysis.tokenizer.sources import GGUF_MAGIC, load, load_upload

LANGS = ("eng_Latn", "est_Latn", "zho_Hans", "arb_Arab", "hin_Deva", "kor_Hang", "rus_Cyrl", "tha_Thai",
         "ell_Grek", "heb_Hebr", "jpn_Jpan", "amh_Ethi")  # fmt: skip


def _encodings(tok, lines, specials):
    return [e.ids for e in tok.tokenizer.encode_batch(lines, add_special_tokens=specials)]


def _header(n_kv: int, *kvs: bytes, version: int = 3) -> bytes:
    """A GGUF header with no tensors and the given key/value records."""
    return GGUF_MAGIC + struct.pack("<IQQ", version, 0, n_kv) + b"".join(kvs)


def _kv_string(key: str, value: str) -> bytes:
    k, v = key.encode(), value.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v


# --------------------------------------------------------------------------------------------------
# the embedded tokenizer equals the model's own (slow: the conversion)
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
@need_smollm
def test_gguf_tokenizer_equals_the_models_tokenizer():
    got, ref = load(SMOLLM), load_shared("smollm2-135m-instruct")
    assert got.name == SMOLLM.stem and got.source == str(SMOLLM)
    # the whole document, pre-tokenizer included (llama.cpp's "smollm" pre-tokenizer: digits apart, then GPT-2):
    # equal documents make equal tokenizers, so the encodings below are a check of the comparison itself, on a
    # dozen scripts, not a sweep of every FLORES language (that re-ran the same Rust tokenizer on more data)
    assert json.loads(got.to_json()) == json.loads(ref.to_json())
    for lang in LANGS:
        lines = flores_lines(lang)
        for specials in (True, False):
            assert _encodings(got, lines, specials) == _encodings(ref, lines, specials), lang


@pytest.mark.slow
@need_smollm
def test_gguf_chat_template_travels_into_an_export(tmp_path):
    """The GGUF's `tokenizer.chat_template` is the tokenizer's template: an export of a GGUF model's tokenizer kept
    none (llama.cpp found the template, transformers did not)."""
    with open(SMOLLM, "rb") as fh:
        want = gguf_metadata(fh, {"tokenizer.chat_template"})["tokenizer.chat_template"]
    tok = load(SMOLLM)
    assert want and tok.config["chat_template"] == want
    write_folder(tok, tmp_path / "out")
    assert (tmp_path / "out" / "chat_template.jinja").read_text(encoding="utf-8") == want
    assert check_chat_template(tmp_path / "out").status == "pass"


@pytest.mark.slow
@need_smollm
def test_upload_of_a_gguf_file_within_the_cap(monkeypatch):
    monkeypatch.setenv("TOKLAB_MAX_FILE_MB", "200")
    up = load_upload("model.gguf", SMOLLM.read_bytes())
    assert up.source == "upload:model.gguf" and up.name == "model"
    assert up.to_json() == load(SMOLLM).to_json()


@pytest.mark.slow
@need_smollm
def test_cli_takes_a_gguf_file_as_tokenizer(capsys):
    assert main(["stt", str(SMOLLM), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["vocab_size"] == 49152 and out["tokenizer"] == SMOLLM.stem


# --------------------------------------------------------------------------------------------------
# the header reader (fast: the vocabulary is skipped, never converted)
# --------------------------------------------------------------------------------------------------
@need_smollm
def test_metadata_is_read_from_the_header_only():
    with open(SMOLLM, "rb") as fh:
        meta = gguf_metadata(fh, {"tokenizer.ggml.pre", "tokenizer.ggml.model", "general.architecture"})
        read = fh.tell()
    assert meta == {
        "tokenizer.ggml.pre": "smollm",
        "tokenizer.ggml.model": "gpt2",
        "general.architecture": "llama",
    }
    assert read < SMOLLM.stat().st_size / 20  # the vocabulary arrays are skipped, the tensors never reached
    with open(SMOLLM, "rb") as fh:  # the whole metadata, arrays included, is there
        whole = gguf_metadata(fh, {"tokenizer.ggml.model"}, whole=True)
        assert whole == {"tokenizer.ggml.model": "gpt2"} and fh.tell() > read


def test_header_reader_on_hand_made_headers():
    blob = _header(2, _kv_string("general.name", "toy"), _kv_string("tokenizer.ggml.model", "llama"))
    assert gguf_metadata(io.BytesIO(blob), {"tokenizer.ggml.model"}) == {"tokenizer.ggml.model": "llama"}
    assert gguf_metadata(io.BytesIO(blob), {"tokenizer.ggml.pre"}, whole=True) == {}
    with pytest.raises(TokenizerLoadError, match="not a GGUF"):
        gguf_metadata(io.BytesIO(b"GGML" + b"\x00" * 20), set())
    with pytest.raises(TokenizerLoadError, match="too old"):
        gguf_metadata(io.BytesIO(_header(0, version=1)), set())
    with pytest.raises(TokenizerLoadError, match="ends early"):  # a record cut in its value
        gguf_metadata(io.BytesIO(blob[:-2]), {"tokenizer.ggml.model"}, whole=True)
    key = struct.pack("<Q", 1) + b"k"
    huge_string = _header(1, key + struct.pack("<IQ", 8, 2**64 - 1))
    huge_array = _header(1, key + struct.pack("<IIQ", 9, 6, 2**62))  # 2^62 float32s
    many_strings = _header(1, key + struct.pack("<IIQ", 9, 8, 2**40))
    many_records = _header(2**62)
    for bad in (huge_string, huge_array, many_strings, many_records):  # lengths checked before they are used
        with pytest.raises(TokenizerLoadError, match="ends early"):
            gguf_metadata(io.BytesIO(bad + b"\x00" * 64), {"x"}, whole=True)
    with pytest.raises(TokenizerLoadError, match="unknown GGUF value type 77"):
        gguf_metadata(io.BytesIO(_header(1, key + struct.pack("<I", 77))), {"x"})
    nested = _header(1, key + struct.pack("<IIQ", 9, 9, 1) + struct.pack("<IQ", 9, 1) * 8)
    with pytest.raises(TokenizerLoadError, match="nested"):
        gguf_metadata(io.BytesIO(nested + b"\x00" * 64), {"x"}, whole=True)


# --------------------------------------------------------------------------------------------------
# damaged files and uploads: a TokenizerLoadError naming the file, never a traceback
# --------------------------------------------------------------------------------------------------
def test_garbage_and_truncated_gguf_files_are_load_errors(tmp_path, capsys):
    cases = {
        "junk.gguf": (os.urandom(3000).replace(b"GGUF", b"GGUX"), "junk.gguf: not a GGUF file"),
        "cut.gguf": (_header(2, _kv_string("tokenizer.ggml.model", "gpt2"))[:-3], "cut.gguf: .*ends early"),
        "empty.gguf": (b"", "empty.gguf: .*ends early"),
        "notok.gguf": (_header(1, _kv_string("general.name", "x")), "notok.gguf: .*holds no tokenizer"),
    }
    for name, (blob, message) in cases.items():
        (tmp_path / name).write_bytes(blob)
        with pytest.raises(TokenizerLoadError, match=message):
            load(tmp_path / name)
    # a file without the .gguf suffix is recognised by its magic bytes
    (tmp_path / "model.bin").write_bytes(cases["cut.gguf"][0])
    with pytest.raises(TokenizerLoadError, match="model.bin: .*ends early"):
        load(tmp_path / "model.bin")
    rc = main(["stt", str(tmp_path / "cut.gguf"), "--json"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "cut.gguf" in err and "Traceback" not in err


@need_smollm
def test_smollm_gguf_cut_inside_its_vocabulary(tmp_path):
    with open(SMOLLM, "rb") as fh:
        (tmp_path / "head.gguf").write_bytes(fh.read(500_000))
    with pytest.raises(TokenizerLoadError, match="head.gguf: the GGUF header ends early"):
        load(tmp_path / "head.gguf")


@pytest.mark.slow
@need_smollm
def test_smollm_gguf_cut_inside_its_tensors(tmp_path, capsys):
    data = SMOLLM.read_bytes()
    (tmp_path / "half.gguf").write_bytes(data[: len(data) // 2])  # header whole, tensors cut
    rc = main(["stt", str(tmp_path / "half.gguf"), "--json"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: half.gguf: cannot read the tokenizer stored in the GGUF file")


def test_uploads_cap_and_damaged_uploads(monkeypatch):
    monkeypatch.setenv("TOKLAB_MAX_FILE_MB", "1")
    big = _header(1, _kv_string("tokenizer.ggml.model", "gpt2")) + b"\x00" * (1 << 20)
    with pytest.raises(TokenizerLoadError, match="upload limit .*give its path instead"):
        load_upload("model.gguf", big)
    with pytest.raises(TokenizerLoadError, match="upload limit"):  # recognised by its magic bytes too
        load_upload("weights.bin", big)
    monkeypatch.setenv("TOKLAB_MAX_FILE_MB", "200")
    with pytest.raises(TokenizerLoadError, match="cut.gguf: the GGUF header ends early"):
        load_upload("cut.gguf", big[:40])
    with pytest.raises(TokenizerLoadError, match="not a GGUF file"):
        load_upload("fake.gguf", b"PK\x05\x06" + b"\x00" * 100)
    with pytest.raises(TokenizerLoadError, match="holds no tokenizer"):
        load_upload("empty.gguf", _header(1, _kv_string("name", "x")))


@pytest.mark.slow
@need_smollm
def test_tensor_shapes_are_read_from_the_header_like_gguf_py(tmp_path):
    """`gguf_tensor_shapes` (the model check's embedding-row count) gives every tensor's shape as gguf-py's full
    reader does; a file cut inside its tensor infos is a load error, not a wrong count."""
    gguf = pytest.importorskip("gguf")
    got = gguf_tensor_shapes(SMOLLM)
    want = {t.name: tuple(int(d) for d in t.shape) for t in gguf.GGUFReader(str(SMOLLM)).tensors}
    assert got == want and got["token_embd.weight"] == (576, 49152)
    with open(SMOLLM, "rb") as fh:
        gguf_metadata(fh, frozenset(), whole=True)
        head = fh.tell() + 100  # the metadata and the start of the tensor infos
        fh.seek(0)
        cut = tmp_path / "cut.gguf"
        cut.write_bytes(fh.read(head))
    with pytest.raises(TokenizerLoadError, match="ends early"):
        gguf_tensor_shapes(cut)

"""Builders of hostile and careless inputs for the bad-input suite, generated at test time (nothing large is ever
committed): tokenizer documents, zips with lying or corrupt headers, bombs, deep JSON, safetensors headers.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

from analysis.tokenizer.alphabets import BYTE_TO_CHAR
from analysis.tokenizer.document import bpe_model

ALPHABET = {c: i for i, c in enumerate(BYTE_TO_CHAR.values())}


def tokenizer_doc(vocab: dict[str, int] | None = None, merges: list | None = None, **model: Any) -> dict:
    """A byte-level BPE tokenizer.json document (the 256-character alphabet unless `vocab` is given)."""
    m = bpe_model(dict(ALPHABET) if vocab is None else vocab, merges or [])
    m.update(model)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": m,
    }


def sparse_ids_doc() -> dict:
    """A tiny tokenizer whose one extra token has id 2,000,000,000 (the 396-byte file of the report)."""
    vocab = dict(ALPHABET)
    vocab["ĠĠ"] = 2_000_000_000
    return tokenizer_doc(vocab, [["Ġ", "Ġ"]])


def duplicate_ids_doc() -> dict:
    """Two vocabulary tokens sharing one id."""
    vocab = dict(ALPHABET)
    vocab["ab"] = 5
    return tokenizer_doc(vocab)


def panic_merge_doc() -> dict:
    """A merge whose result is not in the vocabulary: tokenizers 0.23 panics on it ("range end index 2 out of
    range for slice of length 1", a `pyo3_runtime.PanicException`) instead of raising an error."""
    return tokenizer_doc({"a": 0, "b": 1}, [["a", "b"]])


def empty_vocab_doc() -> dict:
    """A BPE model with no tokens at all."""
    return tokenizer_doc({}, [])


def deep_json(depth: int = 100_000) -> bytes:
    """A JSON array nested `depth` deep (Python's parser raises RecursionError on it)."""
    return b"[" * depth + b"]" * depth


def write_folder(folder: Path, doc: dict | bytes, **files: bytes) -> Path:
    """A tokenizer folder holding `doc` as tokenizer.json (and other files)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode("utf-8")
    (folder / "tokenizer.json").write_bytes(data)
    for name, content in files.items():
        (folder / name.replace("__", ".")).write_bytes(content)
    return folder


# --------------------------------------------------------------------------------------------------------- zips
def zip_of(entries: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip holding `entries` (name → bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _headers(data: bytes) -> list[tuple[int, int]]:
    """(local header offset, central directory entry offset) of every member."""
    eocd = data.rfind(b"PK\x05\x06")
    count, cd_size, cd_offset = struct.unpack_from("<HLL", data, eocd + 10)
    out, pos = [], cd_offset
    for _ in range(count):
        assert data[pos : pos + 4] == b"PK\x01\x02"
        n, m, k = struct.unpack_from("<HHH", data, pos + 28)
        (local,) = struct.unpack_from("<L", data, pos + 42)
        out.append((local, pos))
        pos += 46 + n + m + k
    return out


def patch_members(data: bytes, *, flags: int | None = None, method: int | None = None, crc: int | None = None,
                  size: int | None = None) -> bytes:  # fmt: skip
    """Rewrite fields of every member in both its local header and its central directory entry."""
    b = bytearray(data)
    for local, central in _headers(data):
        for _field, fmt, value, lo, co in (
            ("flags", "<H", flags, 6, 8),
            ("method", "<H", method, 8, 10),
            ("crc", "<L", crc, 14, 16),
            ("size", "<L", size, 22, 24),
        ):
            if value is not None:
                struct.pack_into(fmt, b, local + lo, value)
                struct.pack_into(fmt, b, central + co, value)
    return bytes(b)


def bad_crc(data: bytes) -> bytes:
    """Every member's CRC-32 wrong."""
    return patch_members(data, crc=0xDEADBEEF)


def encrypted(data: bytes) -> bytes:
    """Every member flagged as encrypted (zipfile asks for a password)."""
    return patch_members(data, flags=0x1)


def unsupported_method(data: bytes) -> bytes:
    """Every member compressed with method 99 (AES), which zipfile cannot read."""
    return patch_members(data, method=99)


def understated(data: bytes, size: int = 100) -> bytes:
    """Every member's headers claim `size` uncompressed bytes, far less than the member really holds."""
    return patch_members(data, size=size)


def many_entries_zip(n: int) -> bytes:
    """A zip of `n` empty members (its directory alone costs memory in zipfile)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for i in range(n):
            zf.writestr(f"f{i}.txt", b"")
    return buf.getvalue()


def one_line_bomb_zip(path: Path, megabytes: int, name: str = "big.txt") -> Path:
    """A zip whose one member is a single line of `megabytes` MB of letters (deflate: about 1,000:1)."""
    chunk = b"abcdefgh" * (1 << 17)  # 1 MB
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open(name, "w", force_zip64=True) as fh:
            for _ in range(megabytes):
                fh.write(chunk)
    return path


def one_line_bomb_gz(path: Path, megabytes: int) -> Path:
    """A .gz of one line of `megabytes` MB."""
    chunk = b"abcdefgh" * (1 << 17)
    with gzip.open(path, "wb", compresslevel=9) as fh:
        for _ in range(megabytes):
            fh.write(chunk)
    return path


# ------------------------------------------------------------------------------------------------- safetensors
def safetensors(header: dict, data: bytes = b"") -> bytes:
    """A safetensors file from a header dict (written as given, however wrong) and a data section."""
    h = json.dumps(header).encode("utf-8")
    return struct.pack("<Q", len(h)) + h + data


def embeddings_file(rows: int, dim: int, values: float | None = None) -> bytes:
    """A safetensors file with untied F32 input embeddings and LM head (`values` fills both; None = ramp)."""
    import numpy as np  # noqa: PLC0415 - test helper

    if values is None:
        a = np.linspace(-1, 1, rows * dim, dtype=np.float32).reshape(rows, dim)
        a = a + np.arange(rows, dtype=np.float32)[:, None] * 1e-3
    else:
        a = np.full((rows, dim), values, dtype=np.float32)
    raw = a.tobytes()
    n = len(raw)
    header = {
        "model.embed_tokens.weight": {"dtype": "F32", "shape": [rows, dim], "data_offsets": [0, n]},
        "lm_head.weight": {"dtype": "F32", "shape": [rows, dim], "data_offsets": [n, 2 * n]},
    }
    return safetensors(header, raw + raw)

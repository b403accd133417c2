"""The tokenizer embedded in a GGUF model file: its metadata converted to a `tokenizer.json` (cached by path, size
and modification time, or by content for an upload); the weights are never read."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from analysis.core.cache import DiskCache
from analysis.core.inputs import check_not_special, parse_json, path_error
from analysis.errors import AnalysisError, TokenizerLoadError

from .gguf_file import GGUF_MAGIC, read_gguf_header, read_header
from .tokenizer import LoadedTokenizer

#: tokenizer.json text converted from GGUF files, keyed by (path, size, mtime) or by an upload's content
_GGUF_TOKENIZERS = DiskCache("gguf-tokenizer", version=2)

_GPT2_REGEX_BYTE_LEVEL = {
    "type": "ByteLevel",
    "add_prefix_space": False,
    "trim_offsets": True,
    "use_regex": True,
}
#: llama.cpp pre-tokenizer types (`tokenizer.ggml.pre`) that transformers' GGUF converter leaves at plain
#: byte-level splitting, as the Hugging Face pre-tokenizer of the original tokenizer: each digit apart, then
#: GPT-2's split regex (llama.cpp's SMOLLM / STARCODER / REFACT pre-tokenizers: ``\p{N}`` then the GPT-2 regex).
GGUF_PRE_TOKENIZERS: dict[str, dict] = {
    name: {
        "type": "Sequence",
        "pretokenizers": [{"type": "Digits", "individual_digits": True}, _GPT2_REGEX_BYTE_LEVEL],
    }
    for name in ("smollm", "starcoder", "refact")
}


def is_gguf_file(path: Path) -> bool:
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False


def gguf_metadata(
    fh: io.BufferedIOBase, keys: set[str] | frozenset[str], *, whole: bool = False
) -> dict[str, Any]:
    """The scalar and string values of `keys` in a GGUF file's metadata, read from its header only
    (:func:`analysis.tokenizer.gguf_file.read_header`).

    Stops as soon as every key is found, or with `whole` at the end of the metadata (which checks it is all
    there); arrays such as the vocabulary are skipped, never loaded, and tensors are never read. Raises
    TokenizerLoadError for a file that is not GGUF or whose header is cut short.
    """
    stop = None if whole else len(keys)
    return read_header(fh, keys, arrays=False, tensors=False, stop_when_found=stop).values


def gguf_tensor_shapes(path: str | os.PathLike) -> dict[str, tuple[int, ...]]:
    """Each tensor's shape in a GGUF file (GGUF order: the fastest-varying dimension first, so an embedding
    matrix is (width, rows)), read from the header only: no tensor data, no gguf-py (whose reader parses every
    vocabulary string: 2.5 s on SmolLM2). TokenizerLoadError for a file that is not GGUF or is cut short."""
    return {t.name: t.shape for t in read_gguf_header(path).tensors}


def load_gguf(path: str | os.PathLike, *, name: str | None = None, key: str | None = None) -> LoadedTokenizer:
    """The tokenizer embedded in a GGUF model file (converted by transformers' GGUF reader, which reads the
    metadata only; the weights are never loaded), with the pre-tokenizer of :data:`GGUF_PRE_TOKENIZERS` where
    the converter does not know the file's `tokenizer.ggml.pre`. The tokenizer.json is cached by `key` (default:
    path, size and modification time)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        raise TokenizerLoadError(path_error(path, e)) from e
    key = key or hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    name = name or path.stem
    config = _gguf_tokenizer_config(path)
    cached = _GGUF_TOKENIZERS.get(key)
    if isinstance(cached, str):
        try:
            return LoadedTokenizer.from_json_text(cached, name=name, source=str(path), config=config)
        except AnalysisError:  # a stale or damaged entry is rebuilt
            pass
    text = _convert_gguf(path)
    tok = LoadedTokenizer.from_json_text(text, name=name, source=str(path), config=config)
    _GGUF_TOKENIZERS.put(key, text)
    return tok


def _gguf_tokenizer_config(path: Path) -> dict[str, Any]:
    """What a GGUF file says that tokenizer_config.json would: its chat template (`tokenizer.chat_template`), so
    that an export of a GGUF model's tokenizer keeps it (a template in the GGUF and none in the Hugging Face folder
    is one reader finding it and another not)."""
    check_not_special(path, TokenizerLoadError)
    try:
        with open(path, "rb") as fh:
            meta = gguf_metadata(fh, {"tokenizer.chat_template"})
    except OSError as e:
        raise TokenizerLoadError(path_error(path, e)) from e
    except TokenizerLoadError as e:
        raise TokenizerLoadError(f"{path.name}: {e}") from e
    template = meta.get("tokenizer.chat_template")
    return {"chat_template": template} if isinstance(template, str) and template else {}


def _convert_gguf(path: Path) -> str:
    check_not_special(path, TokenizerLoadError)
    try:
        with open(path, "rb") as fh:
            meta = gguf_metadata(fh, {"tokenizer.ggml.model", "tokenizer.ggml.pre"}, whole=True)
    except OSError as e:
        raise TokenizerLoadError(path_error(path, e)) from e
    except TokenizerLoadError as e:
        raise TokenizerLoadError(f"{path.name}: {e}") from e
    if "tokenizer.ggml.model" not in meta:
        raise TokenizerLoadError(f"{path.name}: the GGUF file holds no tokenizer (no tokenizer.ggml.model)")
    try:
        from transformers import AutoTokenizer  # noqa: PLC0415 - heavy, loaded on use

        at = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        doc = parse_json(at.backend_tokenizer.to_str(), f"{path.name} (converted)", TokenizerLoadError)
    except AnalysisError:
        raise
    except Exception as e:  # noqa: BLE001 - the converter's own errors, reported as a load error
        why = f"it lacks the field {e} the converter needs" if isinstance(e, KeyError) else str(e)
        raise TokenizerLoadError(
            f"{path.name}: cannot read the tokenizer stored in the GGUF file ({why})"
        ) from e
    pre = GGUF_PRE_TOKENIZERS.get(str(meta.get("tokenizer.ggml.pre", "")))
    if (
        pre is not None
        and meta.get("tokenizer.ggml.model") == "gpt2"
        and doc.get("pre_tokenizer") == {**_GPT2_REGEX_BYTE_LEVEL}
    ):
        doc["pre_tokenizer"] = pre
    return json.dumps(doc, ensure_ascii=False)


def load_gguf_bytes(filename: str, data: bytes, *, name: str | None = None) -> LoadedTokenizer:
    """:func:`load_gguf` for an uploaded GGUF file (size-checked by the caller), cached by its content."""
    base = PurePosixPath(filename.replace("\\", "/")).name or "model.gguf"
    if not base.lower().endswith(".gguf"):
        base += ".gguf"
    key = "upload-" + hashlib.sha256(data).hexdigest()[:24]
    with tempfile.TemporaryDirectory(prefix="toklab-gguf-") as tmp:
        path = Path(tmp) / base
        path.write_bytes(data)
        tok = load_gguf(path, name=name or path.stem, key=key)
        return tok.with_source(name=name or path.stem, source=f"upload:{base}")

"""Load a tokenizer from anywhere: a hub id (with revision/token), a local folder or file, or an upload.

Why one file (about 900 lines): every way a tokenizer arrives (hub, folder, file, zip, upload) goes through
the same size caps and the same converters (SentencePiece, tiktoken, slow-tokenizer files, GGUF metadata), so
the refusals a user sees are the same whatever the source.

Every loader returns a :class:`~analysis.tokenizer.tokenizer.LoadedTokenizer` or raises
:class:`~analysis.errors.TokenizerLoadError` with a message a user can act on.
Supported inputs: `tokenizer.json`, a folder (or zipped folder) holding one, a SentencePiece `.model`
(converted to a fast tokenizer), a tiktoken ranks file (converted to byte-level BPE with a split regex),
slow-tokenizer files (`vocab.json` + `merges.txt`, `vocab.txt`) and a GGUF model file (the tokenizer embedded
in its metadata; the weights are never read).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from analysis.core.cache import DiskCache
from analysis.core.inputs import (
    check_not_special,
    check_size,
    copy_member,
    decode_utf8,
    human_size,
    open_zip,
    parse_json,
    path_error,
    read_file,
)
from analysis.core.paths import max_file_bytes, max_unzipped_bytes
from analysis.errors import AnalysisError, TokenizerLoadError

from .gguf_file import GGUF_MAGIC, read_gguf_header, read_header
from .tokenizer import BYTE_TO_CHAR, SPIECE_UNDERLINE, LoadedTokenizer, added_token_entry, bpe_model

# Size caps (one for every way a file arrives): analysis.core.paths.max_file_bytes / max_unzipped_bytes.

#: Most entries accepted in a zipped tokenizer folder.
MAX_ZIP_ENTRIES = 1000

#: The only files fetched from the hub: tokenizer files, never weights.
HUB_TOKENIZER_PATTERNS = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "*.tiktoken",
    "chat_template.jinja",
]

#: Split regexes of the common tiktoken encodings (used when converting a ranks file).
TIKTOKEN_PATTERNS: dict[str, str] = {
    "cl100k_base / Llama-3": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "Qwen (qwen.tiktoken)": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "o200k_base": (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "r50k / GPT-2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}


def guess_tiktoken_pattern(n_ranks: int) -> str:
    """Pick a split regex name for a ranks file from its size (the UI lets the user override it)."""
    if n_ranks >= 190_000:
        return "o200k_base"
    if 150_000 <= n_ranks < 152_000:
        return "Qwen (qwen.tiktoken)"
    if n_ranks <= 60_000:
        return "r50k / GPT-2"
    return "cl100k_base / Llama-3"


# --------------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------------
def load(
    source: str | os.PathLike,
    *,
    revision: str | None = None,
    token: str | None = None,
    name: str | None = None,
) -> LoadedTokenizer:
    """Load from a local folder, a local file, or (if no such path exists) a Hugging Face hub id."""
    p = check_not_special(os.path.expanduser(str(source)), TokenizerLoadError)
    try:
        is_dir, is_file = p.is_dir(), p.is_file()
    except OSError as e:  # a path too long for the file system, a permission problem on a parent …
        raise TokenizerLoadError(path_error(p, e)) from e
    if is_dir:
        return load_folder(p, name=name)
    if is_file and _is_gguf_file(p):
        return load_gguf(p, name=name)
    if is_file:
        return load_file(p, name=name)
    s = str(source).strip()
    if not s:
        raise TokenizerLoadError("no tokenizer given: enter a hub id, a folder or a file path")
    if s.startswith(("/", ".", "~")) or os.sep in s.strip("/").replace("/", "", 1) or s.count("/") > 1:
        raise TokenizerLoadError(f"no such file or folder: {s}")
    return load_hub(s, revision=revision, token=token, name=name)


def load_folder(folder: str | os.PathLike, *, name: str | None = None) -> LoadedTokenizer:
    """Load a tokenizer folder: tokenizer.json first, then a SentencePiece model, tiktoken or slow files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TokenizerLoadError(f"not a folder: {folder}")
    name = name or folder.name
    config = _config_of(folder)
    if (folder / "tokenizer.json").is_file():
        return load_tokenizer_json(folder / "tokenizer.json", name=name, config=config, source=str(folder))
    for sp in ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model"):
        if (folder / sp).is_file():
            doc = sentencepiece_to_document(_read(folder / sp))
            return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    tik = sorted(q for q in folder.glob("*.tiktoken") if q.is_file())
    if tik:
        doc = tiktoken_to_document(_read(tik[0]))
        return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        doc = gpt2_files_to_document(_read(folder / "vocab.json"), _read(folder / "merges.txt"))
        return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    if (folder / "vocab.txt").is_file():
        lower = bool(config.get("do_lower_case", True))
        doc = wordpiece_vocab_to_document(_read(folder / "vocab.txt"), lowercase=lower)
        return LoadedTokenizer.from_document(doc, name=name, source=str(folder), config=config)
    raise TokenizerLoadError(
        f"{folder} holds no tokenizer files (looked for tokenizer.json, tokenizer.model, *.tiktoken, "
        "vocab.json + merges.txt, vocab.txt)"
    )


def load_tokenizer_json(
    path: str | os.PathLike, *, name: str | None = None, config: dict | None = None, source: str = ""
) -> LoadedTokenizer:
    """Load one tokenizer.json file."""
    path = Path(path)
    text = _read(path)
    if config is None:
        config = _config_of(path.parent)
    return LoadedTokenizer.from_json_text(
        text, name=name or path.parent.name or path.stem, source=source or str(path), config=config
    )


def load_file(path: str | os.PathLike, *, name: str | None = None) -> LoadedTokenizer:
    """Load a single local file of any supported kind (by name and content)."""
    path = Path(path)
    if _is_gguf_file(path):
        return load_gguf(path, name=name)
    if path.suffix == ".json" and path.name.lower() not in _PARTIAL_JSON:
        return load_tokenizer_json(
            path, name=name or (path.parent.name if path.name == "tokenizer.json" else path.stem)
        )
    return load_upload(path.name, _read(path), name=name)


def load_upload(
    filename: str, data: bytes, *, name: str | None = None, tiktoken_pattern: str | None = None
) -> LoadedTokenizer:
    """Load an uploaded file: tokenizer.json, a zipped folder, a SentencePiece .model, a tiktoken file or a
    GGUF model file (its embedded tokenizer; the upload must stay within :func:`analysis.core.paths.max_file_bytes`)."""
    if (filename.lower().endswith(".gguf") or data[:4] == GGUF_MAGIC) and len(data) > max_file_bytes():
        raise TokenizerLoadError(
            f"{PurePosixPath(filename).name} is {human_size(len(data))}, over the {human_size(max_file_bytes())} "
            "upload limit (TOKLAB_MAX_FILE_MB). A GGUF file holds the model's weights: give its path instead "
            "(the command line, or the path field when the operator allows server paths), where only the "
            "tokenizer metadata at its start is read"
        )
    check_size(filename, len(data), TokenizerLoadError)
    if not data:
        raise TokenizerLoadError(f"{filename} is empty")
    base = PurePosixPath(filename.replace("\\", "/")).name
    stem = base.rsplit(".", 1)[0] if "." in base else base
    name = name or stem
    lower = base.lower()
    if lower.endswith(".gguf") or data[:4] == GGUF_MAGIC:
        return load_gguf_bytes(base, data, name=name)
    if lower.endswith(".zip") or data[:4] == b"PK\x03\x04":
        with tempfile.TemporaryDirectory(prefix="toklab-zip-") as tmp:
            root = safe_extract_zip(data, Path(tmp))
            tok = load_folder(root, name=name)
            # the temporary folder disappears: record the upload as the source
            return tok.with_source(name=name, source=f"upload:{base}")
    if lower.endswith(".json"):
        if lower in _PARTIAL_JSON and not _has_model_section(data):
            raise TokenizerLoadError(
                f"{base} alone does not define a tokenizer: give tokenizer.json or the whole tokenizer "
                "folder (as a zip when uploading)"
            )
        return LoadedTokenizer.from_json_text(data, name=name, source=f"upload:{base}")
    if lower.endswith(".model") or data[:2] == b"\n\x0e" or _looks_like_sentencepiece(data):
        doc = sentencepiece_to_document(data)
        return LoadedTokenizer.from_document(doc, name=name, source=f"upload:{base}")
    if lower.endswith("vocab.txt") and not _looks_like_tiktoken(data):  # a BERT-style WordPiece vocabulary
        lines = decode_utf8(data, base, TokenizerLoadError).splitlines()
        words = [t for t in lines if t and not t.startswith("[")]
        cased = sum(any(c.isupper() for c in t) for t in words) > 0.01 * max(1, len(words))
        doc = wordpiece_vocab_to_document(data, lowercase=not cased)
        return LoadedTokenizer.from_document(doc, name=name, source=f"upload:{base}")
    if lower.endswith((".tiktoken", ".bpe", ".txt")) or _looks_like_tiktoken(data):
        doc = tiktoken_to_document(data, pattern=tiktoken_pattern)
        return LoadedTokenizer.from_document(doc, name=name, source=f"upload:{base}")
    raise TokenizerLoadError(
        f"unsupported file {base!r}: upload tokenizer.json, a .zip of a tokenizer folder, "
        "a SentencePiece .model, a tiktoken ranks file or a .gguf model file"
    )


def _has_model_section(data: bytes) -> bool:
    try:
        doc = parse_json(data, "file", TokenizerLoadError)
    except TokenizerLoadError:
        return False
    return isinstance(doc, dict) and isinstance(doc.get("model"), dict)


#: JSON files of a tokenizer folder that do not define a tokenizer on their own
_PARTIAL_JSON = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "config.json",
)


# --------------------------------------------------------------------------------------------------
# GGUF: the tokenizer embedded in a model file
# --------------------------------------------------------------------------------------------------
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


def _is_gguf_file(path: Path) -> bool:
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


# --------------------------------------------------------------------------------------------------
# Hub
# --------------------------------------------------------------------------------------------------
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


def load_hub(
    repo_id: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    name: str | None = None,
    cache_dir: str | None = None,
) -> LoadedTokenizer:
    """Download only the tokenizer files of a hub repo (or use the local HF cache offline) and load them."""
    repo_id = repo_id.strip()
    if not _HUB_ID.match(repo_id):
        raise TokenizerLoadError(f"{repo_id!r} is neither an existing path nor a valid hub id (owner/name)")
    try:
        from huggingface_hub import errors as hf_errors  # noqa: PLC0415 - heavy, loaded on use
        from huggingface_hub import snapshot_download  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover - huggingface_hub is a dependency of transformers
        raise TokenizerLoadError("huggingface_hub is not installed") from e
    label = f"{repo_id}@{revision}" if revision else repo_id
    # huggingface_hub reads HF_HUB_OFFLINE / HF_HUB_CACHE once, at import: read them at call time instead
    offline = hub_offline()
    cache_dir = str(cache_dir) if cache_dir else hub_cache_dir()
    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            token=token or None,
            cache_dir=cache_dir,
            allow_patterns=HUB_TOKENIZER_PATTERNS,
            local_files_only=offline,
        )
    except hf_errors.GatedRepoError as e:
        if token:
            raise TokenizerLoadError(
                f"{label} is gated and this access token has no access: accept its license on the hub"
            ) from e
        raise TokenizerLoadError(
            f"{label} is gated: accept its license on the hub and give an access token"
        ) from e
    except hf_errors.RevisionNotFoundError as e:
        raise TokenizerLoadError(f"{label}: revision {revision!r} does not exist") from e
    except hf_errors.RepositoryNotFoundError as e:
        raise TokenizerLoadError(
            f"{label}: no such repository on the hub (or it is private: give an access token)"
        ) from e
    except hf_errors.LocalEntryNotFoundError as e:
        if offline:
            raise TokenizerLoadError(
                f"{label}: not in the local Hugging Face cache ({cache_dir}) and offline mode is on "
                "(HF_HUB_OFFLINE=1); load a local folder or upload the files instead"
            ) from e
        raise TokenizerLoadError(
            f"{label}: not in the local Hugging Face cache and the hub cannot be reached "
            "(offline or no network); load a local folder or upload the files instead"
        ) from e
    except hf_errors.HfHubHTTPError as e:
        raise TokenizerLoadError(f"{label}: the hub answered with an error: {e}") from e
    except (OSError, ValueError) as e:
        raise TokenizerLoadError(f"{label}: could not download ({e.__class__.__name__}: {e})") from e
    tok = load_folder(folder, name=name or label)
    return tok.with_source(source=f"hub:{label}")


def _env_flag(name: str) -> bool | None:
    v = os.environ.get(name)
    if v is None:
        return None
    return v.strip().upper() in ("1", "ON", "YES", "TRUE")


def hub_offline() -> bool:
    """Whether hub access is switched off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, read now)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        flag = _env_flag(var)
        if flag:
            return True
    if _env_flag("HF_HUB_OFFLINE") is False:
        return False
    try:
        from huggingface_hub import constants  # noqa: PLC0415 - heavy, loaded on use
    except ImportError:  # pragma: no cover
        return False
    return bool(constants.HF_HUB_OFFLINE)


def hub_cache_dir() -> str:
    """The Hugging Face hub cache folder (HF_HUB_CACHE, else HF_HOME/hub, else the library default), read now."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    from huggingface_hub import constants  # noqa: PLC0415 - heavy, loaded on use

    return constants.HF_HUB_CACHE


# --------------------------------------------------------------------------------------------------
# Zip uploads
# --------------------------------------------------------------------------------------------------
def safe_extract_zip(data: bytes, dest: Path, max_total: int | None = None) -> Path:
    """Extract a zipped tokenizer folder, refusing absolute/`..` paths, links, corrupt members and zip bombs.

    Sizes are counted on the bytes actually decompressed (headers can lie), against `max_total` (default
    :func:`analysis.core.paths.max_unzipped_bytes`). Returns the folder inside `dest` that holds the tokenizer files.
    """
    max_total = max_unzipped_bytes() if max_total is None else max_total
    zf = open_zip(io.BytesIO(data), "the zip", MAX_ZIP_ENTRIES, TokenizerLoadError)
    infos = zf.infolist()
    with zf:
        if len(infos) > MAX_ZIP_ENTRIES:
            raise TokenizerLoadError(
                f"zip holds {len(infos)} entries, more than the {MAX_ZIP_ENTRIES} a tokenizer folder needs: refused"
            )
        claimed = 0
        for info in infos:
            n = info.filename.replace("\\", "/")
            parts = PurePosixPath(n).parts
            if n.startswith("/") or re.match(r"^[A-Za-z]:", n) or ".." in parts or "\x00" in n:
                raise TokenizerLoadError(f"zip entry {info.filename!r} has an absolute or '..' path: refused")
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise TokenizerLoadError(f"zip entry {info.filename!r} is a symbolic link: refused")
            claimed += info.file_size
            if claimed > max_total:
                raise TokenizerLoadError(f"zip expands to more than {human_size(max_total)}: refused")
        dest = dest.resolve()
        left = max_total
        for info in infos:
            target = (dest / info.filename).resolve()
            if not target.is_relative_to(dest):
                raise TokenizerLoadError(f"zip entry {info.filename!r} escapes the folder: refused")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    left -= copy_member(zf, info, out, left, TokenizerLoadError)
            except OSError as e:
                raise TokenizerLoadError(f"cannot extract {info.filename!r}: {e.strerror or e}") from e
    markers = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt")
    candidates = sorted(
        {p.parent for m in markers for p in dest.rglob(m) if "__MACOSX" not in p.parts},
        key=lambda p: len(p.parts),
    )
    candidates += sorted({p.parent for p in dest.rglob("*.tiktoken")}, key=lambda p: len(p.parts))
    if not candidates:
        raise TokenizerLoadError("the zip holds no tokenizer files (tokenizer.json, tokenizer.model, …)")
    return candidates[0]


# --------------------------------------------------------------------------------------------------
# Converters
# --------------------------------------------------------------------------------------------------
def _looks_like_sentencepiece(data: bytes) -> bool:
    return data[:1] == b"\n" and b"\x00" in data[:4096] and not data[:1].isalpha()


def _looks_like_tiktoken(data: bytes) -> bool:
    head = [line.strip() for line in data[:2000].split(b"\n")[:5] if line.strip()]
    return bool(head) and all(re.fullmatch(rb"[A-Za-z0-9+/=]+ \d+", line) for line in head)


def sentencepiece_to_document(model_bytes: bytes) -> dict:
    """Convert a SentencePiece model (BPE or Unigram) to a tokenizer.json document.

    Both: SentencePiece's normalizer (precompiled character map, extra-whitespace removal, dummy `▁`
    prefix, spaces → `▁`) and no pre-tokenizer, so ids equal `SentencePieceProcessor.encode`.
    BPE: merges are every split of each piece into two pieces of the vocabulary, ordered by the merged
    piece's score (SentencePiece applies the highest-scoring merge first); a BOS post-processor as in
    Llama's tokenizer.json when the model defines a BOS piece. Unigram: pieces with their scores.
    """
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover
        raise TokenizerLoadError("the sentencepiece package is needed to read .model files") from e
    m = pb.ModelProto()
    try:
        m.ParseFromString(model_bytes)
    except Exception as e:  # protobuf DecodeError
        raise TokenizerLoadError(f"not a SentencePiece model ({e})") from e
    if not m.pieces:
        raise TokenizerLoadError("not a SentencePiece model (no pieces)")
    NORMAL, UNKNOWN, CONTROL, USER, _UNUSED, BYTE = 1, 2, 3, 4, 5, 6
    model_type = m.trainer_spec.model_type  # 1 unigram, 2 bpe, 3 word, 4 char
    pieces = [(p.piece, p.score, p.type) for p in m.pieces]
    bad = next((i for i, (p, _, _) in enumerate(pieces) if not isinstance(p, str)), None)
    if bad is not None:  # protobuf hands a proto2 string field that is not UTF-8 back as bytes
        raise TokenizerLoadError(
            f"not a valid SentencePiece model (piece #{bad} is not UTF-8 text: {pieces[bad][0][:40]!r})"
        )
    byte_fallback = any(t == BYTE for _, _, t in pieces) or bool(m.trainer_spec.byte_fallback)
    unk_id = next((i for i, (_, _, t) in enumerate(pieces) if t == UNKNOWN), None)
    unk = pieces[unk_id][0] if unk_id is not None else None
    add_prefix = (
        m.normalizer_spec.add_dummy_prefix if m.normalizer_spec.HasField("add_dummy_prefix") else True
    )
    charsmap = bytes(m.normalizer_spec.precompiled_charsmap)

    # normalizer: SentencePiece's own order — character map, whitespace clean-up, dummy prefix, ' ' → '▁'
    norms: list[dict] = []
    if charsmap:
        norms.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()})
    if m.normalizer_spec.remove_extra_whitespaces:  # proto default True; only U+0020 counts as whitespace
        norms.append({"type": "Replace", "pattern": {"Regex": r"\A +| +\z"}, "content": ""})
        norms.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    if add_prefix:
        norms.append({"type": "Prepend", "prepend": SPIECE_UNDERLINE})
    norms.append({"type": "Replace", "pattern": {"String": " "}, "content": SPIECE_UNDERLINE})
    added = []
    for i, (piece, _, t) in enumerate(pieces):
        if t in (UNKNOWN, CONTROL, USER):
            added.append(added_token_entry(i, piece, special=t != USER, normalized=t == USER))
    decoders: list[dict] = [
        {"type": "Replace", "pattern": {"String": SPIECE_UNDERLINE}, "content": " "},
    ]
    if byte_fallback:
        decoders.append({"type": "ByteFallback"})
    decoders.append({"type": "Fuse"})
    if add_prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})

    if model_type == 2:  # BPE
        vocab = {p: i for i, (p, _, _) in enumerate(pieces)}
        scored = [(p, s) for p, s, t in pieces if t in (NORMAL, USER)]
        merges = _sentencepiece_merges(vocab, scored)
        model = {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": byte_fallback,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(x) for x in merges],
        }
        pre = None
    elif model_type == 1:  # Unigram
        model = {
            "type": "Unigram",
            "unk_id": unk_id,
            "vocab": [[p, float(s)] for p, s, _ in pieces],
            "byte_fallback": byte_fallback,
        }
        # no pre-tokenizer: SentencePiece runs Viterbi over the whole normalized sentence (pieces never
        # hold an inner '▁', so this equals splitting at each '▁'); a Metaspace pre-tokenizer would not
        # add the dummy prefix before a leading space as SentencePiece does
        pre = None
    else:
        raise TokenizerLoadError(
            "this SentencePiece model is of the WORD or CHAR type, which fast tokenizers do not support"
        )
    post = None
    bos_id = m.trainer_spec.bos_id
    if model_type == 2 and 0 <= bos_id < len(pieces) and pieces[bos_id][2] == CONTROL:
        bos = pieces[bos_id][0]
        post = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": bos, "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
        }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": norms} if norms else None,
        "pre_tokenizer": pre,
        "post_processor": post,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": model,
    }


def _sentencepiece_merges(vocab: dict[str, int], scored: list[tuple[str, float]]) -> list[tuple[str, str]]:
    """Every (left, right) split of each piece into two vocabulary pieces, best-scored piece first."""
    cands: list[tuple[float, int, int, int, str, str]] = []
    for piece, score in scored:
        pid = vocab[piece]
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                cands.append((-score, pid, vocab[left], vocab[right], left, right))
    cands.sort()
    return [(left, right) for *_, left, right in cands]


def tiktoken_to_document(
    data: bytes,
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
    merges: str = "all",
) -> dict:
    """Convert a tiktoken ranks file (`base64 rank` lines) to a byte-level BPE tokenizer.json document.

    tiktoken merges, at each step, the adjacent pair whose concatenation has the lowest rank. With
    `merges="all"` (the default) every split of a token into two vocabulary tokens becomes a merge,
    ranked by the token's own rank: HF BPE then makes exactly tiktoken's choices. `merges="canonical"`
    keeps one merge per token (the last one tiktoken's own merging of its bytes makes), the smaller
    list some published ports use (Qwen's tokenizer.json). `ignore_merges` is on because tiktoken
    returns a whole pre-token that is in the vocabulary without merging.
    """
    if merges not in ("all", "canonical"):
        raise ValueError(f"merges must be 'all' or 'canonical', not {merges!r}")
    ranks: dict[bytes, int] = {}
    lineno = 0
    try:
        for lineno, line in enumerate(data.decode("ascii").splitlines(), 1):  # noqa: B007
            line = line.strip()
            if not line:
                continue
            b64, _, r = line.partition(" ")
            ranks[base64.b64decode(b64, validate=True)] = int(r)
    except (UnicodeDecodeError, ValueError) as e:
        raise TokenizerLoadError(f"not a tiktoken ranks file (line {lineno}: {e})") from e
    if len(ranks) < 256:
        raise TokenizerLoadError("not a tiktoken ranks file: fewer than 256 ranks")
    pat_name = pattern if pattern in TIKTOKEN_PATTERNS else None
    regex = (
        TIKTOKEN_PATTERNS[pat_name or guess_tiktoken_pattern(len(ranks))]
        if not pattern or pat_name
        else pattern
    )

    strs = {b: b.decode("latin-1").translate(_LATIN1_TO_BYTE_LEVEL) for b in ranks}
    vocab = {strs[b]: r for b, r in ranks.items()}
    merge_list: list[tuple[int, int, int, str, str]] = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        if merges == "all":
            for k in range(1, len(tok)):
                left, right = tok[:k], tok[k:]
                rl, rr = ranks.get(left), ranks.get(right)
                if rl is not None and rr is not None:
                    merge_list.append((rank, rl, rr, strs[left], strs[right]))
        else:
            parts = _bpe_parts(ranks, tok, max_rank=rank)
            if len(parts) != 2:
                continue  # unreachable in tiktoken as well; no merge produces it
            merge_list.append((rank, ranks[parts[0]], ranks[parts[1]], strs[parts[0]], strs[parts[1]]))
    merge_list.sort()
    added = [added_token_entry(i, c) for c, i in sorted((special_tokens or {}).items(), key=lambda kv: kv[1])]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": bpe_model(vocab, [[a, b] for *_, a, b in merge_list], ignore_merges=True),
    }


#: latin-1 character of each byte value → GPT-2's printable byte-level character (for str.translate)
_LATIN1_TO_BYTE_LEVEL = {b: c for b, c in BYTE_TO_CHAR.items()}


def _bpe_parts(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """tiktoken's byte-pair merging of `token`, applying only merges whose result ranks below `max_rank`."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while True:
        best, best_i = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best):
                best, best_i = r, i
        if best is None:
            return parts
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]


def gpt2_files_to_document(vocab_json: bytes, merges_txt: bytes) -> dict:
    """Build a GPT-2-style byte-level BPE document from slow-tokenizer `vocab.json` and `merges.txt`."""
    vocab = parse_json(vocab_json, "vocab.json", TokenizerLoadError)
    if not isinstance(vocab, dict):
        raise TokenizerLoadError("vocab.json must map each token to its id")
    merges = []
    for line in decode_utf8(merges_txt, "merges.txt", TokenizerLoadError).splitlines():
        if not line or line.startswith("#version"):
            continue
        a, sep, b = line.partition(" ")
        if sep:
            merges.append([a, b])
    specials = [t for t in ("<|endoftext|>",) if t in vocab]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token_entry(vocab[t], t, normalized=True) for t in specials],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": False,
            "use_regex": True,
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def wordpiece_vocab_to_document(vocab_txt: bytes, *, lowercase: bool = True) -> dict:
    """Build a BERT-style WordPiece document from a slow-tokenizer `vocab.txt`."""
    vocab = {}
    for line in decode_utf8(vocab_txt, "vocab.txt", TokenizerLoadError).splitlines():
        tok = line.rstrip("\n")
        if tok and tok not in vocab:
            vocab[tok] = len(vocab)
    if not vocab:
        raise TokenizerLoadError("vocab.txt is empty: a WordPiece vocabulary lists one token per line")
    specials = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in vocab]
    pp = None
    if "[CLS]" in vocab and "[SEP]" in vocab:
        pp = {"type": "BertProcessing", "sep": ["[SEP]", vocab["[SEP]"]], "cls": ["[CLS]", vocab["[CLS]"]]}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token_entry(vocab[t], t) for t in specials],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": lowercase,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": pp,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": vocab,
        },
    }


# --------------------------------------------------------------------------------------------------
def _read(path: Path) -> bytes:
    """A tokenizer file's bytes under the one size cap (TokenizerLoadError when unreadable or too large)."""
    return read_file(path, TokenizerLoadError)


def _read_json_if(path: Path) -> dict[str, Any]:
    """An optional JSON side file (tokenizer_config.json): {} when missing or corrupt; too large is an error."""
    if not path.is_file():
        return {}
    data = _read(path)
    try:
        doc = parse_json(data, path.name, TokenizerLoadError)
    except AnalysisError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _config_of(folder: Path) -> dict[str, Any]:
    """tokenizer_config.json of a folder, with the template of `chat_template.jinja` as `chat_template` when the
    config has none (newer repositories keep the chat template in that file)."""
    config = _read_json_if(folder / "tokenizer_config.json")
    jinja = folder / "chat_template.jinja"
    if not config.get("chat_template") and jinja.is_file():
        config["chat_template"] = _read(jinja).decode("utf-8", errors="replace")
    return config


# --------------------------------------------------------------------------------------------------
# A saved session library (analysis.tokenizer.export.library_zip)
# --------------------------------------------------------------------------------------------------
#: Most tokenizers restored from one library zip.
MAX_LIBRARY_ENTRIES = 64


def load_library_zip(data: bytes) -> list[tuple[str, LoadedTokenizer]]:
    """The (name, tokenizer) pairs of a library zip written by :func:`analysis.tokenizer.export.library_zip`.

    Every tokenizer goes through the same checks as an upload (size caps on the bytes actually decompressed,
    id density, merges); names are plain text of at most 200 characters.
    """
    check_size("the library zip", len(data), TokenizerLoadError)
    zf = open_zip(io.BytesIO(data), "the library zip", 2 * MAX_LIBRARY_ENTRIES + 1, TokenizerLoadError)
    budget = [max_unzipped_bytes()]

    def member(name: str) -> bytes | None:
        try:
            info = zf.getinfo(name)
        except KeyError:
            return None
        out = io.BytesIO()
        budget[0] -= copy_member(zf, info, out, min(budget[0], max_file_bytes()), TokenizerLoadError)
        return out.getvalue()

    with zf:
        raw = member("library.json")
        if raw is None:
            raise TokenizerLoadError("not a Tokenizer Lab library: the zip has no library.json")
        manifest = parse_json(raw, "library.json", TokenizerLoadError)
        entries = manifest.get("entries") if isinstance(manifest, dict) else None
        if manifest.get("format") != "tokenizer-lab-library" or not isinstance(entries, list):
            raise TokenizerLoadError("not a Tokenizer Lab library (library.json has another format)")
        if len(entries) > MAX_LIBRARY_ENTRIES:
            raise TokenizerLoadError(
                f"the library holds {len(entries)} tokenizers, more than {MAX_LIBRARY_ENTRIES}"
            )
        out = []
        for e in entries:
            name, folder = (e.get("name"), e.get("folder")) if isinstance(e, dict) else (None, None)
            if not (isinstance(name, str) and name.strip() and isinstance(folder, str) and folder.isalnum()):
                raise TokenizerLoadError("library.json lists an entry without a name or folder")
            name = name.strip()[:200]
            text = member(f"{folder}/tokenizer.json")
            if text is None:
                raise TokenizerLoadError(f"the library lists {name!r} but holds no {folder}/tokenizer.json")
            cfg_raw = member(f"{folder}/tokenizer_config.json")
            cfg = parse_json(cfg_raw, f"{name}: tokenizer_config.json", TokenizerLoadError) if cfg_raw else {}
            tok = LoadedTokenizer.from_json_text(
                text, name=name, source="upload:library", config=cfg if isinstance(cfg, dict) else {}
            )
            out.append((name, tok))
    return out

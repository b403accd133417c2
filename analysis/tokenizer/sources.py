"""Load a tokenizer from anywhere: a hub id (with revision/token), a local folder or file, or an upload.

Every way a tokenizer arrives goes through the same size caps and the same converters, so the refusals a user sees
are the same whatever the source. This module is the entry (:func:`load`, :func:`load_file`, :func:`load_upload`,
zipped folders, a saved library); the loaders by source kind live beside it: :mod:`.folders` (a folder or a
tokenizer.json on this machine), :mod:`.hub` (the Hugging Face hub), :mod:`.gguf_source` (the tokenizer in a GGUF
model file) and :mod:`.converters` (SentencePiece, tiktoken and slow-tokenizer files to tokenizer.json).

Every loader returns a :class:`~analysis.tokenizer.tokenizer.LoadedTokenizer` or raises
:class:`~analysis.errors.TokenizerLoadError` with a message a user can act on.
Supported inputs: `tokenizer.json`, a folder (or zipped folder) holding one, a SentencePiece `.model`
(converted to a fast tokenizer), a tiktoken ranks file (converted to byte-level BPE with a split regex),
slow-tokenizer files (`vocab.json` + `merges.txt`, `vocab.txt`) and a GGUF model file (the tokenizer embedded
in its metadata; the weights are never read).
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path, PurePosixPath

from analysis.core.inputs import (
    check_not_special,
    check_size,
    check_zip_member,
    copy_member,
    decode_utf8,
    human_size,
    open_zip,
    parse_json,
    path_error,
)
from analysis.core.paths import max_file_bytes, max_unzipped_bytes
from analysis.errors import TokenizerLoadError

from .converters import (
    looks_like_sentencepiece,
    looks_like_tiktoken,
    sentencepiece_to_document,
    tiktoken_to_document,
    wordpiece_vocab_to_document,
)
from .folders import load_folder, load_tokenizer_json, read_tokenizer_file
from .gguf_file import GGUF_MAGIC
from .gguf_source import is_gguf_file, load_gguf, load_gguf_bytes
from .hub import load_hub
from .tokenizer import LoadedTokenizer

# Size caps (one for every way a file arrives): analysis.core.paths.max_file_bytes / max_unzipped_bytes.

#: Most entries accepted in a zipped tokenizer folder.
MAX_ZIP_ENTRIES = 1000


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
    if is_file and is_gguf_file(p):
        return load_gguf(p, name=name)
    if is_file:
        return load_file(p, name=name)
    s = str(source).strip()
    if not s:
        raise TokenizerLoadError("no tokenizer given: enter a hub id, a folder or a file path")
    if s.startswith(("/", ".", "~")) or os.sep in s.strip("/").replace("/", "", 1) or s.count("/") > 1:
        raise TokenizerLoadError(f"no such file or folder: {s}")
    return load_hub(s, revision=revision, token=token, name=name)


def load_file(path: str | os.PathLike, *, name: str | None = None) -> LoadedTokenizer:
    """Load a single local file of any supported kind (by name and content)."""
    path = Path(path)
    if is_gguf_file(path):
        return load_gguf(path, name=name)
    if path.suffix == ".json" and path.name.lower() not in _PARTIAL_JSON:
        return load_tokenizer_json(
            path, name=name or (path.parent.name if path.name == "tokenizer.json" else path.stem)
        )
    return load_upload(path.name, read_tokenizer_file(path), name=name)


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
    if lower.endswith(".model") or data[:2] == b"\n\x0e" or looks_like_sentencepiece(data):
        doc = sentencepiece_to_document(data)
        return LoadedTokenizer.from_document(doc, name=name, source=f"upload:{base}")
    if lower.endswith("vocab.txt") and not looks_like_tiktoken(data):  # a BERT-style WordPiece vocabulary
        lines = decode_utf8(data, base, TokenizerLoadError).splitlines()
        words = [t for t in lines if t and not t.startswith("[")]
        cased = sum(any(c.isupper() for c in t) for t in words) > 0.01 * max(1, len(words))
        doc = wordpiece_vocab_to_document(data, lowercase=not cased)
        return LoadedTokenizer.from_document(doc, name=name, source=f"upload:{base}")
    if lower.endswith((".tiktoken", ".bpe", ".txt")) or looks_like_tiktoken(data):
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
            check_zip_member(info, TokenizerLoadError)
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

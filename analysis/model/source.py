"""Where a model's files are: a folder, a weights file or a hub id resolved to a :class:`ModelSource` (its kind,
folder and weight files: safetensors, sharded with an index, GGUF or PyTorch pickles), and the tokenizer that
belongs to it (:func:`tokenizer_for_model`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from analysis.core.inputs import check_not_special, path_error
from analysis.errors import ModelLoadError, TokenizerLoadError
from analysis.tokenizer.folders import load_folder
from analysis.tokenizer.gguf_source import load_gguf
from analysis.tokenizer.hub import HUB_TOKENIZER_PATTERNS
from analysis.tokenizer.tokenizer import LoadedTokenizer

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")


@dataclass
class ModelSource:
    """A resolved model location: the weight files and the folder holding config/tokenizer files."""

    label: str
    folder: Path
    kind: str  # "safetensors" | "gguf" | "pytorch"
    files: list[Path]
    index: Path | None = None

    @property
    def gguf_file(self) -> str | None:
        """The GGUF file name (relative to folder) for `from_pretrained(gguf_file=...)`."""
        return self.files[0].name if self.kind == "gguf" else None

    def fingerprint(self) -> str:
        """A cache key from every weight file's path, size and mtime."""
        h = hashlib.sha256()
        for p in self.files + ([self.index] if self.index else []):
            st = p.stat()
            h.update(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        return h.hexdigest()[:16]


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def resolve_model(
    source: str | os.PathLike, *, revision: str | None = None, token: str | None = None
) -> ModelSource:
    """Find the weight files of a folder, a weight file, or a hub id (downloaded or from the local cache).

    `hub:owner/name` always means the hub, even when a local folder of that name exists.
    """
    s = str(source).strip()
    if not s:
        raise ModelLoadError("no model given: enter a folder, a .safetensors/.gguf/.bin file or a hub id")
    if s.startswith("hub:"):  # a hub id that must never be read as a local path (ids typed in the browser)
        s = s[4:].strip()
        if not _HUB_ID.match(s):
            raise ModelLoadError(f"not a hub id (owner/name): {s}")
        return _resolve_hub(s, revision=revision, token=token)
    p = check_not_special(os.path.expanduser(s), ModelLoadError)
    try:
        is_file, is_dir = p.is_file(), p.is_dir()
    except OSError as e:
        raise ModelLoadError(path_error(p, e)) from e
    if is_file:
        return _resolve_file(p)
    if is_dir:
        return _resolve_folder(p)
    if s.startswith(("/", ".", "~")) or not _HUB_ID.match(s):
        raise ModelLoadError(f"no such file or folder, and not a hub id: {s}")
    return _resolve_hub(s, revision=revision, token=token)


def _resolve_file(p: Path) -> ModelSource:
    name = p.name
    if name.endswith(".index.json"):
        kind = "safetensors" if "safetensors" in name else "pytorch"
        return ModelSource(str(p), p.parent, kind, _shards_from_index(p), index=p)
    if name.endswith(".gguf"):
        return ModelSource(str(p), p.parent, "gguf", [p])
    if name.endswith(".safetensors"):
        return ModelSource(str(p), p.parent, "safetensors", [p])
    if name.endswith((".bin", ".pt", ".pth")):
        return ModelSource(str(p), p.parent, "pytorch", [p])
    raise ModelLoadError(
        f"{p.name}: not a weight file (expected .safetensors, .gguf, .bin, .pt or an index.json)"
    )


def _resolve_folder(folder: Path) -> ModelSource:
    for idx in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / idx).is_file():
            return _resolve_file(folder / idx)
    for pattern in (
        "model.safetensors",
        "*.safetensors",
        "pytorch_model.bin",
        "*.bin",
        "*.pt",
        "*.pth",
        "*.gguf",
    ):
        found = sorted(q for q in folder.glob(pattern) if q.is_file() and "training_args" not in q.name)
        if found:
            if pattern == "*.safetensors" and len(found) > 1:
                return ModelSource(str(folder), folder, "safetensors", found)
            return _resolve_file(found[0])
    raise ModelLoadError(
        f"{folder} holds no model weights (looked for *.safetensors, a safetensors/bin index, "
        "pytorch_model.bin, *.pt, *.gguf)"
    )


def _shards_from_index(index: Path) -> list[Path]:
    """The shard files a weight index names: each a file in the index's own folder (a name that leaves the folder
    — absolute, `..`, or a link pointing out — is refused, so an uploaded index cannot read other server files)."""
    try:
        wm = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        names = list(dict.fromkeys(wm.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ModelLoadError(f"{index.name}: not a valid weight index ({type(e).__name__})") from e
    folder = index.parent.resolve()
    files = []
    for f in names:
        if not isinstance(f, str) or not f or Path(f).is_absolute() or ".." in Path(f).parts:
            raise ModelLoadError(f"{index.name} names shard {f!r}, which is not a file name in its folder")
        q = index.parent / f
        if not q.is_file():
            raise ModelLoadError(f"{index.name} names shard {f}, which is missing")
        if not q.resolve().is_relative_to(folder):
            raise ModelLoadError(f"{index.name} names shard {f}, which links outside its folder")
        files.append(q)
    return files


def _resolve_hub(repo_id: str, *, revision: str | None, token: str | None) -> ModelSource:
    try:
        from huggingface_hub import errors as hf_errors  # noqa: PLC0415 - heavy, loaded on use
        from huggingface_hub import snapshot_download  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover
        raise ModelLoadError("huggingface_hub is not installed") from e
    base = ["config.json", "generation_config.json", *HUB_TOKENIZER_PATTERNS]
    last: Exception | None = None
    for weights in (
        ["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"],
        ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"],
    ):
        try:
            folder = snapshot_download(
                repo_id, revision=revision, token=token or None, allow_patterns=base + weights
            )
        except hf_errors.GatedRepoError as e:
            raise ModelLoadError(
                f"{repo_id} is gated: accept its license on the hub and give an access token"
            ) from e
        except hf_errors.RepositoryNotFoundError as e:
            raise ModelLoadError(f"{repo_id}: no such repository on the hub (or it is private)") from e
        except hf_errors.RevisionNotFoundError as e:
            raise ModelLoadError(f"{repo_id}: revision {revision!r} does not exist") from e
        except hf_errors.LocalEntryNotFoundError as e:
            raise ModelLoadError(
                f"{repo_id}: not in the local Hugging Face cache and the hub cannot be reached (offline); "
                "give a local folder or file instead"
            ) from e
        except (hf_errors.HfHubHTTPError, OSError, ValueError) as e:
            last = e
            continue
        try:
            src = _resolve_folder(Path(folder))
            src.label = repo_id
            return src
        except ModelLoadError as e:
            last = e
    raise ModelLoadError(f"{repo_id}: no safetensors or PyTorch weights found ({last})")


def tokenizer_for_model(src: ModelSource) -> LoadedTokenizer:
    """The tokenizer that belongs to a model: its folder's tokenizer files, or the one inside a GGUF."""
    if src.kind == "gguf":
        try:
            return load_folder(src.folder)
        except TokenizerLoadError:
            return load_gguf(src.files[0])
    try:
        return load_folder(src.folder)
    except TokenizerLoadError as e:
        raise ModelLoadError(
            f"{src.label}: no tokenizer files next to the weights; give --tokenizer ({e})"
        ) from e


def library_models(folder: str | os.PathLike | None) -> dict[str, Path]:
    """The models of an operator's model library folder (``TOKLAB_MODEL_LIBRARY``), name → path: each sub-folder
    that holds weights (safetensors or GGUF, not pickles) and each ``.gguf`` / ``.safetensors`` file, by name; the
    pickers offer them by name, so a browser never names a server path. {} when the folder is not set or missing."""
    if folder is None:
        return {}
    root = Path(folder)
    if not root.is_dir():
        return {}
    out: dict[str, Path] = {}
    for p in sorted(root.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_dir() and (any(p.glob("*.safetensors")) or any(p.glob("*.gguf"))):
            out[p.name] = p
        elif p.is_file() and p.suffix.lower() in (".gguf", ".safetensors"):
            out[p.name] = p
    return out

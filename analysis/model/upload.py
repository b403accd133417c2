"""Models uploaded from the browser: checked and unpacked into a folder under the data folder that is named by the
upload's content hash, so the engine reads them like any local model and the same upload is unpacked once.

An upload is one of

* a ``.gguf`` file,
* a zipped Hugging Face folder (``config.json`` with ``*.safetensors`` weights, or a ``.gguf``, plus tokenizer files),
* several files of such a folder (``*.safetensors`` + ``config.json`` + tokenizer files), which
  :func:`pack_model_files` first stores as one zip, so a workspace keeps one file per model.

:func:`unpack_model` takes that one file and returns the *model source* (a folder, or the ``.gguf`` file) that
:func:`analysis.model.models.load_causal_lm` and the CLI read. Only known file types are unpacked (weights in
safetensors or GGUF, JSON, tokenizer files, chat templates): PyTorch pickles (``.bin``, ``.pt``, …) are refused,
never unpickled; other files are skipped. A zip is refused whole for an absolute or ``..`` path, a symbolic link,
or a total size over its cap (checked on the sizes it declares before anything is written, and on the bytes actually
decompressed while writing). Weights headers and ``config.json`` are checked before the folder is published; remote
code named by a config is never run (models load with ``trust_remote_code=False``).

The unpacked folder belongs to the workspace store (``<data>/models/<sha256>/``): unpack an upload *before* storing
it (:meth:`analysis.core.workspace.WorkspaceStore.put_file` then charges the folder to the item), and
:meth:`~analysis.core.workspace.WorkspaceStore.release` the digest when the upload is not stored after all; the
store removes the folder with the last item that names the file, and ``workspaces prune`` removes any folder whose
file no item names.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path, PurePosixPath

from analysis.core import paths
from analysis.core.inputs import check_zip_member, copy_member, human_size, open_zip, parse_json
from analysis.core.workspace_unpacked import UNPACKED
from analysis.errors import DataError, ModelLoadError
from analysis.model.safetensors_file import read_safetensors_header
from analysis.model.source import resolve_model
from analysis.tokenizer.export import zip_folder

#: Suffixes of the files a model upload may hold (other files in a zip are skipped).
MODEL_FILE_SUFFIXES = (".safetensors", ".gguf", ".json", ".model", ".txt", ".jinja", ".tiktoken")
#: Pickled weights: refused, never loaded from an upload.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")
#: What the upload widget accepts (a zip is a folder).
UPLOAD_TYPES = ("gguf", "zip", "safetensors", "json", "model", "txt", "jinja")
#: Most entries of a zipped model folder.
MAX_ZIP_ENTRIES = 2000
#: The folder under the data folder that holds unpacked uploads: the workspace store's (it charges, removes and
#: prunes them with the uploaded file: :meth:`analysis.core.workspace.WorkspaceStore.unpacked_path`).
FOLDER = UNPACKED
GGUF_MAGIC = b"GGUF"
_DONE = ".toklab-source"  # in a published folder: the model source, relative to the folder


def unzipped_cap() -> int:
    """Most bytes a zipped model may expand to: twice :func:`analysis.core.paths.model_upload_bytes`."""
    return 2 * paths.model_upload_bytes()


def _suffix(name: str) -> str:
    return PurePosixPath(name.replace("\\", "/")).suffix.lower()


def check_model_names(names: list[str]) -> None:
    """Refuse an upload of `names` that is not one model: pickles, unknown types, a ``.gguf`` or ``.zip`` with other
    files, several files without a ``config.json`` and ``*.safetensors``. A clear DataError each."""
    if not names:
        raise DataError("no file uploaded")
    pickles = [n for n in names if _suffix(n) in PICKLE_SUFFIXES]
    if pickles:
        raise DataError(f"{', '.join(pickles)}: PyTorch pickles are not accepted (loading one can run code): upload "
                        "the model as .safetensors (transformers' save_pretrained writes them) or as a .gguf")  # fmt: skip
    unknown = [n for n in names if _suffix(n) not in (*MODEL_FILE_SUFFIXES, ".zip")]
    if unknown:
        raise DataError(f"{', '.join(unknown)}: not a model file (expected a .gguf, a zipped model folder, or "
                        ".safetensors with config.json and tokenizer files)")  # fmt: skip
    whole = [n for n in names if _suffix(n) in (".gguf", ".zip")]
    if whole and len(names) > 1:
        raise DataError(f"upload {whole[0]} on its own: a .gguf or a zip is a whole model")
    if whole:
        return
    base = {PurePosixPath(n).name for n in names}
    if "config.json" not in base or not any(_suffix(n) == ".safetensors" for n in names):
        raise DataError("a model's files need config.json and its .safetensors weights (with the tokenizer files); "
                        "or upload a .gguf, or the model folder as a zip")  # fmt: skip


def pack_model_files(files: list[tuple[str, Path]], out: Path) -> Path:
    """Store the uploaded files of one model folder (`(name, path)` pairs, checked by :func:`check_model_names`)
    as one zip at `out` (the files are moved into a folder beside it first, then zipped uncompressed by
    :func:`analysis.tokenizer.export.zip_folder`); returns `out`."""
    check_model_names([n for n, _ in files])
    folder = out.parent / out.name.removesuffix(".zip")
    folder.mkdir()
    try:
        for name, p in files:
            target = folder / PurePosixPath(name.replace("\\", "/")).name
            if target.exists():
                raise DataError(f"{target.name} was uploaded twice")
            os.replace(p, target)
        zip_folder(folder, out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def file_digest(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def unpack_model(
    src: str | os.PathLike, name: str, *, digest: str | None = None, root: str | os.PathLike | None = None
) -> Path:
    """The model source (a folder, or a ``.gguf`` file in one) for the uploaded file `src` named `name` (a
    ``.gguf`` or a ``.zip``): unpacked once into ``<data>/models/<sha256>/`` (`digest`: the file's SHA-256 when
    the caller knows it) and checked; DataError for anything that is not a model this app loads."""
    src = Path(src)
    check_model_names([name])
    if _suffix(name) not in (".gguf", ".zip"):
        raise DataError(f"{name}: upload a .gguf or a zipped model folder (several files are packed first)")
    size = src.stat().st_size
    if size > paths.model_upload_bytes():
        raise DataError(f"{name} is {human_size(size)}, over the {human_size(paths.model_upload_bytes())} limit "
                        "for an uploaded model (TOKLAB_MODEL_UPLOAD_MB)")  # fmt: skip
    digest = digest or file_digest(src)
    base = Path(root) if root is not None else paths.data_dir()
    folder = base / FOLDER / digest
    done = folder / _DONE
    if done.is_file():
        return folder / done.read_text(encoding="utf-8")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{digest}.{os.getpid()}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        if _suffix(name) == ".gguf":
            rel = PurePosixPath(name.replace("\\", "/")).name
            _place(src, staging / rel)
        else:
            rel = _extract(src, name, staging)
        _check_model(staging, rel, name)
        (staging / _DONE).write_text(rel, encoding="utf-8")
        try:
            staging.rename(folder)
        except OSError:  # another process published the same upload first
            if not done.is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder / rel


def _place(src: Path, target: Path) -> None:
    """Put the uploaded file at `target`: a hard link when it is on the same file system (the workspace's copy
    never changes), else a copy."""
    try:
        os.link(src, target)
    except OSError:
        shutil.copyfile(src, target)


def _extract(src: Path, name: str, dest: Path) -> str:
    """Extract the model files of zip `src` into `dest`; the model source relative to `dest`."""
    with src.open("rb") as fh, open_zip(fh, name, MAX_ZIP_ENTRIES) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir() and "__MACOSX" not in i.filename]
        for info in infos:
            check_zip_member(info)
        pickles = [i.filename for i in infos if _suffix(i.filename) in PICKLE_SUFFIXES]
        if pickles:
            raise DataError(f"{name} holds PyTorch pickles ({', '.join(pickles[:3])}): not accepted, as loading one "
                            "can run code; save the model as .safetensors")  # fmt: skip
        keep = [i for i in infos if _suffix(i.filename) in MODEL_FILE_SUFFIXES]
        claimed = sum(i.file_size for i in keep)
        cap = unzipped_cap()
        if claimed > cap:
            raise DataError(
                f"{name} expands to {human_size(claimed)}, over the {human_size(cap)} accepted: refused"
            )
        left = cap
        root = dest.resolve()
        for info in keep:
            target = (root / info.filename.replace("\\", "/")).resolve()
            if not target.is_relative_to(root):
                raise DataError(f"zip entry {info.filename!r} escapes the folder: refused")
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as out:
                left -= copy_member(zf, info, out, left)
    configs = sorted((p.parent for p in dest.rglob("config.json")), key=lambda p: len(p.parts))
    ggufs = sorted(dest.rglob("*.gguf"), key=lambda p: len(p.parts))
    with_weights = [f for f in configs if any(f.glob("*.safetensors"))]
    if with_weights:
        return with_weights[0].relative_to(dest).as_posix() or "."
    if ggufs:
        return ggufs[0].relative_to(dest).as_posix()
    raise DataError(f"{name} holds no model: expected config.json with .safetensors weights, or a .gguf")


def _check_model(folder: Path, rel: str, name: str) -> None:
    """Check what was unpacked before it is published: GGUF magic, safetensors headers, config.json an object."""
    source = folder / rel
    try:
        src = resolve_model(source)
    except ModelLoadError as e:
        raise DataError(f"{name}: {e}") from None
    for f in src.files:
        if src.kind == "gguf":
            with f.open("rb") as fh:
                if fh.read(4) != GGUF_MAGIC:
                    raise DataError(f"{name}: {f.name} is not a GGUF file")
        elif src.kind == "safetensors":
            try:
                read_safetensors_header(f)
            except ModelLoadError as e:
                raise DataError(f"{name}: {e}") from None
        else:
            raise DataError(f"{name}: {f.name} is not safetensors or GGUF weights")
    config = src.folder / "config.json"
    if src.kind == "safetensors":
        if not config.is_file():
            raise DataError(f"{name}: no config.json next to the weights")
        if config.stat().st_size > paths.max_file_bytes():
            raise DataError(f"{name}: config.json is {human_size(config.stat().st_size)}: refused")
        if not isinstance(parse_json(config.read_bytes(), f"{name}: config.json"), dict):
            raise DataError(f"{name}: config.json is not a JSON object")

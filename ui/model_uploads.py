"""Models a browser brings in without server paths: an upload kept in the workspace (`analysis.model.upload`) or an
entry of the operator's model library (``TOKLAB_MODEL_LIBRARY``), both offered by name in `ui.pickers.pick_model`.

An upload (a ``.gguf``, a zipped model folder, or a folder's ``*.safetensors`` + ``config.json`` + tokenizer
files, packed into one zip) is written to disk in chunks, stored once by content in the workspace as an artifact
(``meta = {"role": "model"}``: the workspace panel lists it for download and delete) and unpacked into
``<data>/models/<sha256>/``; picking it returns that folder (or the ``.gguf`` in it), which every model loader
reads. A reload, another tab or a server restart offers the same upload again under "Uploaded: <name>".
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import streamlit as st

from analysis.core import paths
from analysis.core.inputs import human_size
from analysis.errors import DataError
from analysis.model.source import library_models
from analysis.model.upload import UPLOAD_TYPES, check_model_names, pack_model_files, unpack_model
from ui import workspace
from ui.downloads import keep_file, scratch
from ui.errors import try_step

#: The item kind and role of an uploaded model in the workspace.
KIND = "artifact"
ROLE = "model"
#: Picker option prefixes.
UPLOADED = "Uploaded: "
LIBRARY = "Library: "
UPLOAD = "Upload a model"


def uploaded_models() -> list[str]:
    """The names of the models uploaded into this session's workspace, oldest first."""
    ws = workspace.current()
    if not ws:
        return []
    return [i.name for i in workspace.store().items(ws, KIND) if i.meta.get("role") == ROLE]


def library_options() -> dict[str, Path]:
    """The operator's model library, picker label → path (never shown to the browser)."""
    return {LIBRARY + name: p for name, p in library_models(paths.model_library_dir()).items()}


def uploaded_source(name: str) -> str:
    """The model source of upload `name` of this workspace (unpacked on first use after a restart); '' when it is
    gone or fails its checks (the message is shown)."""
    ws = workspace.current()
    blob = workspace.store().file_path(ws, KIND, name) if ws else None
    if blob is None:
        st.warning(f"{name} is no longer in this workspace.", icon=":material/warning:")
        return ""
    source = try_step(unpack_model, blob, name, digest=blob.name)
    return str(source) if source is not None else ""


def _spool(files: list, folder: Path) -> list[tuple[str, Path]]:
    """Write the uploaded files to `folder` in chunks (the upload widget holds them in memory already)."""
    out = []
    for i, f in enumerate(files):
        base = PurePosixPath(f.name.replace("\\", "/")).name
        p = folder / f"{i}-{base}"
        with p.open("wb") as fh:
            f.seek(0)
            for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                fh.write(chunk)
        out.append((base, p))
    return out


def store_upload(files: list) -> str:
    """Check, store and unpack an upload (UploadedFile objects); its name in the workspace. DataError/QuotaError
    for anything refused (nothing kept)."""
    names = [f.name for f in files]
    check_model_names(names)
    total, cap = sum(f.size for f in files), paths.model_upload_bytes()
    if total > cap:
        raise DataError(f"the upload is {human_size(total)}, over the {human_size(cap)} limit for a model "
                        "(TOKLAB_MODEL_UPLOAD_MB)")  # fmt: skip
    with scratch() as tmp:
        spooled = _spool(files, tmp)
        if len(spooled) == 1:
            name, src = spooled[0]
        else:
            stem = next(Path(n).stem for n, _ in spooled if n.endswith(".safetensors"))
            name = f"{stem}-folder.zip"
            src = pack_model_files(spooled, tmp / name)
        blob_src = tmp / "upload"
        os.replace(src, blob_src)
        # checked and unpacked before it is kept: a refused upload leaves nothing in the workspace
        unpack_model(blob_src, name)
        keep_file(blob_src, name, {"role": ROLE})
    return name


def upload_box(key: str, container) -> None:
    """The upload widget of picker `key`: a stored upload becomes the picker's choice (on the next run)."""
    cap_mb = max(1, paths.model_upload_bytes() // (1024 * 1024))
    files = container.file_uploader(
        "A .gguf, a zipped model folder, or .safetensors + config.json + tokenizer files",
        type=list(UPLOAD_TYPES), accept_multiple_files=True, key=f"{key}-upload", max_upload_size=cap_mb,
        help=f"Up to {cap_mb:,} MB; kept in this workspace (its Files list) and unpacked on the server. PyTorch "
             ".bin/.pt files are refused: they can run code when loaded.",
    )  # fmt: skip
    if files and container.button("Keep this model in the workspace", key=f"{key}-upload-go",
                                  icon=":material/upload:"):  # fmt: skip
        with st.spinner("Checking and unpacking the model …"):
            name = try_step(store_upload, list(files))
        if name is not None:
            st.session_state[f"toklab-uploaded-{key}"] = UPLOADED + name
            st.rerun()

"""Models a browser brings in without server paths: an upload kept in the workspace (`analysis.model.upload`) or an
entry of the operator's model library (``TOKLAB_MODEL_LIBRARY``), both offered by name in `ui.pickers.pick_model`.

An upload (a ``.gguf``, a zipped model folder, or a folder's ``*.safetensors`` + ``config.json`` + tokenizer
files, packed into one zip) is size-checked on the sizes the browser declared before a byte is read, written to
disk in chunks, unpacked into ``<data>/models/<sha256>/`` and stored once by content in the workspace as an
artifact (``meta = {"role": "model"}``: the workspace panel lists it for download and delete), charged for the
file and its unpacked folder; picking it returns that folder (or the ``.gguf`` in it), which every model loader
reads. A reload, another tab or a server restart offers the same upload again under "Uploaded: <name>".

Memory: Streamlit keeps an upload's bytes in the server's memory (its uploaded-file manager, and the widget's
value in Session State). Once an upload was handled (stored, or refused), :func:`upload_box` removes the files
from the manager (as Streamlit's own chat and audio inputs do) and redraws the uploader under a new key, so the
widget's value goes too: Session State keeps only the upload's name, never its bytes.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import streamlit as st
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from analysis.core import paths
from analysis.core.inputs import human_size
from analysis.errors import DataError
from analysis.model.source import library_models
from analysis.model.upload import UPLOAD_TYPES, check_model_names, file_digest, pack_model_files, unpack_model
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
    for anything refused (nothing kept: no file, no unpacked folder)."""
    names = [f.name for f in files]
    check_model_names(names)
    total, cap = sum(f.size for f in files), paths.model_upload_bytes()
    if total > cap:  # the declared sizes: checked before a byte is read
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
        digest = file_digest(blob_src)
        # checked and unpacked before it is kept (the store charges the item for its unpacked folder); a refused
        # upload leaves nothing: no item, no file, no unpacked folder
        try:
            unpack_model(blob_src, name, digest=digest)
            keep_file(blob_src, name, {"role": ROLE})
        except BaseException:
            workspace.store().release(digest)
            raise
    return name


def release_upload(files: list) -> None:
    """Drop Streamlit's in-memory copy of uploaded `files` (its uploaded-file manager keeps them until the session
    ends otherwise): what Streamlit's own chat and audio inputs do once they read a file."""
    ctx = get_script_run_ctx(suppress_warning=True)
    mgr = getattr(ctx, "uploaded_file_mgr", None)
    if ctx is None or not isinstance(mgr, MemoryUploadedFileManager):
        return
    for f in files:
        file_id = getattr(f, "file_id", None)
        if file_id:
            mgr.remove_file(session_id=ctx.session_id, file_id=file_id)


def uploader_key(key: str) -> str:
    """The widget key of picker `key`'s uploader now (a new one after each handled upload, so the widget's value,
    the uploaded bytes, leaves Session State)."""
    n = int(st.session_state.get(f"toklab-upload-round-{key}", 0))
    return f"{key}-upload" if n == 0 else f"{key}-upload-{n}"


def upload_box(key: str, container) -> None:
    """The upload widget of picker `key`: "Keep this model in the workspace" stores the upload, which becomes the
    picker's choice (on the next run); stored or refused, the uploaded bytes leave the server's memory (the
    manager's copy dropped, the widget drawn anew under another key) and a refusal's message is shown."""
    cap_mb = max(1, paths.model_upload_bytes() // (1024 * 1024))
    refused = st.session_state.pop(f"toklab-upload-refused-{key}", None)
    if refused:
        container.error(refused, icon=":material/error:")
    files = container.file_uploader(
        "A .gguf, a zipped model folder, or .safetensors + config.json + tokenizer files",
        type=list(UPLOAD_TYPES), accept_multiple_files=True, key=uploader_key(key), max_upload_size=cap_mb,
        help=f"Up to {cap_mb:,} MB; kept in this workspace (its Files list) and unpacked on the server. PyTorch "
             ".bin/.pt files are refused: they can run code when loaded.",
    )  # fmt: skip
    if files and container.button("Keep this model in the workspace", key=f"{key}-upload-go",
                                  icon=":material/upload:"):  # fmt: skip
        files = list(files)
        try:
            with st.spinner("Checking and unpacking the model …"):
                name = store_upload(files)
        except workspace.STORE_ERRORS as e:
            st.session_state[f"toklab-upload-refused-{key}"] = paths.public_text(str(e))
            name = None
        finally:
            release_upload(files)
            n = int(st.session_state.get(f"toklab-upload-round-{key}", 0))
            st.session_state[f"toklab-upload-round-{key}"] = n + 1
        if name is not None:
            st.session_state[f"toklab-uploaded-{key}"] = UPLOADED + name
        st.rerun()

"""Models in the browser with server paths off (AppTest): `pick_model` offers the operator's model library by name
and an upload; an uploaded SmolLM2 GGUF is kept in the workspace (once, by content), unpacked on the server and
picked as a source the model loaders read; after a reload it is offered again. Stored or refused, an upload's bytes
leave the server's memory: Streamlit's uploaded-file manager and Session State hold none afterwards."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from support import SMOLLM, need_smollm

from analysis.core.workspace import default_store
from analysis.model.source import resolve_model


def _picker() -> None:
    import streamlit as st  # noqa: PLC0415 (AppTest runs this function's body as a script)

    from ui.pickers import pick_model  # noqa: PLC0415

    st.session_state["toklab-ws"] = st.session_state["ws"]  # as ui.workspace.enter leaves it
    st.session_state["picked"] = pick_model("t-model", "Model")


def _open(ws: str) -> AppTest:
    at = AppTest.from_function(_picker, default_timeout=120)
    at.session_state["ws"] = ws
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@need_smollm
@pytest.mark.slow
def test_an_uploaded_gguf_is_kept_in_the_workspace_and_picked_with_paths_off(monkeypatch, tmp_path):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    lib = tmp_path / "library"
    lib.mkdir()
    (lib / "tiny.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("TOKLAB_MODEL_LIBRARY", str(lib))
    ws = default_store().create()
    at = _open(ws)
    options = at.selectbox(key="t-model-kind").options
    assert "Library: tiny.gguf" in options and "Upload a model" in options
    assert "Folder or file path on the server" not in options and not any("/" in o for o in options)
    at.selectbox(key="t-model-kind").set_value("Upload a model").run()
    at.file_uploader(key="t-model-upload").upload(SMOLLM.name, SMOLLM.read_bytes()).run()
    at.button(key="t-model-upload-go").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    assert at.selectbox(key="t-model-kind").value == f"Uploaded: {SMOLLM.name}"
    picked = at.session_state["picked"]
    src = resolve_model(picked)
    assert src.kind == "gguf" and src.files[0].stat().st_size == SMOLLM.stat().st_size
    [item] = default_store().items(ws, "artifact")
    assert item.name == SMOLLM.name and item.meta["role"] == "model"
    again = _open(ws)  # a reload (or another tab, or a restart) offers it again
    again.selectbox(key="t-model-kind").set_value(f"Uploaded: {SMOLLM.name}").run()
    assert again.session_state["picked"] == picked


def _picker_memory() -> None:
    import streamlit as st  # noqa: PLC0415 (AppTest runs this function's body as a script)
    from streamlit.runtime.scriptrunner import get_script_run_ctx  # noqa: PLC0415

    from ui.pickers import pick_model  # noqa: PLC0415

    st.session_state["toklab-ws"] = st.session_state["ws"]  # as ui.workspace.enter leaves it
    st.session_state["picked"] = pick_model("t-model", "Model")
    ctx = get_script_run_ctx()
    held = ctx.uploaded_file_mgr.file_storage.get(ctx.session_id, {})  # Streamlit's in-memory copies
    st.session_state["held"] = sum(len(rec.data) for rec in held.values())


def _bytes_in_state(at: AppTest) -> list[str]:
    """The Session State keys whose value holds bytes or a file object (an UploadedFile is a BytesIO)."""

    def holds(v: object) -> bool:
        if isinstance(v, (bytes, bytearray, memoryview, io.IOBase)):
            return True
        if isinstance(v, dict):
            return any(holds(x) for x in v.values())
        return isinstance(v, (list, tuple, set)) and any(holds(x) for x in v)

    return [k for k, v in at._session_state.filtered_state.items() if holds(v)]


def test_an_upload_leaves_no_bytes_in_server_memory_stored_or_refused(monkeypatch):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    data = b"GGUF" + b"upload-memory-test" + bytes(4000)
    digest = hashlib.sha256(data).hexdigest()
    store = default_store()
    ws = store.create()
    at = AppTest.from_function(_picker_memory, default_timeout=60)
    at.session_state["ws"] = ws
    at.run()
    at.selectbox(key="t-model-kind").set_value("Upload a model").run()
    # refused (the workspace is full once the file and its unpacked folder are counted): nothing kept
    monkeypatch.setenv("TOKLAB_WORKSPACE_MAX_MB", str(1000 / 2**20))
    at.file_uploader(key="t-model-upload").upload("tiny.gguf", data).run()
    held = _bytes_in_state(at)  # until it is kept: Streamlit's copy and the widget's value
    assert at.session_state["held"] == len(data) and held == ["t-model-upload"]
    at.button(key="t-model-upload-go").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert "this workspace is full" in at.error[0].value
    assert at.session_state["held"] == 0 and _bytes_in_state(at) == []
    assert not at.file_uploader(key="t-model-upload-1").value  # drawn anew, empty
    assert not store.unpacked_path(digest).exists() and not list(store.blobs.glob(f"*/{digest}"))
    assert store.items(ws, "artifact") == []
    # stored: picked at once, and the bytes are only on disk (in the workspace, linked into its unpacked folder)
    monkeypatch.delenv("TOKLAB_WORKSPACE_MAX_MB")
    at.file_uploader(key="t-model-upload-1").upload("tiny.gguf", data).run()
    at.button(key="t-model-upload-go").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    assert at.selectbox(key="t-model-kind").value == "Uploaded: tiny.gguf"
    assert Path(at.session_state["picked"]).resolve() == (store.unpacked_path(digest) / "tiny.gguf").resolve()
    assert at.session_state["held"] == 0 and _bytes_in_state(at) == []
    [item] = store.items(ws, "artifact")
    assert item.name == "tiny.gguf" and len(data) <= item.size < 2 * len(data)

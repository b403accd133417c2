"""Models in the browser with server paths off (AppTest): `pick_model` offers the operator's model library by name
and an upload; an uploaded SmolLM2 GGUF is kept in the workspace (once, by content), unpacked on the server and
picked as a source the model loaders read; after a reload it is offered again."""

from __future__ import annotations

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

"""Workspaces in the app (AppTest): a `?ws=` link restores the library and the Playground after a reload and a
server restart; a missing or forged id opens a fresh workspace without saying whether another exists; no link
reaches another workspace's items; download ids are private to their session."""

from __future__ import annotations

import io
import json
import logging
import zipfile

import pytest
from app_support import open_page
from streamlit.elements.lib import policies
from streamlit.runtime import memory_media_file_storage as mm

from analysis.core import paths
from analysis.core import workspace as wsm
from analysis.core.workspace import default_store
from analysis.errors import DataError
from analysis.jobs.queue import default_jobs
from analysis.tokenizer.export import library_zip
from analysis.tokenizer.sources import load_upload
from ui import privacy
from ui.workspace_panel import FORMAT, MANIFEST, read_manifest

GPT2_JSON = paths.shared_assets() / "tokenizers" / "gpt2" / "tokenizer.json"


def _ws(at) -> str:
    v = at.query_params["ws"]
    return v[0] if isinstance(v, list) else v


def _library(at) -> list[str]:
    return [m.value.split("**")[1] for m in at.sidebar.markdown if m.value.startswith("**")]


def _restart() -> None:
    """What a server restart leaves: the data folder on disk, nothing of the process's store objects."""
    wsm.store_at.cache_clear()
    wsm._MIGRATED.clear()


def test_a_workspace_link_restores_library_and_text_after_a_reload_and_a_restart():
    at = open_page("pages/playground.py")
    ws = _ws(at)
    at.sidebar.selectbox(key="sidebar-example").set_value("gpt2").run()
    at.sidebar.button(key="sidebar-add").click().run()
    at.text_area(key="pg-text").set_value("Tere, maailm! Typed before the reload.").run()
    # an upload and an edit, as the Load & inspect page and the Change pages keep them
    store = default_store()
    data = GPT2_JSON.read_bytes()
    store.put(
        ws, "library", "my upload", {"how": "upload", "filename": "tokenizer.json", "pattern": None}, data
    )
    edited = load_upload("tokenizer.json", data).with_source(name="my edit", source="edited:")
    store.put(ws, "library", "my edit", {"how": "zip"}, library_zip({"my edit": edited}))
    _restart()
    again = open_page("pages/playground.py", ws=ws)
    assert _ws(again) == ws
    assert again.text_area(key="pg-text").value == "Tere, maailm! Typed before the reload."
    assert {"gpt2", "my upload", "my edit"} <= set(_library(again))
    assert again.multiselect(key="pg-toks").value == at.multiselect(key="pg-toks").value
    # removing an entry is kept too
    again.sidebar.button(key="rm-my edit").click().run()
    assert [i.name for i in store.items(ws, "library")] == ["gpt2", "my upload"]


def test_a_forged_or_missing_id_opens_a_fresh_workspace_and_never_reaches_another():
    owner = open_page("pages/playground.py")
    ws = _ws(owner)
    owner.text_area(key="pg-text").set_value("secret of the owner").run()
    plain = open_page("pages/playground.py")  # no id: a fresh workspace, no note
    assert _ws(plain) != ws and plain.text_area(key="pg-text").value != "secret of the owner"
    assert not [i for i in plain.sidebar.info if "not available" in i.value]
    notes = set()
    for forged in ("A" * 32, ws[:-1] + ("A" if ws[-1] != "A" else "B")):
        other = open_page("pages/playground.py", ws=forged)
        assert _ws(other) not in (forged, ws)
        assert other.text_area(key="pg-text").value != "secret of the owner"
        notes |= {i.value for i in other.sidebar.info}
    assert len(notes) == 1  # the same neutral note for every id that is not a live workspace
    # another workspace's id in any other parameter is no key to it
    other = open_page("pages/playground.py", textid=ws, t=ws)
    assert other.text_area(key="pg-text").value != "secret of the owner" and _ws(other) != ws
    assert default_store().inputs(_ws(other)).get("pg-text") != "secret of the owner"


def test_new_and_delete_workspace_from_the_sidebar():
    at = open_page("pages/playground.py")
    ws = _ws(at)
    at.text_area(key="pg-text").set_value("kept text").run()
    at.session_state["ws-box"] = True
    at.run()
    at.sidebar.button(key="ws-new").click().run()
    new = _ws(at)
    assert new != ws and at.text_area(key="pg-text").value != "kept text"
    assert default_store().inputs(ws)["pg-text"] == "kept text"  # the old one stays under its link
    at.session_state["ws-box"] = True
    at.run()
    default_jobs().submit(new, "wait", {"steps": 1, "seconds": 0.0})  # no worker: it stays queued
    at.sidebar.checkbox(key="ws-del-sure").check().run()
    at.sidebar.button(key="ws-del").click().run()
    assert _ws(at) != new and not default_store().exists(new)
    assert default_jobs().jobs(new) == []  # its job records went with it


def test_the_workspace_export_holds_inputs_and_results_and_an_import_takes_only_page_inputs():
    at = open_page("pages/playground.py")
    at.text_area(key="pg-text").set_value("exported text").run()
    default_store().put(_ws(at), "result", "model_check.json", {}, b'{"ok": true}')
    at.session_state["ws-box"] = True
    at.run()
    at.sidebar.button(key="ws-export").click().run()
    doc = read_manifest(at.session_state["ws-zip"])
    assert doc["inputs"]["pg-text"] == "exported text" and doc["results"] == {
        "model_check.json": '{"ok": true}'
    }
    # a crafted file: the app's own state, odd keys and values that are not plain JSON are left out
    crafted = {"format": FORMAT, "version": 1,
               "inputs": {"pg-text": "imported", "toklab-ws": "A" * 32, "Bad Key": 1, "pg-toks": [{"x": 1}]},
               "results": {"r.json": "{}", "evil": "x", "n.json": 3}}  # fmt: skip
    buf = io.BytesIO(library_zip({}))
    with zipfile.ZipFile(buf, "a") as zf:
        zf.writestr(MANIFEST, json.dumps(crafted))
    assert read_manifest(buf.getvalue()) == {"inputs": {"pg-text": "imported"}, "results": {"r.json": "{}"}}
    assert read_manifest(library_zip({})) == {}  # a plain library zip
    with pytest.raises(DataError, match="not a Tokenizer Lab workspace"):
        read_manifest(b"not a zip")


def test_download_ids_are_private_to_their_session(monkeypatch):
    privacy.install()

    class Ctx:
        def __init__(self, sid: str) -> None:
            self.session_id = sid

    ids = []
    for sid in ("session-a", "session-b"):
        monkeypatch.setattr(privacy, "get_script_run_ctx", lambda suppress_warning=False, s=sid: Ctx(s))
        ids.append(mm._calculate_file_id(b"the same report", "application/json", "r.json"))
    assert ids[0] != ids[1] and len(ids[0]) == 32
    privacy.install()  # a second install does not wrap twice
    assert getattr(mm._calculate_file_id, "_toklab_private", False)


#: Pages whose kept inputs have a default other than the widget's own: (page, the action that draws them all).
KEPT_WITH_DEFAULTS = {
    "pages/chat_template.py": lambda at: at,
    "pages/merge_trees.py": lambda at: (
        at.radio(key="mt-mode").set_value(at.radio(key="mt-mode").options[1]).run()
    ),
    "pages/compression.py": lambda at: at,
}


@pytest.mark.parametrize("page", list(KEPT_WITH_DEFAULTS))
def test_restored_inputs_keep_their_values_without_streamlits_warning(page, monkeypatch, caplog):
    """A reload restores a page's inputs through Session State: a widget that was also given its default then
    logs "created with a default value but also had its value set via the Session State API" (once per
    process, so the flag is reset here); `ui.workspace.unless_kept` gives the default only to a fresh input."""
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    at = open_page(page)
    KEPT_WITH_DEFAULTS[page](at)
    ws = _ws(at)
    saved = default_store().inputs(ws)
    assert saved, "the first session kept none of its inputs"
    with caplog.at_level(logging.WARNING, logger="streamlit"):
        again = open_page(page, ws=ws)
    assert "created with a default value" not in caplog.text
    for key, value in saved.items():  # the restored values are the widgets' values
        if key in again.session_state:
            got = again.session_state[key]
            assert (list(got) if isinstance(got, tuple) else got) == value, key

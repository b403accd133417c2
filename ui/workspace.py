"""This browser's workspace in the app (the store is :mod:`analysis.core.workspace`): opened from `?ws=` on a
session's first run, kept in the URL on every run, and written as the user works.

* :func:`enter` (the frame, before a page): opens the link's workspace — or a fresh one for a missing, expired or
  forged id, with one neutral note — and puts its id in the URL (`st.navigation` drops query parameters when the
  page changes; the frame puts it back).
* The library (`ui.library`) calls :func:`record_tokenizer` / :func:`forget_tokenizer` as entries come and go and
  :func:`restored_library` when a session starts: examples and hub ids by reference, uploads as their original
  bytes (stored once by content hash), edits as a one-entry library zip.
* Page inputs a user must not lose are *registered* by the page with :func:`keep` (widget keys, at the top of the
  page, before its widgets): a registered key missing from Session State is restored from the workspace, and
  :func:`save_inputs` (the frame, after the page) writes each registered value that changed since it was last
  written. Values are plain JSON (text, numbers, booleans, lists of them).
* A finished result that the page offers as a JSON download goes through :func:`json_download`, which also keeps
  the document in the workspace (the sidebar lists them for download after a reload or a restart).

A store that cannot be written (a full disk, a quota reached) is a warning on the page; the app keeps working on
what this session holds.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from typing import Any

import streamlit as st

from analysis import AnalysisError, LoadedTokenizer
from analysis.core.workspace import WorkspaceStore, default_store, valid_id
from analysis.tokenizer.export import library_zip
from analysis.tokenizer.sources import load_library_zip, load_upload
from analysis.views.shared_text import remove_legacy_texts
from ui.loaders import load_source

#: Session State: the workspace id of this session ("" when the store is unavailable).
WS_KEY = "toklab-ws"
_SAVED = "toklab-ws-saved"  # key → the value last written (or read back) for each page input
_KEYS = "toklab-ws-keys"  # the registered input keys of this session
_RESULTS = "toklab-ws-results"  # result name → digest of the document last written
_NOTES = "toklab-ws-notes"  # messages for the sidebar panel, once
_APPLY = "toklab-ws-apply"  # set: the saved inputs replace the session's on the next run (an import)
#: The query parameter that carries the workspace id.
PARAM = "ws"
#: What a store that cannot be read or written raises (shown as a warning; the tab keeps working).
STORE_ERRORS = (AnalysisError, OSError, sqlite3.Error)
#: The JSON types a page input may hold.
_PLAIN = (str, bool, int, float, type(None))
_PRUNED: set[str] = set()
_PRUNE_LOCK = threading.Lock()


def store() -> WorkspaceStore:
    """The workspace store of this server (under ``TOKLAB_DATA``)."""
    return default_store()


def current() -> str:
    """This session's workspace id ("" before :func:`enter` or when the store is unavailable)."""
    return st.session_state.get(WS_KEY) or ""


def note(message: str) -> None:
    """A message for the sidebar's workspace panel (shown once)."""
    st.session_state.setdefault(_NOTES, []).append(message)


def take_notes() -> list[str]:
    """The panel's pending messages (cleared)."""
    return st.session_state.pop(_NOTES, [])


def enter() -> str:
    """Called by app.py before a page: open this session's workspace on its first run, keep its id in the URL."""
    if WS_KEY not in st.session_state:
        raw = st.query_params.get(PARAM)
        try:
            _prune_once()
            ws, restored = store().open(raw)
        except STORE_ERRORS as e:
            st.session_state[WS_KEY] = ""
            note(f"Workspaces are unavailable on this server ({e}): this tab's work is not kept.")
            return ""
        st.session_state[WS_KEY] = ws
        st.session_state[_SAVED] = store().inputs(ws) if restored else {}
        if raw and not restored and valid_id(raw):
            note("The workspace in this link is not available on this server: a new, empty one was opened.")
    if st.session_state.pop(_APPLY, False):
        for k, v in st.session_state.get(_SAVED, {}).items():
            st.session_state[k] = v
    ws = current()
    if ws and st.query_params.get(PARAM) != ws:
        st.query_params[PARAM] = ws
    return ws


def _prune_once() -> None:
    """Once per server process and data folder: remove the idle workspaces (the operator's `workspaces prune`) and
    the texts earlier versions kept under their hash."""
    root = str(store().root)
    with _PRUNE_LOCK:
        if root in _PRUNED:
            return
        _PRUNED.add(root)
    remove_legacy_texts()
    store().prune()


def _warn(e: Exception) -> None:
    st.warning(f"Not kept in this workspace: {e}", icon=":material/cloud_off:")


# ---------------------------------------------------------------------------------------------- the library
def record_tokenizer(
    name: str, tok: LoadedTokenizer, source: str | None, upload: tuple[str, bytes, str | None] | None = None
) -> bool:
    """Keep a library entry in the workspace: a shareable `source` by reference, an `upload` (file name, bytes,
    tiktoken pattern) as its bytes, anything else (an edit) as a one-entry library zip. True when written."""
    ws = current()
    if not ws:
        return False
    try:
        if upload is not None:
            filename, data, pattern = upload
            store().put(
                ws, "library", name, {"how": "upload", "filename": filename, "pattern": pattern}, data
            )
        elif source and source.startswith(("example:", "hub:")):
            store().put(ws, "library", name, {"how": "ref", "source": source})
        else:
            store().put(ws, "library", name, {"how": "zip"}, library_zip({name: tok}))
    except STORE_ERRORS as e:
        _warn(e)
        return False
    return True


def forget_tokenizer(name: str) -> None:
    """Remove a library entry from the workspace."""
    if current():
        try:
            store().remove(current(), "library", name)
        except STORE_ERRORS as e:
            _warn(e)


def rename_tokenizer(old: str, new: str) -> None:
    """Give a library entry of the workspace another name (its file and place kept)."""
    if current() and old != new:
        try:
            store().rename(current(), "library", old, new)
        except STORE_ERRORS as e:
            _warn(e)


def restored_library() -> list[tuple[str, LoadedTokenizer]]:
    """The workspace's library entries, loaded (an entry that no longer loads is named in a note and skipped)."""
    ws, out, failed = current(), [], []
    if not ws:
        return out
    for item in store().items(ws, "library"):
        try:
            out.append((item.name, _load_item(ws, item.name, item.meta)))
        except (*STORE_ERRORS, ValueError) as e:
            failed.append(f"{item.name} ({e})")
    if failed:
        note("Could not restore from this workspace: " + "; ".join(failed))
    return out


def load_library_item(ws: str, name: str) -> LoadedTokenizer:
    """One library entry of workspace `ws`, loaded again from the store (an evicted upload or edit)."""
    item = store().get(ws, "library", name)
    if item is None:
        raise AnalysisError(f"{name!r} is no longer in this workspace")
    return _load_item(ws, name, item.meta)


def _load_item(ws: str, name: str, meta: dict[str, Any]) -> LoadedTokenizer:
    return _load_stored(ws, name, meta).with_source(name=name)


def _load_stored(ws: str, name: str, meta: dict[str, Any]) -> LoadedTokenizer:
    how = meta.get("how")
    if how == "ref":
        return load_source(str(meta["source"]))
    data = store().read(ws, "library", name)
    if data is None:
        raise AnalysisError("its stored file is missing")
    if how == "upload":
        return load_upload(str(meta.get("filename") or "upload"), data, tiktoken_pattern=meta.get("pattern"))
    return load_library_zip(data)[0][1]


# ---------------------------------------------------------------------------------------------- page inputs
def keep(*keys: str) -> None:
    """Register page inputs (widget keys) a user must not lose: each one missing from Session State is restored
    from the workspace now, and its value is written back whenever it changes. Call before the widgets."""
    st.session_state.setdefault(_KEYS, set()).update(keys)
    saved = st.session_state.get(_SAVED, {})
    for k in keys:
        if k not in st.session_state and k in saved:
            st.session_state[k] = saved[k]


def unless_kept(key: str, default: Any, neutral: Any = None) -> Any:
    """A kept widget's default argument: `default` while Session State has no value for `key`, else `neutral` (the
    widget's own default: index 0, "min", None, False). A value restored from the workspace wins either way, but a
    widget given a default and a value set through Session State logs Streamlit's "created with a default value but
    also had its value set via the Session State API" warning."""
    return neutral if key in st.session_state else default


def plain_value(v: Any) -> bool:
    """Whether `v` may be kept as a page input: text, a number, a boolean, None or a list of them."""
    return isinstance(v, _PLAIN) or (isinstance(v, (list, tuple)) and all(isinstance(x, _PLAIN) for x in v))


def save_inputs() -> None:
    """Called by app.py after a page: write each registered input whose value changed since it was written."""
    ws = current()
    if not ws:
        return
    saved = st.session_state.setdefault(_SAVED, {})
    for k in sorted(st.session_state.get(_KEYS, ())):
        if k not in st.session_state:
            continue
        v = st.session_state[k]
        v = list(v) if isinstance(v, tuple) else v
        if not plain_value(v) or saved.get(k, object()) == v:
            continue
        try:
            store().put_input(ws, k, v)
        except STORE_ERRORS as e:
            _warn(e)
            return
        saved[k] = v


# ---------------------------------------------------------------------------------------------- results
def keep_result(file_name: str, text: str) -> None:
    """Keep a finished result's JSON document in the workspace under its download name (the latest one wins)."""
    ws = current()
    if not ws:
        return
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    seen = st.session_state.setdefault(_RESULTS, {})
    if seen.get(file_name) == digest:
        return
    try:
        store().put(ws, "result", file_name, {}, text.encode("utf-8"))
    except STORE_ERRORS as e:
        _warn(e)
        return
    seen[file_name] = digest


def json_download(label: str, text: str, file_name: str, *, container: Any = None, **kwargs: Any) -> bool:
    """A JSON download button whose document is also kept in the workspace (see :func:`keep_result`)."""
    keep_result(file_name, text)
    box = container or st
    return box.download_button(label, text, file_name=file_name, mime="application/json", **kwargs)


# ---------------------------------------------------------------------------------------------- switching
def reset(ws: str) -> None:
    """Switch this session to workspace `ws` (new, or after a delete): everything this tab held is dropped (the
    caller reruns)."""
    st.session_state.clear()
    st.session_state[WS_KEY] = ws
    st.session_state[_SAVED] = {}
    st.query_params.clear()
    st.query_params[PARAM] = ws


def apply_inputs(values: dict[str, Any]) -> None:
    """Saved inputs that replace this session's values on the next run, before the page draws its widgets (an
    imported workspace; the caller reruns)."""
    st.session_state.setdefault(_SAVED, {}).update(values)
    st.session_state[_APPLY] = True

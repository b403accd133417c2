"""The sidebar's *Workspace* panel: the workspace link to copy, the kept results, the workspace's files (models
and GGUFs made or uploaded here, `ui.downloads`), export and import of the whole workspace as one zip, a new
workspace and deleting this one.

The export is the library zip (`analysis.tokenizer.export.library_zip`, so *Restore a saved library* reads it too)
with a `workspace.json` beside it: the kept page inputs and the results' JSON documents.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

import streamlit as st

from analysis import AnalysisError
from analysis.core.inputs import human_size
from analysis.core.outputs import json_document
from analysis.core.paths import max_file_bytes, upload_widget_mb
from analysis.errors import DataError
from analysis.jobs.queue import default_jobs
from analysis.tokenizer.defaults import DEFAULT_NAME
from analysis.tokenizer.export import library_zip
from analysis.tokenizer.sources import load_library_zip
from ui import workspace
from ui.downloads import artifacts_section
from ui.errors import try_step
from ui.expanders import lazy_expander
from ui.library import add_to_library, library
from ui.links import current_page

#: The member of an exported workspace zip that holds the inputs and results.
MANIFEST = "workspace.json"
FORMAT = "tokenizer-lab-workspace"
#: Input keys an imported file may set: page widget keys (never the app's own `toklab-…` state).
_INPUT_KEY = re.compile(r"(?!toklab)[a-z][a-z0-9-]{0,80}")


def workspace_link(ws: str) -> str:
    """The link that opens workspace `ws` on the current page of this server."""
    url = st.context.url or "."
    page = current_page()
    if page and url.rstrip("/").endswith("/" + page):
        url = url.rstrip("/")[: -len(page) - 1]
    return f"{url.rstrip('/')}/{page}?{workspace.PARAM}={ws}"


def export_zip(ws: str) -> bytes:
    """The whole workspace as one zip: the library (as the library zip) and `workspace.json`."""
    entries = {n: t for n, t in library().items() if n != DEFAULT_NAME}
    store = workspace.store()
    doc = {
        "format": FORMAT,
        "version": 1,
        "inputs": store.inputs(ws),
        "results": {
            i.name: (store.read(ws, "result", i.name) or b"").decode("utf-8")
            for i in store.items(ws, "result")
        },
    }
    buf = io.BytesIO(library_zip(entries))
    with zipfile.ZipFile(buf, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST, json_document(doc))
    return buf.getvalue()


def read_manifest(data: bytes) -> dict[str, Any]:
    """The checked `workspace.json` of an exported zip ({} for a plain library zip): inputs limited to page
    widget keys and plain JSON values, results to JSON texts."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            try:
                info = zf.getinfo(MANIFEST)
            except KeyError:
                return {}
            if info.file_size > max_file_bytes():
                raise DataError(
                    f"{MANIFEST} is {human_size(info.file_size)}, over the {human_size(max_file_bytes())} limit"
                )
            doc = json.loads(zf.read(info).decode("utf-8"))
    except (zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError, OSError) as e:
        raise DataError(f"not a Tokenizer Lab workspace zip ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f"{MANIFEST} has another format: not a Tokenizer Lab workspace")
    inputs, results = doc.get("inputs") or {}, doc.get("results") or {}
    if not isinstance(inputs, dict) or not isinstance(results, dict):
        raise DataError(f"{MANIFEST} holds no inputs or results")
    ok_inputs = {
        k: v
        for k, v in inputs.items()
        if isinstance(k, str) and _INPUT_KEY.fullmatch(k) and workspace.plain_value(v)
    }
    ok_results = {
        k: v for k, v in results.items() if isinstance(k, str) and k.endswith(".json") and isinstance(v, str)
    }
    return {"inputs": ok_inputs, "results": ok_results}


def import_zip(data: bytes) -> str:
    """Add an exported workspace (or a library zip) to this one: its tokenizers, inputs and results; a summary."""
    manifest = read_manifest(data)
    toks = load_library_zip(data)
    names = [add_to_library(tok, name) for name, tok in toks]
    ws = workspace.current()
    for name, text in manifest.get("results", {}).items():
        workspace.store().put(ws, "result", name[:300], {}, text.encode("utf-8"))
    inputs = manifest.get("inputs", {})
    for k, v in inputs.items():
        workspace.store().put_input(ws, k, v)
    workspace.apply_inputs(inputs)
    return (f"Imported {len(names)} tokenizer(s), {len(manifest.get('results', {}))} result(s) and "
            f"{len(inputs)} page input(s).")  # fmt: skip


def _results(ws: str) -> None:
    items = workspace.store().items(ws, "result")
    if not items:
        st.caption("No results kept yet: a page's JSON result is kept here once it is shown.")
        return
    st.markdown("**Results**")
    for item in items:
        st.download_button(f"{item.name} · {human_size(item.size)}", data=lambda n=item.name: workspace.store().read(ws, "result", n),
                           file_name=item.name, mime="application/json", key=f"ws-res-{item.name}",
                           icon=":material/download:", type="tertiary", on_click="ignore")  # fmt: skip


def _switch(new_ws: str, message: str) -> None:
    workspace.reset(new_ws)
    workspace.note(message)
    st.rerun()


def workspace_panel() -> None:
    """The sidebar panel (drawn after the library)."""
    st.markdown("### Workspace")
    for n in workspace.take_notes():
        st.info(n, icon=":material/info:")
    ws = workspace.current()
    if not ws:
        return
    st.caption("Your library, typed text, page inputs and results are kept on this server under this tab's link: "
               "a reload, a bookmark, another tab or a server restart brings them back. Anyone with the link can "
               f"open this workspace. Holds {workspace.store().usage(ws).describe()}.")  # fmt: skip
    box = lazy_expander("Link, results, export, new, delete", "ws-box")
    if box is None:
        return
    with box:
        st.markdown("**Copy workspace link** (the button at the right of the box)")
        st.code(workspace_link(ws), language=None, wrap_lines=True)
        _results(ws)
        artifacts_section(ws)
        if st.button("Prepare workspace export (.zip)", key="ws-export"):
            st.session_state["ws-zip"] = try_step(export_zip, ws)
        if st.session_state.get("ws-zip"):
            st.download_button("Download workspace (.zip)", st.session_state["ws-zip"], file_name="tokenizer-lab-workspace.zip",
                               mime="application/zip", key="ws-dl")  # fmt: skip
        up = st.file_uploader(
            "Import a workspace or library (.zip)",
            type=["zip"],
            key="ws-import",
            max_upload_size=upload_widget_mb(),
        )
        if up is not None and st.button("Import", key="ws-import-go"):
            try:
                summary = import_zip(up.getvalue())
            except AnalysisError as e:
                st.error(str(e))
            else:
                workspace.note(summary)
                st.rerun()
        c1, c2 = st.columns(2)
        if c1.button("New workspace", key="ws-new", icon=":material/add:",
                     help="Start an empty workspace in this tab (this one stays under its link)"):  # fmt: skip
            _switch(
                workspace.store().create(), "A new, empty workspace: the previous one stays under its link."
            )
        sure = c2.checkbox("Delete this workspace", key="ws-del-sure",
                           help="Removes its library, inputs, results and share links from the server")  # fmt: skip
        if sure and c2.button("Delete now", key="ws-del", type="primary", icon=":material/delete_forever:"):
            workspace.store().delete(ws)
            default_jobs().forget(ws)  # its jobs' records (a running one stops at its next progress report)
            _switch(
                workspace.store().create(),
                "The workspace was deleted from the server; this is a new, empty one.",
            )

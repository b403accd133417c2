"""Downloads of workspace artifacts by link: an edited model's folder as a zip, a `.gguf`, an uploaded model —
files too large to pass through Streamlit's in-memory media store.

:func:`artifact_button` draws a link to the server's file route (`ui/file_route.py`), which streams the file from
disk; the link carries a signed token for this workspace's item (:mod:`analysis.core.download_links`) that expires
and stops working once the item is removed. :func:`job_downloads` draws a done job's links only while every file
the job kept is there as the job wrote it (else it says the files were deleted and to run the job again, which
then runs anew: :func:`analysis.jobs.queue.missing_outputs`). :func:`artifacts_section` lists the workspace's
artifacts in the sidebar's workspace panel, each with its link and a delete button.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import streamlit as st

from analysis.core import paths
from analysis.core.download_links import make_token
from analysis.core.inputs import human_size
from analysis.core.outputs import atomic_write_text, json_document
from analysis.jobs.queue import Job, job_missing_outputs
from analysis.tokenizer.export import zip_folder
from ui import workspace
from ui.file_route import prefix

#: The item kind of every downloadable file.
KIND = "artifact"


@contextmanager
def scratch() -> Iterator[Path]:
    """A private temporary folder on the workspace store's file system (so a finished file is moved into the store,
    not copied), removed after."""
    root = paths.data_dir() / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        yield Path(tmp)


def keep_file(path: Path, name: str, meta: dict[str, Any]) -> str:
    """Move file `path` into this session's workspace as artifact `name` (replacing one of that name); `name`.
    QuotaError (nothing kept) when the workspace would go over its quota."""
    workspace.store().put_file(workspace.current(), KIND, name, meta, path, move=True)
    return name


def keep_folder(folder: Path, meta: dict[str, Any]) -> str:
    """Zip `folder` (stored, file by file: :func:`analysis.tokenizer.export.zip_folder`) into this session's
    workspace as artifact `<folder name>.zip`; that name. Its `*_report.json` files name files as downloads do
    (:func:`analysis.core.paths.public_document`: never the server's layout, such as the scratch folder)."""
    for report in folder.glob("*_report.json"):
        atomic_write_text(report, json_document(paths.public_document(json.loads(report.read_text("utf-8")))))
    with scratch() as tmp:
        zip_folder(folder, tmp / "folder.zip")
        return keep_file(tmp / "folder.zip", f"{folder.name}.zip", meta)


def artifact_url(ws: str, name: str) -> str:
    """The download link (a path on this server) of artifact `name` of workspace `ws`."""
    return prefix() + make_token(ws, KIND, name)


def artifact_size(ws: str, name: str) -> int | None:
    """Bytes of the file of artifact `name` (None: no such artifact, or its file is gone)."""
    p = workspace.store().file_path(ws, KIND, name)
    return p.stat().st_size if p is not None else None


def artifact_button(name: str, label: str, *, key: str) -> None:
    """A download button for artifact `name` of this session's workspace, its size in the label; a caption when
    the artifact is not there (not made yet, deleted, or no workspace)."""
    ws = workspace.current()
    size = artifact_size(ws, name) if ws else None
    if size is None:
        st.caption(f"{label}: not available (it was not made yet or was deleted).")
        return
    st.link_button(f"{label} · {human_size(size)}", artifact_url(ws, name), key=key, icon=":material/download:",
                   help="Streamed from the server's disk; the link works for this workspace only and expires.")  # fmt: skip


def job_downloads(job: Job, links: list[tuple[str, str]], *, key: str, what: str = "this job") -> bool:
    """The download buttons of done `job`'s artifacts (`links`: ``(name, label)`` pairs from its result), or, when
    a file the job kept is gone (deleted from the Files list, or replaced by another job's file of that name), no
    link at all but a warning to run it again (the same inputs then run anew). Whether the links were drawn."""
    ws = workspace.current()
    missing = job_missing_outputs(workspace.store(), ws, job) if ws else [name for name, _ in links]
    missing += [n for n, _ in links if n not in missing and (not ws or artifact_size(ws, n) is None)]
    if missing:
        st.warning(f"The files of {what} were deleted from this workspace ({', '.join(missing)}): run it again to "
                   "make them anew.", icon=":material/delete_forever:")  # fmt: skip
        return False
    for i, (name, label) in enumerate(links):
        artifact_button(name, label, key=f"{key}-{i}")
    return True


def artifacts_section(ws: str) -> None:
    """The workspace panel's list of artifacts: a download link and a delete button each."""
    items = workspace.store().items(ws, KIND)
    if not items:
        return
    st.markdown("**Files** (models and GGUFs made or uploaded here)")
    for item in items:
        size = artifact_size(ws, item.name)
        c1, c2 = st.columns([5, 1], vertical_alignment="center")
        if size is None:
            c1.caption(f"{item.name}: its file is gone")
        else:
            c1.link_button(f"{item.name} · {human_size(size)}", artifact_url(ws, item.name), type="tertiary",
                           icon=":material/download:", key=f"ws-art-{item.name}")  # fmt: skip
        if c2.button("Delete", key=f"ws-art-del-{item.name}", icon=":material/delete:", type="tertiary",
                     help=f"Delete {item.name} from this workspace"):  # fmt: skip
            workspace.store().remove(ws, KIND, item.name)
            st.rerun()

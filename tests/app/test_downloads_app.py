"""Workspace artifacts in the app (AppTest): the sidebar's workspace panel lists them with a download link to the
server's file route and a delete button; the link names this workspace's item only; `artifact_button` shows the
size, or says the artifact is not there; a done job's links are drawn only while its files are there."""

from __future__ import annotations

import pytest
from app_support import open_page
from streamlit.testing.v1 import AppTest

from analysis.core.download_links import check_token
from analysis.core.workspace import _key, default_store
from analysis.jobs.queue import default_jobs, run_claimed
from ui.file_route import PREFIX


def _links(at) -> list[tuple[str, str]]:
    return [(e.proto.label, e.proto.url) for e in at.get("link_button")]


@pytest.mark.slow
def test_the_workspace_panel_lists_artifacts_with_a_link_and_a_delete_button(tmp_path):
    at = open_page("pages/home.py")
    ws = at.query_params["ws"][0] if isinstance(at.query_params["ws"], list) else at.query_params["ws"]
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + bytes(2996))
    default_store().put_file(ws, "artifact", "smol-et.gguf", {"role": "model"}, tmp_path / "m.gguf")
    at.session_state["ws-box"] = True
    at.run()
    links = [(label, url) for label, url in _links(at.sidebar) if "smol-et.gguf" in label]
    assert len(links) == 1 and links[0][0] == "smol-et.gguf · 2.9 kB", links
    assert links[0][1].startswith(PREFIX)
    assert check_token(links[0][1].removeprefix(PREFIX)) == (_key(ws), "artifact", "smol-et.gguf")
    at.sidebar.button(key="ws-art-del-smol-et.gguf").click().run()
    assert default_store().get(ws, "artifact", "smol-et.gguf") is None
    assert not [label for label, _ in _links(at.sidebar) if "smol-et.gguf" in label]


def _buttons() -> None:
    import streamlit as st  # noqa: PLC0415 (AppTest runs this function's body as a script)

    from ui.downloads import artifact_button  # noqa: PLC0415

    st.session_state["toklab-ws"] = st.session_state["ws"]  # as ui.workspace.enter leaves it
    artifact_button("model.zip", "Download the model (zip)", key="dl-model")
    artifact_button("missing.gguf", "Download the GGUF", key="dl-gguf")


def test_artifact_button_shows_the_size_or_says_the_file_is_not_there(tmp_path):
    store = default_store()
    ws = store.create()
    (tmp_path / "model.zip").write_bytes(bytes(5120))
    store.put_file(ws, "artifact", "model.zip", {}, tmp_path / "model.zip")
    at = AppTest.from_function(_buttons)
    at.session_state["ws"] = ws
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    [(label, url)] = _links(at)
    assert label == "Download the model (zip) · 5 kB" and url.startswith(PREFIX)
    assert [c.value for c in at.caption] == [
        "Download the GGUF: not available (it was not made yet or was deleted)."
    ]


def _job_links() -> None:
    import streamlit as st  # noqa: PLC0415 (AppTest runs this function's body as a script)

    from analysis.jobs.queue import default_jobs  # noqa: PLC0415
    from ui.downloads import job_downloads  # noqa: PLC0415

    st.session_state["toklab-ws"] = st.session_state["ws"]  # as ui.workspace.enter leaves it
    job = default_jobs().get(st.session_state["ws"], st.session_state["job"])
    st.session_state["drawn"] = job_downloads(
        job, [("out.txt", "Download out.txt")], key="t", what="this export"
    )


def test_a_done_jobs_links_are_drawn_only_while_its_files_are_there():
    jobs, store = default_jobs(), default_store()
    ws = store.create()
    job = jobs.submit(ws, "wait", {"steps": 1, "seconds": 0.0, "artifact": "out.txt"})
    assert jobs.claim(job.id) == "run"
    run_claimed(jobs, job.id, ws)  # the job runs here: it keeps out.txt in the workspace
    at = AppTest.from_function(_job_links)
    at.session_state["ws"], at.session_state["job"] = ws, job.id
    at.run()
    assert not at.exception and at.session_state["drawn"], [e.message for e in at.exception]
    assert [label for label, _ in _links(at)] == ["Download out.txt · 8 bytes"] and not at.warning
    store.remove(ws, "artifact", "out.txt")  # deleted from the sidebar's Files list
    at.run()
    assert not at.session_state["drawn"] and _links(at) == []
    assert (
        "The files of this export were deleted" in at.warning[0].value
        and "run it again" in at.warning[0].value
    )

"""The job panel (ui.jobs, AppTest): a submitted job's id is kept in the workspace, so a new session with the same
workspace (a reload, another tab, a restarted server) re-attaches to it — queued with its place in the queue,
then its result once a worker ran it; a cancelled job offers "Run again", which attaches a new job."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from analysis.core import workspace as wsm
from analysis.core.workspace import default_store
from analysis.jobs import queue
from analysis.jobs.queue import default_jobs, run_claimed


def _page() -> None:
    import streamlit as st  # noqa: PLC0415 (AppTest runs the function's own source)

    from ui.jobs import job_panel, submit  # noqa: PLC0415

    if st.button("Start", key="go"):
        submit("demo", "wait", {"steps": 1, "seconds": 0.0, "n": 7}, label="Demo")
    job = job_panel("demo", "Demo job")
    if job is not None and job.state == "done":
        st.write(f"result: {job.result}")


def _session(ws: str) -> AppTest:
    at = AppTest.from_function(_page, default_timeout=60)
    at.session_state["toklab-ws"] = ws  # what ui.workspace.enter() puts there from ?ws=
    return at.run()


def _restart() -> None:
    """What a server restart leaves: the data folder on disk, nothing of the process's store objects."""
    wsm.store_at.cache_clear()
    queue.job_store_at.cache_clear()


@pytest.fixture(autouse=True)
def own_data(tmp_path, monkeypatch):
    """A data folder of the test's own: no worker of another test's server is alive in it (the estimates say
    "unknown") or takes its jobs."""
    monkeypatch.setenv("TOKLAB_DATA", str(tmp_path / "data"))
    _restart()
    yield
    _restart()


@pytest.mark.slow
def test_a_reload_reattaches_to_the_job_and_shows_its_result():
    ws = default_store().create()
    at = _session(ws)
    at.button(key="go").click().run()
    assert not at.exception
    bar = at.get("progress")
    assert bar and "Place 1 in the queue" in bar[0].proto.text and "starts in unknown" in bar[0].proto.text
    job_id = default_store().inputs(ws)["job:demo"]
    # reload mid-job (no worker yet): the new session finds the queued job
    _restart()
    again = _session(ws)
    assert "Queued" in again.get("progress")[0].proto.text and not again.exception
    # a worker runs it (here in this process); the next reload shows the result
    jobs = default_jobs()
    assert jobs.claim(job_id) == "run"
    run_claimed(jobs, job_id, ws)
    _restart()
    done = _session(ws)
    assert any("result: {'steps': 1}" in m.value for m in done.markdown) and not done.get("progress")
    # another workspace's session sees nothing of it
    other = _session(default_store().create())
    assert not other.get("progress") and not any("result" in m.value for m in other.markdown)


def test_cancel_then_run_again_attaches_a_new_job():
    ws = default_store().create()
    at = _session(ws)
    at.button(key="go").click().run()
    first = default_store().inputs(ws)["job:demo"]
    at.button(key="demo-cancel").click().run()
    assert default_jobs().get(ws, first).state == "cancelled"
    at.run()
    assert any("cancelled" in e.value.lower() for e in at.error)
    at.button(key="demo-again").click().run()
    second = default_store().inputs(ws)["job:demo"]
    assert second != first and default_jobs().get(ws, second).state == "queued"

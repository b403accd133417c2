"""The job queue (analysis.jobs.queue): submit, dedupe, isolation between workspaces, cancel, place in the queue and
estimates, the per-workspace cap, a full disk; with huey in immediate mode (the job runs in this process) or no
consumer at all (the job stays queued). The real worker processes are in test_worker.py."""

from __future__ import annotations

import datetime
import errno
import json
from pathlib import Path

import pytest
from huey.registry import Message

from analysis.cli import main
from analysis.core.workspace import WorkspaceStore, store_at
from analysis.errors import DataError
from analysis.jobs.queue import (
    INTERRUPTED,
    KEPT,
    JobStore,
    JsonSerializer,
    inputs_hash,
    job_store_at,
    missing_outputs,
    run_claimed,
    set_immediate,
)

FAST = {"steps": 2, "seconds": 0.0}


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path.resolve())


def _ws(root: str) -> str:
    return store_at(root).create()


def test_submit_runs_dedupes_and_stays_in_its_workspace(root: str):
    set_immediate(root)
    try:
        jobs, a, b = job_store_at(root), _ws(root), _ws(root)
        job = jobs.submit(a, "wait", {**FAST, "artifact": "out.txt"})
        assert job.state == "done" and job.fraction == 1.0 and job.result == {"steps": 2}
        assert job.log[0] == "step 1 of 2" and job.log[-1] == "done"
        assert store_at(root).read(a, "artifact", "out.txt") == b"2 steps\n"
        # the same inputs in the same workspace: the same job; in another workspace: a job of its own
        assert jobs.submit(a, "wait", {**FAST, "artifact": "out.txt"}).id == job.id
        other = jobs.submit(b, "wait", {**FAST, "artifact": "out.txt"})
        assert other.id != job.id
        # a job id of workspace A is invisible from B (get, list, cancel, run again, its outputs)
        assert jobs.get(b, job.id) is None and [j.id for j in jobs.jobs(b)] == [other.id]
        assert not jobs.cancel(b, job.id) and jobs.run_again(b, job.id) is None
        assert jobs.get("not-an-id", job.id) is None and jobs.jobs("x" * 32) == []
        assert store_at(root).read(WorkspaceStore(root).create(), "artifact", "out.txt") is None
        # a failed job is submitted anew by the same inputs; its message is kept
        bad = jobs.submit(a, "wait", {**FAST, "fail": "no such model"})
        assert (bad.state, bad.error) == ("failed", "no such model")
        again = jobs.run_again(a, bad.id)
        assert again is not None and again.id != bad.id and again.state == "failed"
    finally:
        set_immediate(root, False)


def test_a_done_job_whose_files_were_deleted_or_replaced_runs_again(root: str):
    set_immediate(root)
    try:
        jobs, store, ws = job_store_at(root), store_at(root), _ws(root)
        params = {**FAST, "artifact": "out.txt"}
        job = jobs.submit(ws, "wait", params)
        digest = store.file_path(ws, "artifact", "out.txt").name  # type: ignore[union-attr]
        assert job.kept == [["artifact", "out.txt", digest]] and KEPT not in job.result  # type: ignore[operator]
        assert jobs.missing_outputs(ws, job) == [] and jobs.submit(ws, "wait", params).id == job.id
        # deleted from the sidebar's Files list: the done job is not reused, the same inputs run again
        store.remove(ws, "artifact", "out.txt")
        assert jobs.missing_outputs(ws, job) == ["out.txt"]
        again = jobs.submit(ws, "wait", params)
        assert again.id != job.id and again.state == "done" and jobs.missing_outputs(ws, again) == []
        assert store.read(ws, "artifact", "out.txt") == b"2 steps\n"
        # another file under the same name is not this job's file either
        store.put(ws, "artifact", "out.txt", {}, b"another job's file")
        assert (
            jobs.missing_outputs(ws, again) == ["out.txt"] and jobs.submit(ws, "wait", params).id != again.id
        )
        # a result from before kept files were recorded: its named artifacts are checked
        legacy = {"artifacts": [["out.txt", "x"], ["gone.zip", "y"]]}
        assert missing_outputs(store, ws, legacy) == ["gone.zip"]
    finally:
        set_immediate(root, False)


def test_bad_submissions_are_refused(root: str):
    jobs, ws = job_store_at(root), _ws(root)
    with pytest.raises(DataError, match="unknown job kind"):
        jobs.submit(ws, "pickle", {})
    with pytest.raises(DataError, match="plain JSON"):
        jobs.submit(ws, "wait", {"f": object()})
    with pytest.raises(DataError, match="no longer on the server"):
        jobs.submit("A" * 32, "wait", FAST)
    assert inputs_hash("wait", {"a": 1, "b": 2}) == inputs_hash("wait", {"b": 2, "a": 1})


def test_queue_place_estimates_and_cancel(root: str):
    """No consumer: jobs wait in the queue, in order, background work after users; estimates come from past runs."""
    jobs, a, b = job_store_at(root), _ws(root), _ws(root)
    gallery = jobs.submit(a, "wait", {**FAST, "n": 0}, priority=0)
    first = jobs.submit(a, "wait", {**FAST, "n": 1})
    second = jobs.submit(b, "wait", {**FAST, "n": 2})
    assert [jobs.get(ws, j.id).place for ws, j in ((a, first), (b, second), (a, gallery))] == [1, 2, 3]
    assert jobs.get(b, second.id).starts_in is None  # no past run of the kind: "unknown"
    # a past run of 10 s: with one worker, the second job starts after the first and ends 10 s later
    with jobs._tx() as c:
        c.execute("INSERT INTO jobs (id, ws, kind, label, params, inputs, state, priority, created, started, ended) "
                  "VALUES ('past', 'k', 'wait', 'w', '{}', 'h', 'done', 10, 0, 100, 110)")  # fmt: skip
    jobs.register_worker(12345)
    est = jobs.get(b, second.id)
    assert (est.workers, est.starts_in, est.ends_in) == (1, 10.0, 20.0)
    # cancel: a queued job at once, and the worker skips it
    assert jobs.cancel(b, second.id) and jobs.get(b, second.id).state == "cancelled"
    assert jobs.claim(second.id) == "skip" and not jobs.cancel(b, second.id)
    assert jobs.get(a, gallery.id).place == 2


def test_running_job_cancels_at_its_next_report(root: str):
    jobs, ws = job_store_at(root), _ws(root)
    job = jobs.submit(ws, "wait", {"steps": 50, "seconds": 0.01})
    assert jobs.claim(job.id) == "run"
    assert jobs.cancel(ws, job.id)
    run_claimed(jobs, job.id, ws)
    done = jobs.get(ws, job.id)
    assert done.state == "cancelled" and "cancelled" in done.error and done.fraction < 1


def test_workspace_cap_makes_extra_jobs_wait(root: str):
    jobs, a, b = job_store_at(root), _ws(root), _ws(root)
    ids = [jobs.submit(a, "wait", {**FAST, "n": i}).id for i in range(3)]
    other = jobs.submit(b, "wait", FAST).id
    assert [jobs.claim(i, cap=2) for i in ids] == ["run", "run", "wait"]
    assert jobs.claim(other, cap=2) == "run"  # another workspace is not held back
    assert jobs.get(a, ids[2]).state == "queued"


def test_a_dead_worker_marks_its_job_interrupted(root: str):
    jobs, ws = job_store_at(root), _ws(root)
    job = jobs.submit(ws, "wait", FAST)
    assert jobs.claim(job.id) == "run"
    with jobs._tx() as c:  # the worker's process is gone (no process has this id)
        c.execute("UPDATE jobs SET pid = 2147483646 WHERE id = ?", (job.id,))
    seen = jobs.get(ws, job.id)
    assert (seen.state, seen.error) == ("interrupted", INTERRUPTED)


def test_disk_full_fails_the_job_and_keeps_the_workspace(root: str, monkeypatch):
    set_immediate(root)
    try:
        jobs, ws = job_store_at(root), _ws(root)
        store_at(root).put(ws, "result", "earlier.json", {}, b"{}")

        def full(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(WorkspaceStore, "put_file", full)
        job = jobs.submit(ws, "wait", {**FAST, "artifact": "big.bin"})
        assert job.state == "failed" and "disk is full" in job.error
        items = store_at(root).items(ws, "result") + store_at(root).items(ws, "artifact")
        assert [i.name for i in items] == ["earlier.json"]
        assert store_at(root).read(ws, "result", "earlier.json") == b"{}"
    finally:
        set_immediate(root, False)


def test_json_serializer_carries_messages_and_refuses_objects():
    s = JsonSerializer()
    eta = datetime.datetime(2026, 12, 6, 4, 0, 0)
    msg = Message(
        "id1", "execute", eta, 0, 0, 10, ["job", "/data", "ws"], {}, None, None, None, None, None, None
    )
    data = s.serialize(msg)
    assert json.loads(data)["__message__"]["args"] == ["job", "/data", "ws"] and b"pickle" not in data
    assert s.deserialize(data) == msg._replace(args=["job", "/data", "ws"])
    with pytest.raises(TypeError, match="plain JSON"):
        s.serialize(Message("x", "y", None, 0, 0, 0, [object()], {}, None, None, None, None, None, None))


def test_store_is_schema_versioned(root: str):
    assert JobStore(root).schema_version() == 1


def test_deleting_or_pruning_a_workspace_removes_its_job_records(root: str, monkeypatch, capsys):
    monkeypatch.setenv("TOKLAB_DATA", root)
    jobs, a, b = job_store_at(root), _ws(root), _ws(root)
    ja, jb = jobs.submit(a, "wait", FAST), jobs.submit(b, "wait", FAST)  # no worker: both stay queued
    # deleting a workspace (the sidebar's "Delete now" calls both) forgets its jobs, not another's
    store_at(root).delete(a)
    assert jobs.forget(a) == 1 and jobs.jobs(a) == [] and jobs.get(a, ja.id) is None
    assert jobs.get(b, jb.id) is not None and jobs.forget("not-an-id") == 0
    # the operator's prune removes the records of every workspace it removed
    assert main(["workspaces", "prune", "--idle-days", "0", "--dry-run"]) == 0
    assert jobs.get(b, jb.id) is not None and "job record" not in capsys.readouterr().out
    assert main(["workspaces", "prune", "--idle-days", "0"]) == 0
    out = capsys.readouterr().out
    assert "removed 1 workspace(s)" in out and "; 1 job record(s)" in out and jobs.jobs(b) == []
    assert main(["workspaces", "prune", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs_removed"] == 0

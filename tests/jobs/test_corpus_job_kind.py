"""The corpus job as a job kind of the queue (analysis.jobs.corpus_job, kind "corpus-stats"), with huey in immediate
mode (the job runs in this process; its counting in a process group of its own): the job's result read back equals
the direct engine call on the same small corpus (key order included) (server files and an upload stored in the workspace), identical
inputs run once, the workdir goes when the job ends, a file outside the allowed folders fails the job, and Cancel
stops the counting processes at once."""

from __future__ import annotations

import gzip
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import FLORES, load_shared

from analysis.core.workspace import store_at
from analysis.errors import DataError
from analysis.jobs import ExecutorConfig, compute
from analysis.jobs import corpus_job as cj
from analysis.jobs.queue import job_store_at, run_claimed, set_immediate
from analysis.tokenizer.export import library_zip

DEVTEST = FLORES / "devtest"
FILES = [str(DEVTEST / "est_Latn.devtest")]
TOKS = "job-inputs/gpt2.zip"


@pytest.fixture
def data(tmp_path: Path, monkeypatch) -> str:
    """A data folder with huey in immediate mode; server paths allowed under the FLORES devtest folder; the job's
    workdirs in a cache of the test's own."""
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(DEVTEST))
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    root = str((tmp_path / "data").resolve())
    set_immediate(root)
    yield root
    set_immediate(root, False)


def _workspace(root: str, upload: bytes) -> tuple[str, list[tuple[str, str]]]:
    ws = store_at(root).create()
    store_at(root).put(ws, "artifact", TOKS, {}, library_zip({"gpt2": load_shared("gpt2")}))
    store_at(root).put(ws, "artifact", "job-inputs/corpus-up", {}, upload)
    return ws, [("job-inputs/corpus-up", "my corpus.txt.gz")]


def _params(stat: str, uploads: list[tuple[str, str]], files: list[str] = FILES) -> dict:
    return cj.corpus_params(TOKS, stat, {}, files, uploads, 2, cj.files_fingerprint(files))


def _workdirs(tmp_path: Path) -> list[Path]:
    found = (tmp_path / "cache" / "corpus-jobs").glob("*")
    return [p for p in found if p.name != "uploads" and p.is_dir()]


@pytest.mark.slow
def test_the_jobs_result_is_the_engines(data: str, tmp_path: Path):
    lines = [f"Tere, maailm number {i}! Kas see töötab?" for i in range(400)]
    up = tmp_path / "my corpus.txt.gz"  # what the user uploaded, as the direct call reads it
    up.write_bytes(gzip.compress("\n".join(lines).encode("utf-8")))
    ws, uploads = _workspace(data, up.read_bytes())
    jobs, gpt2 = job_store_at(data), load_shared("gpt2")
    job = jobs.submit(ws, cj.KIND, _params("words", uploads), label="words")
    assert job.state == "done", job.error
    doc = job.result
    assert doc["inputs"] == [*FILES, "my corpus.txt.gz"] and doc["workers"] == 2 and doc["shards"] == 2
    assert any(line.startswith("counting") for line in job.log) and "storing the result" in job.log
    words = cj.corpus_result(gpt2, doc, store_at(data).file_path(ws, "artifact", doc["counts"]))
    # the direct engine call the page made before (the local executor, 2 workers): equal, in the same order
    local = ExecutorConfig(kind="local", workers=2, workdir=str(tmp_path / "direct"))
    direct = compute(gpt2, "words", [*FILES, str(up)], executor=local).result
    assert list(words.words.items()) == list(direct.words.items()) and len(direct.words) > 1000
    assert (words.units, words.chars, words.mode) == (direct.units, direct.chars, direct.mode)
    # identical inputs: the same job, not run again; the workdir went with the job
    assert jobs.submit(ws, cj.KIND, _params("words", uploads)).id == job.id
    assert _workdirs(tmp_path) == []
    # read with another tokenizer: refused, never misread
    other = SimpleNamespace(content_hash="0" * 16, name="another")
    with pytest.raises(DataError, match="another tokenizer"):
        cj.corpus_result(other, doc, Path(data))


def test_a_file_outside_the_allowed_folders_fails_the_job(data: str, tmp_path: Path):
    ws, uploads = _workspace(data, b"one line\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("not for this job\n", encoding="utf-8")
    job = job_store_at(data).submit(ws, cj.KIND, _params("pretokens", [], [str(outside)]))
    assert job.state == "failed" and "outside the allowed folders" in job.error


def test_cancel_stops_the_counting_processes(data: str, tmp_path: Path, monkeypatch):
    # queued; this test runs it as a worker would, cancelling once counting started
    set_immediate(data, False)
    ws, uploads = _workspace(data, b"one line\n")
    jobs = job_store_at(data)
    job = jobs.submit(ws, cj.KIND, _params("words", uploads))
    started = []

    def start_then_cancel(*args, **kwargs):
        bg = real_start(*args, **kwargs)
        started.append(bg)
        assert jobs.cancel(ws, job.id)  # the user presses Cancel while the counting process runs
        return bg

    real_start = cj.start
    monkeypatch.setattr(cj, "start", start_then_cancel)
    assert jobs.claim(job.id) == "run"
    run_claimed(jobs, job.id, ws)
    assert jobs.get(ws, job.id).state == "cancelled"
    proc = started[0]._proc
    assert proc.returncode is not None and proc.returncode < 0  # stopped by a signal, not finished
    assert _workdirs(tmp_path) == []

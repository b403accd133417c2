"""The example gallery's build as a job (ui/gallery.py → analysis.views.app_jobs.gallery_job): submitted once per
server at the background priority in the server's own workspace, run by a worker (here: this process, as a worker
would), never by a thread of the server; the page then shows the stored gallery."""

from __future__ import annotations

import threading

import pytest
from streamlit.testing.v1 import AppTest
from support import FLORES, ROOT, TOKENIZERS, static_tables

import analysis.views.gallery as gallery
import ui.gallery as ui_gallery
from analysis.core import paths
from analysis.jobs.queue import BACKGROUND_PRIORITY, default_jobs, run_claimed

LANGS = ("eng_Latn", "est_Latn")
FOLDERS = {"gpt2": TOKENIZERS / "gpt2"}


@pytest.fixture
def small_world(tmp_path, monkeypatch):
    """Two FLORES languages, one example tokenizer, an empty disk store, a fresh build state."""
    d = tmp_path / "flores"
    d.mkdir()
    for c in LANGS:
        (d / f"{c}.devtest").write_bytes((FLORES / "devtest" / f"{c}.devtest").read_bytes())
    monkeypatch.setenv("TOKLAB_FLORES", str(d))
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOKLAB_GALLERY_AUTOSTART", "1")
    monkeypatch.setattr(gallery, "example_folders", lambda: dict(FOLDERS))
    monkeypatch.setattr(gallery, "fetched_models", lambda: [])
    ui_gallery._build_state.clear()
    yield d
    ui_gallery._build_state.clear()


def test_gallery_build_is_a_background_job_of_a_worker(small_world):
    """The build is a job (kind ``gallery``, background priority) of the server's workspace, submitted once per
    server: no thread of the server computes; once a worker ran it, the page shows the stored gallery."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/gallery.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not any(t.name == "toklab-gallery" for t in threading.enumerate())
    ws = (paths.data_dir() / ui_gallery.WORKSPACE_FILE).read_text().strip()
    jobs = default_jobs()
    (job,) = jobs.jobs(ws)
    assert job.kind == "gallery" and job.state == "queued" and jobs._priority(job.id) == BACKGROUND_PRIORITY
    assert any("being computed by a background job" in i.value for i in at.info)
    at.run()  # once per server: the same job, no second one
    assert [j.id for j in jobs.jobs(ws)] == [job.id]
    assert jobs.claim(job.id) == "run"
    run_claimed(jobs, job.id, ws)
    done = jobs.get(ws, job.id)
    assert done.state == "done" and sorted(done.result["computed"]) == sorted(FOLDERS), done.error
    assert any("stored gpt2" in line for line in done.log) and any("computing" in line for line in done.log)
    at.run()
    assert not at.exception and not any("ready; the rest" in i.value for i in at.info)
    assert "gpt2" in static_tables(at)[0].set_index("Tokenizer").index

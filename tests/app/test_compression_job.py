"""Compression beyond a few cells runs as a job (pages/compression.py → analysis.views.app_jobs.compression_job):
the page submits it instead of computing, shows it queued, and a new session of the same workspace (a reload)
shows its table once a worker ran it — the same rows as the in-page computation (grid.compression_table)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest
from support import FLORES, ROOT

from analysis.core.workspace import default_store
from analysis.jobs.queue import default_jobs, run_claimed
from analysis.measure import grid
from analysis.texts import flores as fl
from analysis.views.app_jobs import COMPRESSION_JOB_CELLS
from ui.memory import resolve

LANGS = ["eng_Latn", "est_Latn", "deu_Latn", "fra_Latn", "fin_Latn", "rus_Cyrl", "ukr_Cyrl", "hin_Deva", "zho_Hans",
         "jpn_Jpan", "kor_Hang", "arb_Arab", "lvs_Latn", "lit_Latn", "pol_Latn", "spa_Latn", "ita_Latn"]  # fmt: skip
NAMES = ["Qwen (embedded)"]


def _session(ws: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["toklab-ws"] = ws
    at.run()
    at.switch_page("pages/compression.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _table(at: AppTest):
    for d in at.dataframe:
        if {"tokenizer", "lang", "bytes_per_token", "parity"} <= set(d.value.columns):
            return d.value
    return None


@pytest.mark.slow
def test_many_cells_run_as_a_job_and_come_back_after_a_reload(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKLAB_FLORES", str(FLORES))
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    assert len(NAMES) * len(LANGS) > COMPRESSION_JOB_CELLS
    ws = default_store().create()
    at = _session(ws)
    at.multiselect(key="cmp-toks").set_value(NAMES).run()
    at.multiselect(key="cmp-langs").set_value(LANGS).run()
    at.button(key="cmp-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    # submitted, not computed: queued (no worker in this test), no table
    bar = at.get("progress")
    assert bar and "Compression · Queued" in bar[0].proto.text and _table(at) is None
    job_id = default_store().inputs(ws)["job:compression"]
    jobs = default_jobs()
    assert jobs.get(ws, job_id).kind == "compression"
    # the same inputs again: the same job
    at.button(key="cmp-run").click().run()
    assert default_store().inputs(ws)["job:compression"] == job_id
    # a worker runs it (here, in this process); a reload shows its table
    assert jobs.claim(job_id) == "run"
    run_claimed(jobs, job_id, ws)
    done = jobs.get(ws, job_id)
    assert done.state == "done", done.error
    again = _session(ws)
    if again.multiselect(key="cmp-langs").value != LANGS:  # the page's inputs as the workspace keeps them
        again.multiselect(key="cmp-langs").set_value(LANGS).run()
    attached = default_jobs().get(ws, default_store().inputs(ws)["job:compression"])
    assert attached.id == job_id, (attached.params, done.params)  # re-attached, not submitted anew
    table = _table(again)
    assert table is not None and len(table) == len(NAMES) * len(LANGS) and not again.get("progress")
    # the numbers of the in-page computation, cell for cell
    lib = again.session_state["toklab_library"]
    direct = grid.compression_table(
        [resolve(lib[n]) for n in NAMES], fl.open_flores(str(FLORES)), LANGS, names=NAMES
    )
    assert json.dumps(done.result["rows"], sort_keys=True) == json.dumps(direct, sort_keys=True)

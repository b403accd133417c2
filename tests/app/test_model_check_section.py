"""AppTest: the Model check section of Extend, Prune and Token reuse measures the edit made in the browser session
with server paths OFF, as a job of the workers (analysis.jobs.queue; its cancel and faults: tests/jobs): the page
submits the edit's recipe, a worker rebuilds the edited model from it (the demo SmolLM2) and checks it; the download
names no server or temporary path. The section has no other way to run (the server-thread version is gone).
"""

from __future__ import annotations

import json
import tempfile
import zipfile

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared, need_smollm, run_page_job

from analysis.core.workspace import default_store
from analysis.jobs.queue import default_jobs
from analysis.tokenizer.defaults import DEFAULT_NAME, default_tokenizer
from ui.loaders import fetched_models
from ui.workspace import WS_KEY

pytestmark = [need_smollm, pytest.mark.slow]


def _smol_label() -> str:
    return next(k for k, v in fetched_models().items() if str(v).endswith(".gguf"))


def _app(page: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {
        DEFAULT_NAME: default_tokenizer(),
        "smollm2": load_shared("smollm2-135m-instruct"),
    }
    at.run()
    at.switch_page(page).run()
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]


def _job_check(at: AppTest, key: str, langs: list[str], *, kept: bool) -> dict:
    """Run the section's check as a worker would; `kept`: whether the edited model is kept as a zip (Extend and
    Prune leave that to their own model export: one copy of a model in the workspace, not two)."""
    at.multiselect(key=f"{key}-langs").set_value(langs).run()
    at.number_input(key=f"{key}-lines").set_value(2).run()
    at.button(key=f"{key}-run").click().run()
    _ok(at)
    ws = at.session_state[WS_KEY]
    assert default_jobs().get(ws, default_store().inputs(ws)["job:" + key]).state == "queued" and at.get(
        "progress"
    )
    job = run_page_job(
        at, key
    )  # a worker runs it (here this process, as a worker process would: claim, then run)
    assert job is not None and job.state == "done", job
    at.run()
    _ok(at)
    links = [b for b in at.get("link_button") if "edited model" in b.proto.label]
    if kept:
        assert default_store().file_path(ws, "artifact", job.result["model_artifact"]) is not None
        # the edited model: a streamed link to the workspace artifact (ui.downloads), beside the JSON download
        assert links and all("/toklab/file/" in b.proto.url for b in links)
    else:
        assert "model_artifact" not in job.result and not links
        assert not [i for i in default_store().items(ws, "artifact") if not i.name.startswith("job-inputs/")]
    assert at.get("download_button")
    # under the result, the equivalent command with the lines the page measured
    assert any("model-check" in c.value and "--lines 2" in c.value for c in at.code), [
        c.value for c in at.code
    ]
    return job.result


def test_extend_checks_the_session_edit_as_a_job(monkeypatch):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    at = _app("pages/extend.py")
    at.selectbox(key="ext-tok").set_value("smollm2").run()
    at.multiselect(key="ext-corpora").set_value([]).run()
    at.multiselect(key="ext-others").set_value([]).run()
    at.multiselect(key="ext-methods").set_value(["continued"]).run()
    at.number_input(key="ext-nmax").set_value(60).run()
    at.button(key="ext-train").click().run()
    at.slider(key="ext-n").set_value(60).run()
    at.button(key="ext-build").click().run()
    _ok(at)
    at.selectbox(key="ext-model-kind").set_value(_smol_label()).run()
    # the check is a job of the workers: its id is kept in the workspace, its document is the job's result, the
    # edited model a workspace artifact
    doc = _job_check(at, "ext-mc", ["est_Latn", "eng_Latn"], kept=False)
    est, eng = doc["languages"]
    assert (est["lang"], eng["lang"], est["lines"]) == ("est_Latn", "eng_Latn", 2)
    assert est["tokens_per_byte_edited"] < est["tokens_per_byte_original"] and doc["n_new_tokens"] == 60
    assert 0 <= est["mass_new_on_old_text"] <= 1 and eng["kl_unchanged"] >= 0
    text = str(doc)
    assert tempfile.gettempdir() not in text and "toklab-model-check" not in text
    assert at.get("plotly_chart") and at.get("download_button")
    # the bars' axis is zoomed to the values (from 0, a difference of 0.01 bits per byte was invisible); the
    # table's headers are words, not the document's keys
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bpb = next(s for s in specs if "held-out bytes" in str(s["layout"].get("title")))["layout"]["yaxis"][
        "range"
    ]
    values = [r[f"bpb_{m}"] for r in doc["languages"] for m in ("original", "edited")]
    assert 0 < bpb[0] < min(values) and max(values) < bpb[1]
    # the page also shows a robustness table with a "Language" column: the model check's is the one with bits/byte
    table = next(f.value for f in at.dataframe if any("Bits/byte" in c for c in f.value.columns))
    assert {"Bits/byte, original", "Δ bits/byte", "KL on unchanged spans (nats)"} <= set(table.columns)


def test_prune_checks_the_session_edit(monkeypatch):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    at = _app("pages/prune.py")
    at.selectbox(key="prune-tok").set_value("smollm2").run()
    at.number_input(key="prune-n").set_value(300).run()
    _ok(at)
    at.selectbox(key="prune-mc-model-kind").set_value(_smol_label()).run()
    doc = _job_check(at, "prune-mc", ["eng_Latn"], kept=False)
    (eng,) = doc["languages"]
    assert doc["n_removed_tokens"] == 300 and doc["n_new_tokens"] == 0
    assert eng["mass_removed"] is not None and 0 <= eng["mass_removed"] < 1
    assert eng["tokens_per_byte_edited"] >= eng["tokens_per_byte_original"]
    # no new rows: the flag section says so (the rule and its table: analysis.evaluate.flags, ui.model_check)
    assert doc["flagged_new_rows"] == [] and any(c.value == "None flagged." for c in at.caption)


def test_reuse_checks_the_session_edit(monkeypatch):
    """R-BPE on SmolLM2 (few reusable ids: threshold 100): the reused ids are new and removed at once."""
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    at = _app("pages/reuse.py")
    at.selectbox(key="reuse-tok").set_value("smollm2").run()
    at.number_input(key="reuse-h").set_value(100).run()
    at.button(key="reuse-train").click().run()
    _ok(at)
    at.selectbox(key="reuse-mc-model-kind").set_value(_smol_label()).run()
    doc = _job_check(at, "reuse-mc", ["arb_Arab", "eng_Latn"], kept=False)  # the model export below keeps it
    arb, eng = doc["languages"]
    assert doc["n_new_tokens"] == doc["n_removed_tokens"] > 0 and "bakeoff" not in doc
    assert arb["mass_removed"] is not None and eng["tokens_edited"] == eng["tokens_original"]
    # the model with the reused rows re-initialised: a model-export job into this workspace (server paths off), the
    # one copy of the model there (two copies of a 135M model in f32 would fill the default 1 GB quota)
    at.selectbox(key="reuse-model-kind").set_value(_smol_label()).run()
    at.button(key="reuse-model-ws-build").click().run()
    _ok(at)
    ws = at.session_state[WS_KEY]
    job = run_page_job(at, "reuse-model-ws")
    assert job.state == "done", job.error
    [(name, _)] = job.result["artifacts"]
    with zipfile.ZipFile(default_store().file_path(ws, "artifact", name)) as zf:
        members = {m.split("/", 1)[1] for m in zf.namelist()}
    assert "rbpe_mapping.json" in members and any(m.endswith(".safetensors") for m in members), members
    at.run()
    _ok(at)

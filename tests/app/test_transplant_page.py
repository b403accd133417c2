"""AppTest: the Transplant page gives the demo SmolLM2 the session's Qwen tokenizer (random rows: the fast init) as
a job of the workers and measures it per language like the CLI; it shows the equivalent command and where the rows came
from, and its downloads name no server path. The engine is tested in tests/adapt/test_transplant.py."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, need_smollm

from analysis.core.workspace import default_store
from analysis.jobs.queue import default_jobs, run_claimed
from analysis.tokenizer.defaults import DEFAULT_NAME, default_tokenizer
from ui.loaders import fetched_models
from ui.workspace import WS_KEY

pytestmark = pytest.mark.slow


def _app() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {DEFAULT_NAME: default_tokenizer()}
    at.run()
    at.switch_page("pages/transplant.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_page_asks_for_a_model_then_shows_the_command():
    at = _app()
    assert any("Choose the model" in i.value for i in at.info)
    assert not at.code


@need_smollm
def test_page_transplants_as_a_job_and_measures_it(monkeypatch):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    at = _app()
    smol = next(k for k, v in fetched_models().items() if str(v).endswith(".gguf"))
    at.selectbox(key="tp-model-kind").set_value(smol).run()
    at.selectbox(key="tp-init").set_value("random").run()
    assert "analysis transplant --model" in at.code[0].value and "--init random" in at.code[0].value
    assert "--langs est_Latn,eng_Latn --lines 20" in at.code[0].value  # the model check's defaults, stated
    at.multiselect(key="tp-check-langs").set_value(["est_Latn"]).run()
    at.number_input(key="tp-check-lines").set_value(2).run()
    at.button(key="tp-check-run").click().run()
    # the transplant and its check are a job of the workers (here run by this process, as a worker would)
    ws = at.session_state[WS_KEY]
    jobs, job_id = default_jobs(), default_store().inputs(ws)["job:tp-check"]
    assert jobs.claim(job_id) == "run"
    run_claimed(jobs, job_id, ws)
    at.run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    doc = jobs.get(ws, job_id).result
    row = doc["languages"][0]
    assert row["lang"] == "est_Latn" and row["bpb_edited"] > 0 and row["bpb_original"] > 0
    report = doc["edit_report"]
    assert report["copied"] > 30_000 and report["initialised"] > 0 and report["tokenizer"] == DEFAULT_NAME
    assert "source_ids" not in report and "/" not in report["model"]
    assert at.get("plotly_chart") and at.get("download_button")

"""AppTest: the Transplant page asks for a model, shows the equivalent command with the model check's defaults, and
submits the transplant of the demo SmolLM2 to the session's Qwen tokenizer (random rows) as one job of the workers.
The job's run and its result on the page are the browser journey's (tests/e2e/test_change_pages_e2e.py); the engine
is tested in tests/adapt/test_transplant.py."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, need_smollm

from analysis.core.workspace import default_store
from analysis.jobs.queue import default_jobs
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
def test_page_submits_the_transplant_as_a_job_with_the_check_s_choices(monkeypatch):
    """The page's inputs become one job of the workers (the transplant and its model check, with B stored in the
    workspace); the browser journey (tests/e2e/test_change_pages_e2e.py) runs such a job and reads its result."""
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
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    ws = at.session_state[WS_KEY]
    job = default_jobs().get(ws, default_store().inputs(ws)["job:tp-check"])
    assert job is not None and job.state == "queued"
    p = job.params
    assert (job.kind, p["op"], p["init"], p["names"]) == (
        "model-check",
        "transplant",
        "random",
        {"edited": DEFAULT_NAME},
    )
    assert (p["langs"], p["lines"], p["model"]) == (["est_Latn"], 2, str(fetched_models()[smol]))
    default_jobs().cancel(ws, job.id)

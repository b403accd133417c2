"""AppTest for the SA-BPE page on a slice of the shared code corpus: it trains plain BPE and source-attributed
BPE and compares them (a skip rule re-trains only SA-BPE), and its JSON report is the CLI's `sabpe --json`. The
engine is tested in tests/methods/sabpe/."""

from __future__ import annotations

import json

import pytest
from download_support import record_downloads, without_timings
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared

from analysis.cli import main
from analysis.commands._equivalent import argv_of
from analysis.core.paths import public_document
from analysis.tokenizer.defaults import DEFAULT_NAME, default_tokenizer


@pytest.mark.slow
def test_page_trains_and_compares():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/sabpe.py").run()
    assert not at.exception, [e.message for e in at.exception]
    at.multiselect(key="sa-langs").set_value(["lua", "ruby"]).run()
    at.number_input(key="sa-files").set_value(1).run()
    at.number_input(key="sa-vocab").set_value(600).run()
    at.button(key="sa-train").click().run()
    assert not at.exception, [e.message for e in at.exception]
    table = at.dataframe[0].value.set_index("metric")
    assert list(table.columns) == ["BPE (F, no skipping)", "SA-BPE (F*log(R)*L, no skipping)"]
    share = table.loc[[m for m in table.index if m.startswith("single-repo tokens, %")][0]]
    assert share.iloc[1] <= share.iloc[0]
    assert at.get("plotly_chart")
    assert at.get("download_button")
    # a skip rule re-trains only SA-BPE (plain BPE comes from the cache) and is shown in the column label
    at.number_input(key="sa-min-r").set_value(2).run()
    at.button(key="sa-train").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert list(at.dataframe[0].value.columns)[-1] == "SA-BPE (F*log(R)*L, skip R<2)"


@pytest.mark.slow
def test_page_report_is_the_cli_json(monkeypatch, capsys):
    """The page trains through SabpeComparison and offers its to_json: what its equivalent command prints with
    --json (timings apart; --no-robustness: the page measures robustness on request)."""
    seen = record_downloads(monkeypatch)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["toklab_library"] = {DEFAULT_NAME: default_tokenizer(), "gpt2": load_shared("gpt2")}
    at.run()
    at.switch_page("pages/sabpe.py").run()
    at.selectbox(key="sa-base").set_value("gpt2").run()
    at.multiselect(key="sa-langs").set_value(["lua", "ruby"]).run()
    at.number_input(key="sa-files").set_value(1).run()
    at.number_input(key="sa-vocab").set_value(600).run()
    at.button(key="sa-train").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    page_doc = json.loads(seen["sa-dl-report"])
    (command,) = [c.value for c in at.code if c.language == "bash" and "python -m analysis sabpe" in c.value]
    assert command == (
        "python -m analysis sabpe --base $TOKLAB_ASSETS/tokenizers/gpt2 --languages lua,ruby --max-files-per-repo 1 "
        "--vocab-size 600 --priority 'F*log(R)*L' --min-sources 1 --min-languages 1 --no-robustness --json"
    )
    capsys.readouterr()
    assert main(argv_of(command)) == 0  # the command the page shows
    cli_doc = json.loads(capsys.readouterr().out)
    cli_doc.pop("counting")  # how the CLI counted (executor, shards); the page read the shared corpus itself
    assert without_timings(page_doc) == without_timings(public_document(cli_doc))  # the corpus by name
    assert page_doc["language_compression"]["rows"] and page_doc["sabpe"]["metrics"]["bytes_per_token"] > 1
    # the per-language table is shown, with readable headers ("bpe_bytes_per_token" before)
    lang = next(d.value for d in at.dataframe if d.value.columns[0] == "Language")
    assert any(c.endswith(": bytes/token") for c in lang.columns) and not any("_" in c for c in lang.columns)

"""AppTest for the Reuse page (R-BPE token reuse): the plan, training, the before/after table and the export,
the collateral table of what the reuse breaks, and the page's JSON report, which is the CLI's `reuse --json`.
The engine itself is tested in tests/methods/reuse/."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout

import pytest
from download_support import record_downloads, without
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared, static_tables

from analysis.cli import main
from analysis.commands._equivalent import argv_of
from analysis.texts.flores import FLORES_TRAIN_LINES


def _table(at: AppTest, *columns: str):
    """The page's dataframe that has these columns."""
    return next(d.value for d in at.dataframe if set(columns) <= set(d.value.columns))


def _page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/reuse.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.slow
def test_page_trains_previews_and_exports():
    at = _page()
    assert not at.get("plotly_chart")  # static first: the classes chart is SVG, one bar per class
    svg = next(m.value for m in at.markdown if m.value.startswith('<svg class="tl-svg-chart"'))
    assert "Cyrillic: reused" in svg
    assert not at.dataframe, "the first view is static: no grid module to load"
    selected = next(t for t in static_tables(at) if list(t.columns) == ["class", "tokens"])
    assert "Cyrillic" in set(selected["class"]) and (selected["tokens"] > 0).all()
    at.toggle(key="reuse-plotly").set_value(True).run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["type"] == "bar" and "Cyrillic" in spec["data"][0]["x"]
    bars = dict(zip(spec["data"][0]["x"], spec["data"][0]["y"]))
    tips = dict(re.findall(r"<title>([^<:]+): \w+ ([\d,]+)</title></rect>", svg))
    assert {k: int(v.replace(",", "")) for k, v in tips.items()} == bars  # the same 40 classes and counts
    at.toggle(key="reuse-plotly").set_value(False).run()
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Reusable ids"].replace(",", "")) > 10000
    # shared symbols (✔, ❤, the danda) are protected by default: the page's own sample stays intact
    assert at.multiselect(key="reuse-protect").value == ["symbols"]
    assert int(metrics["Protected ids"].replace(",", "")) > 0
    at.multiselect(key="reuse-protect").set_value([]).run()
    assert {m.label: m.value for m in at.metric}["Protected ids"] == "0"
    at.multiselect(key="reuse-protect").set_value(["symbols"]).run()
    at.button(key="reuse-train").click().run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    table = _table(at, "measure").set_index(["language", "measure"])
    arb, eng = table.loc["arb_Arab"], table.loc["eng_Latn"]
    assert arb.loc["fertility", "after"] < arb.loc["fertility", "before"]
    assert arb.loc["premium vs English", "after"] < arb.loc["premium vs English", "before"]
    assert (eng["after"] == eng["before"]).all()
    assert any("decode as the target" in w.value for w in at.warning)
    assert len([h for h in at.get("html") if "tl-spans" in h.proto.body]) >= 2
    assert at.get("download_button")
    at.button(key="reuse-rob-run").click().run(timeout=120)
    rob = _table(at, "Language", "STRR before", "STRR after").set_index("Language")
    assert set(rob.index) == {"arb_Arab", "eng_Latn"} and not at.exception
    # another target: the plan updates, the trained Arabic tokenizer is no longer shown
    at.selectbox(key="reuse-target").set_value("greek").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Train the new tokenizer" in i.value for i in at.info)


@pytest.mark.slow
def test_page_report_is_the_cli_json(monkeypatch):
    """ "Download the report (JSON)" is what the page's equivalent command (`reuse … --json`, shown under the
    results) prints for the same tokenizer, target and training text (FLORES lines only: --no-corpora), build time
    aside; both measure English too."""
    got = record_downloads(monkeypatch)
    at = _page()
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], "gpt2": load_shared("gpt2")}
    at.run()
    at.selectbox(key="reuse-tok").set_value("gpt2").run()
    at.button(key="reuse-train").click().run(timeout=120)
    assert not at.exception and not at.error, [e.message for e in at.exception]
    page = json.loads(got["reuse-report"])
    (command,) = [c.value for c in at.code if c.language == "bash" and "python -m analysis reuse" in c.value]
    assert command.startswith("python -m analysis reuse $TOKLAB_ASSETS/tokenizers/gpt2 --target arabic")
    assert "--no-corpora" in command and "--collateral none" in command and "--min-frequency 2" in command
    assert command.endswith("--no-robustness --json")  # the page measures robustness on request
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(argv_of(command))
    assert rc == 0
    cli = json.loads(buf.getvalue())
    assert page["base"] == "gpt2" and page["heldout"]["lang"] == "arb_Arab" and "collateral" not in page
    eng = page["heldout_reference"]
    assert eng["lang"] == "eng_Latn" and eng["before"]["fertility"] == eng["after"]["fertility"]
    assert page["reusable_count"] > 0 and page["heldout"]["lines"] == 1012 - FLORES_TRAIN_LINES
    assert without(page, {"seconds"}) == without(cli, {"seconds"})


@pytest.mark.slow
def test_page_collateral_table():
    at = _page()
    # the unicode17 rules make more classes eligible (Qwen: 92 instead of 40)
    eligible = int({m.label: m.value for m in at.metric}["Eligible classes"])
    at.radio(key="reuse-rules").set_value("unicode17").run()
    assert int({m.label: m.value for m in at.metric}["Eligible classes"]) > eligible
    at.radio(key="reuse-rules").set_value("paper").run()
    at.button(key="reuse-train").click().run(timeout=120)
    at.button(key="reuse-collateral-run").click().run(timeout=600)
    assert not at.exception, [e.message for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    broken = int(metrics["Languages that no longer round-trip"].split()[0])
    assert 20 < broken < 204  # the default tokenizer (Qwen): Cyrillic, CJK, Thai, Hebrew … are reused
    table = _table(at, "example")
    assert len(table) == broken and "rus_Cyrl" in set(table["lang"]) and "eng_Latn" not in set(table["lang"])
    assert int(metrics["…in a kept script (collateral)"]) == int((table["role"] == "kept").sum())
    assert all("→" in e for e in table["example"])
    fert = _table(at, "class", "after").set_index("class")
    assert fert.loc["Arabic", "after"] < fert.loc["Arabic", "before"]

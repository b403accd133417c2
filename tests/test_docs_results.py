"""The measured results are generated, not typed: docs/results.md, its plots and the time table of docs/tests.md are
what `bench/report.py` renders from `bench/results/*.json` now; every bench writes its figures through
`bench/_results.py`; the README stays a front door (within its size, no dated timings)."""

from __future__ import annotations

import argparse
import json
import re
import sys

import pytest
from support import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import _results  # noqa: E402
import bench_suite  # noqa: E402
import report  # noqa: E402

#: The scripts that measure something (helpers and the renderer excluded): each writes a results file.
BENCHES = sorted(
    p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_") and p.name != "report.py"
)  # fmt: skip


def test_generated_documents_are_what_report_renders_now():
    """Edit a results file (or the report) and run `.venv/bin/python bench/report.py`, never the documents."""
    stale = [
        str(path.relative_to(ROOT))
        for path, text in report.outputs().items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"out of date, run .venv/bin/python bench/report.py: {stale}"


def test_every_results_file_has_the_envelope():
    """Date, commit, machine, load, command, figures and targets in every bench's file (raw GPU summaries aside)."""
    docs = _results.load_all()
    assert len(docs) >= 20
    for stem, doc in docs.items():
        if "script" not in doc:
            continue  # a raw summary written before bench/_results.py
        missing = [k for k in _results.REQUIRED if k not in doc]
        assert not missing, (stem, missing)
        assert doc["figures"], stem
        if doc["variant"] and doc["variant"].endswith("transcribed"):
            assert doc["source"].startswith("transcribed from ") and " at commit " in doc["source"], stem


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.name)
def test_every_bench_writes_its_results(path):
    """A bench's figures reach bench/results/ through the one helper (and so docs/results.md)."""
    text = path.read_text(encoding="utf-8")
    assert "from _results import" in text and re.search(r"\brun\.write\(", text), path.name


def test_a_run_writes_a_results_file_and_the_report_renders_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_BENCH_RESULTS", str(tmp_path))
    run = _results.Run("bench/bench_tiny.py", variant="x", argv=["bench/bench_tiny.py", "--n", "3"])
    out = run.write(
        {"ratio": 0.75, "rows": [{"lang": "est_Latn", "s": 1.5}]}, targets={"ratio": "<= 1"}, met=True
    )
    assert out == tmp_path / "bench_tiny-x.json"
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert all(k in doc for k in _results.REQUIRED)
    assert doc["command"] == "python bench/bench_tiny.py --n 3" and doc["machine"]["cores"]
    assert re.fullmatch(r"[0-9a-f]{40}", doc["commit"]["sha"])
    md = report.render_results(_results.load_all(tmp_path))
    assert "## bench_tiny" in md and "| ratio | 0.75 |" in md and "| est_Latn | 1.5 |" in md


def test_the_variant_names_what_differs_from_the_defaults():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default="/assets/tokenizers/llama-3.1")
    ap.add_argument("--langs", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hog", action="store_true")
    assert _results.variant_from(ap, ap.parse_args([])) is None
    assert (
        _results.variant_from(ap, ap.parse_args(["--repeat", "1"])) is None
    )  # precision, not what is measured
    got = _results.variant_from(ap, ap.parse_args(["--tokenizer", "/x/gpt2/", "--langs", "2", "--hog"]))
    assert got == "tokenizer-gpt2-langs-2-hog"


def test_suite_times_come_from_pytests_summary_line(tmp_path, monkeypatch):
    assert bench_suite.parse_summary("x\n==== 2 failed, 1,196 passed, 4 warnings in 665.12s (0:11:05) ====\n") == {
        "failed": 2, "passed": 1196, "warnings": 4, "pytest_s": 665.12}  # fmt: skip
    assert bench_suite.parse_summary("894 passed in 101.30s (0:01:41)") == {"passed": 894, "pytest_s": 101.3}
    assert bench_suite.parse_summary("no tests ran") is None
    monkeypatch.setenv("TOKLAB_BENCH_RESULTS", str(tmp_path))
    cmd = f"{sys.executable} -c \"print('3 passed, 1 skipped in 0.52s')\""
    assert bench_suite.main(["--lane", "fast", "--command", cmd]) == 0
    doc = json.loads((tmp_path / "suite-fast.json").read_text(encoding="utf-8"))
    assert doc["figures"]["passed"] == 3 and doc["figures"]["pytest_s"] == 0.52
    rows = report._suite_rows(_results.load_all(tmp_path))
    assert rows[0][0] == "fast lane" and "3 passed" in rows[0][2]


def test_the_readme_is_a_front_door():
    """Issue 55: at most 200 lines and 16,000 characters, no dated timings (they live in bench/results/), and it
    links the documents a newcomer needs."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200 and len(text) <= 16_000
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
    for doc in ("docs/architecture.md", "docs/results.md", "docs/model-check.md", "docs/security.md"):
        assert f"({doc})" in text, doc
    assert "bash scripts/start.sh" in text and "bash .ci/run" in text
    image = re.search(r"!\[[^\]]*\]\((docs/img/[^)]+\.png)\)", text)
    assert image and (ROOT / image.group(1)).stat().st_size < 300_000

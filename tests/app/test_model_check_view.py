"""The Model check section's drawing (ui/model_check.py), without a model: the bars' zoomed axis and the tables'
headers, the equivalent command under a result (the whole section is tested on SmolLM2 in
test_model_check_section.py)."""

from __future__ import annotations

import math

from analysis.evaluate.model_check import HELDOUT_LINES, PAGE_LINES
from ui.model_check import (
    FLAG_HEADERS,
    HEADERS,
    LINES_HELP,
    check_command,
    flag_table,
    human_table,
    zoomed_range,
)


def test_the_bits_per_byte_axis_is_zoomed_to_the_values():
    lo, hi = zoomed_range([1.203, 1.211, 1.198, 1.207])
    assert 1.0 < lo < 1.198 and 1.211 < hi < 1.3  # from 0, a 0.01 difference was a few pixels
    assert zoomed_range([0.5, 0.5])[0] < 0.5 < zoomed_range([0.5, 0.5])[1]  # equal values: still a range
    assert zoomed_range([None, math.nan]) is None
    assert zoomed_range([0.001, 0.002])[0] >= 0  # bits per byte never below 0


def test_the_tables_have_words_for_headers():
    table = human_table([{"lang": "est_Latn", "bpb_original": 1.2, "delta_bpb": -0.01, "kl_unchanged": 0.02}])
    assert list(table.columns) == [
        "Language",
        "Bits/byte, original",
        "Δ bits/byte",
        "KL on unchanged spans (nats)",
    ]
    assert all("_" not in h for h in HEADERS.values())


def test_the_flagged_rows_table_keeps_the_loudest_first_with_words_for_headers():
    rows = [
        {"id": 50300 + i, "token": f"t{i}", "reason": "argmax", "argmax_count": 90 - i, "occurrences": 1,
         "max_prob": 0.9, "misplaced_max_prob": 0.8}
        for i in range(5)
    ]  # fmt: skip
    table = flag_table(rows, limit=3)
    assert list(table.columns) == list(FLAG_HEADERS.values()) and len(table) == 3
    assert list(table["Id"]) == [50300, 50301, 50302]
    assert flag_table([]).empty and list(flag_table([]).columns) == list(FLAG_HEADERS.values())


def test_a_result_names_its_equivalent_command_with_the_lines_it_measured():
    doc = {
        "original": "demo.gguf",
        "languages": [{"lang": "est_Latn", "lines": 20}, {"lang": "eng_Latn", "lines": 20}],
    }
    options = {
        "langs": ["est_Latn"],
        "lines": 5,
        "inits": ["mean", "fvt"],
        "steps": 10,
        "objective": "distill",
    }
    text = check_command(doc, "HuggingFaceTB/SmolLM2-135M", options).text()
    assert text.startswith("python -m analysis model-check") and "--edited EDITED" in text
    # languages and lines as the document measured them (not what the widgets say now); bake-off and warm-up
    assert (
        "--langs est_Latn,eng_Latn --lines 20 --inits mean,fvt --warmup-steps 10 --objective distill" in text
    )
    assert "--lines" not in check_command({"languages": []}, None, None).text()
    # the lines widget says why the page's default is not the CLI's
    assert f"{PAGE_LINES} held-out lines" in LINES_HELP and f"all {HELDOUT_LINES}" in LINES_HELP

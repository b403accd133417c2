"""The Model check section's drawing (ui/model_check.py), without a model: the bars' zoomed axis and the tables'
headers (the whole section is tested on SmolLM2 in test_model_check_section.py)."""

from __future__ import annotations

import math

from ui.model_check import HEADERS, human_table, zoomed_range


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

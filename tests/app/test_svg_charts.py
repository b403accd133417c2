"""ui/svg.py: the static box plot that the gallery's first view draws without a chart module."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ui.svg import Box, box_plot, log_ticks


def test_a_box_is_tukeys_box_of_the_finite_values():
    vals = [1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 30.0, float("nan")]
    b = Box.of([(f"l{i}", v) for i, v in enumerate(vals)])
    finite = np.array(vals[:-1])
    q1, med, q3 = np.percentile(finite, [25, 50, 75])
    assert (b.q1, b.median, b.q3) == (q1, med, q3)
    fence = q3 + 1.5 * (q3 - q1)
    assert b.outliers == (("l6", 30.0),) and 30.0 > fence  # beyond the fence, with its label
    assert (b.low, b.high) == (1.0, 4.0)  # the whiskers end at data points inside the fences
    with pytest.raises(ValueError):
        Box.of([("x", float("inf")), ("y", None)])


def test_log_ticks_stay_in_range_and_thin_out_on_wide_ranges():
    assert log_ticks(1.0, 6.0) == [1, 1.5, 2, 3, 4, 5, 6]
    wide = log_ticks(0.9, 70.0)
    assert wide == [1, 2, 3, 5, 10, 20, 30, 50] and len(wide) <= 9
    assert all(0.9 <= t <= 70 for t in wide)
    with pytest.raises(ValueError):
        log_ticks(0.0, 1.0)


def test_the_box_plot_draws_a_box_per_group_an_outlier_per_dot_and_escapes_every_label():
    groups = [
        ("gpt2", [(f"lang{i}", 2.0 + i / 100) for i in range(50)] + [("<script>x</script>", 40.0)]),
        ("llama & co", [(f"lang{i}", 3.0 + i / 50) for i in range(50)]),
        ("empty", [("a", float("nan"))]),
    ]
    svg = box_plot(groups, {"gpt2": "#0072B2"}, title="Bytes <per> token", y_label="bytes/token")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<rect") == 2  # the group without a finite value keeps its slot, without a box
    assert svg.count("<circle") == 1 and "&lt;script&gt;x&lt;/script&gt;: 40.000" in svg
    assert "<script>" not in svg and "llama &amp; co" in svg and 'aria-label="Bytes &lt;per&gt; token"' in svg
    # every y coordinate inside the drawing
    height = float(re.search(r'viewBox="0 0 \d+ (\d+)"', svg).group(1))
    ys = [float(v) for v in re.findall(r'\by[12]?="(-?[\d.]+)"', svg)] + [
        float(v) for v in re.findall(r'cy="(-?[\d.]+)"', svg)
    ]
    assert ys and all(0 <= v <= height for v in ys)

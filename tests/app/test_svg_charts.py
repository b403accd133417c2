"""ui/svg.py: the static charts that first views draw without a chart module (the gallery's box plot, the bars of
Load & inspect and Token health)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ui.svg import Box, bar_chart, box_plot, id_bins, line_chart, log_ticks, nice_ticks


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


_RECT = re.compile(
    r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="([^"]+)"><title>([^<]*)'
)


def test_stacked_bars_are_proportional_to_their_values_with_one_tooltip_per_segment():
    svg = bar_chart(["a", "b", "c"], [("x", [10, 0, 5]), ("y", [30, 20, 0])], {"x": "#111111", "y": "#222222"},
                    title="t", y_label="tokens")  # fmt: skip
    rects = [(float(x), float(h), fill, tip) for x, _, _, h, fill, tip in _RECT.findall(svg)]
    assert [tip for *_, tip in rects] == ["a: x 10", "a: y 30", "b: y 20", "c: x 5"]  # no segment for a zero
    assert {fill for _, _, fill, _ in rects} == {"#111111", "#222222"}
    heights: dict[float, float] = {}
    for x, h, _, _ in rects:
        heights[x] = heights.get(x, 0.0) + h
    a, b, c = (heights[x] for x in sorted(heights))
    assert a / b == pytest.approx(40 / 20, rel=0.02) and a / c == pytest.approx(40 / 5, rel=0.02)
    assert "x</text>" in svg and "y</text>" in svg  # the legend names both series


def test_bar_chart_ticks_labels_and_refusals():
    assert nice_ticks(7) == [0, 2, 4, 6] and nice_ticks(0.9)[-1] <= 0.9 and nice_ticks(0) == [0.0]
    svg = bar_chart(["x"], [("n", [3])], {}, title="t", y_label="n")
    ticks = re.findall(r'text-anchor="end" fill="currentColor">([^<]+)</text>', svg)
    assert ticks == ["0", "1", "2", "3"]  # counts: no tick between whole numbers
    labels = [f"script number {k}" for k in range(80)]
    many = bar_chart(labels, [("n", list(range(1, 81)))], {}, title="t", y_label="n", log_y=True)
    shown = sum(f">{lab}</text>" in many for lab in labels)
    assert 10 <= shown <= 860 // 14 and many.count("<rect") == 80  # slanted labels thinned; every bar drawn
    assert "(log scale)" in many
    hostile = bar_chart(["<script>x</script>"], [("<b>", [1])], {}, title="<i>", y_label="&")
    assert "<script>" not in hostile and "<b>" not in hostile and "&lt;script&gt;" in hostile
    with pytest.raises(ValueError):
        bar_chart(["a", "b"], [("x", [1])], {}, title="t", y_label="n")
    with pytest.raises(ValueError):
        bar_chart(["a"], [("x", [1]), ("y", [2])], {}, title="t", y_label="n", log_y=True)
    coloured = bar_chart(["a", "b"], [("x", [1, 0]), ("y", [0, 200])], {}, title="t", y_label="n", log_y=True)
    assert coloured.count("<rect") == 2 + 2  # one value per bar may sit on a log axis (and a legend of two)


def test_a_line_chart_thins_its_points_and_draws_the_chosen_k_and_the_target():
    ys = [100 / (1 + k) for k in range(2001)]
    svg = line_chart(list(range(2001)), ys, title="t", x_label="merges k", y_label="<len>", vline=(500, "k = 500"),
                     marker=(30, ys[30], "10% target: 30 merges"), most_points=400)  # fmt: skip
    pts = [
        tuple(map(float, p.split(",")))
        for p in re.search(r'<polyline points="([^"]+)"', svg).group(1).split()
    ]
    assert 300 <= len(pts) <= 402 and pts[-1][0] > pts[0][0]  # thinned, the last point kept
    assert all(
        a[0] < b[0] and a[1] <= b[1] for a, b in zip(pts, pts[1:])
    )  # falling values: y coordinate grows
    vx = float(re.search(r'class="tl-vline" x1="([\d.]+)"', svg).group(1))
    assert pts[0][0] + (pts[-1][0] - pts[0][0]) * 0.25 == pytest.approx(vx, abs=0.2)  # x = 500 of 0…2000
    assert "<title>10% target: 30 merges</title>" in svg and "&lt;len&gt;" in svg and "<len>" not in svg
    with pytest.raises(ValueError):
        line_chart([1, 2], [1], title="t", x_label="x", y_label="y")


def test_id_bins_have_whole_widths_distinct_labels_and_count_every_id():
    """Token health's "by id" histogram: three special ids were three float bins labelled 151,643, 151,643, 151,644."""
    labels, edges = id_bins([151643, 151644, 151645])
    assert labels == ["151,643", "151,644", "151,645"]
    assert np.histogram([151643, 151644, 151645], edges)[0].tolist() == [1, 1, 1]
    ids = np.arange(151_646)
    labels, edges = id_bins(ids)
    widths = set(np.diff(edges).tolist())
    assert len(labels) == 60 and widths == {2528} and len(set(labels)) == len(labels)
    assert labels[0] == "0–2,527" and labels[-1] == "149,152–151,679"
    assert np.histogram(ids, edges)[0].sum() == ids.size
    labels, edges = id_bins([7])
    assert labels == ["7"] and edges.tolist() == [7, 8] and id_bins([])[0] == ["0"]
    labels, edges = id_bins(np.arange(100, 161))  # 61 ids: two per bin
    assert (
        len(labels) == 31 and labels[-1] == "160–161" and np.histogram(np.arange(100, 161), edges)[0][-1] == 1
    )

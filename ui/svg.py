"""Static charts drawn as inline SVG: for a page's first view, where a chart should appear with the page itself.

A Plotly chart needs Plotly's front-end module (4.7 MB of JavaScript, 1.0–1.4 s to load and compile in a new
browser on two cores) before it draws anything; an SVG string shown with ``st.markdown(svg, unsafe_allow_html=True)``
needs nothing (``st.html``'s sanitiser drops SVG). These charts
are static: the values show as native tooltips (``<title>``), and the page offers the interactive Plotly version
on request. Text and axes use ``currentColor``, so the chart follows the app's light or dark theme.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

from ui.palette import OKABE_ITO

#: A series without a colour of its own, and a line chart's line and marker: the palette's blue and vermillion.
LINE, MARK = OKABE_ITO[0], OKABE_ITO[3]
#: Tick multipliers of a log axis, densest first (thinned when the range is wide).
_LOG_STEPS = ((1, 1.5, 2, 3, 4, 5, 6, 8), (1, 2, 3, 5), (1, 2, 5), (1,))


@dataclass(frozen=True)
class Box:
    """Tukey's box of one group: quartiles (linear interpolation, as Plotly's default), the whiskers at the most
    extreme values within 1.5 × IQR of the box, and the points beyond them (label, value)."""

    q1: float
    median: float
    q3: float
    low: float
    high: float
    outliers: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, points: Sequence[tuple[str, float]]) -> Box:
        """The box of `points` (label, value); non-finite values are left out. ValueError when none is left."""
        pts = [(lab, float(v)) for lab, v in points if v is not None and math.isfinite(float(v))]
        if not pts:
            raise ValueError("a box needs at least one finite value")
        vals = np.array([v for _, v in pts])
        q1, med, q3 = (float(x) for x in np.percentile(vals, [25, 50, 75]))
        lo_fence, hi_fence = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        inside = vals[(vals >= lo_fence) & (vals <= hi_fence)]
        outliers = tuple(
            sorted(((lab, v) for lab, v in pts if v < lo_fence or v > hi_fence), key=lambda p: p[1])
        )
        return cls(q1, med, q3, float(inside.min()), float(inside.max()), outliers)


def _open(title: str, width: int, height: int) -> list[str]:
    """The opening of every chart: the scalable `<svg>` element (theme colours, the chart's class) and its title."""
    return [
        f'<svg class="tl-svg-chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
        f'style="width:100%;max-width:{width}px;height:auto;font:12px sans-serif;color:inherit" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]


def log_ticks(lo: float, hi: float, most: int = 9) -> list[float]:
    """Tick values for a log axis over [lo, hi] (lo > 0): 1-1.5-2-3… per decade, thinned to at most `most`."""
    if not (lo > 0 and hi >= lo):
        raise ValueError("a log axis needs 0 < lo <= hi")
    for steps in _LOG_STEPS:
        ticks = [
            m * 10.0**k
            for k in range(math.floor(math.log10(lo)), math.floor(math.log10(hi)) + 1)
            for m in steps
            if lo <= m * 10.0**k <= hi
        ]
        if len(ticks) <= most:
            return ticks if ticks else [lo, hi]
    return [lo, hi]


def box_plot(
    groups: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    colours: dict[str, str],
    *,
    title: str,
    y_label: str,
    width: int = 860,
    height: int = 380,
) -> str:
    """An SVG box plot on a log axis: one box per (name, points) group, in the order given, coloured by
    `colours`; every outlier a dot whose tooltip names its label and value. `title` is the chart's accessible
    name. Groups without a finite value are drawn as an empty slot."""
    boxes = {}
    for name, pts in groups:
        try:
            boxes[name] = Box.of(pts)
        except ValueError:
            continue
    values = [v for b in boxes.values() for v in (b.low, b.high, *(v for _, v in b.outliers))]
    positive = [v for v in values if v > 0]
    lo, hi = (min(positive), max(positive)) if positive else (1.0, 10.0)
    lo, hi = lo / 1.08, hi * 1.08
    left, right, top = 56, 12, 12
    slot = (width - left - right) / max(1, len(groups))
    rotate = any(len(name) * 7 > slot for name, _ in groups)  # names that do not fit their slot are slanted
    longest = max((len(name) for name, _ in groups), default=0)
    bottom = min(150, 24 + int(longest * 7 * 0.5)) if rotate else 46
    if rotate:  # the first slanted name reaches left of its slot: room for it
        left = max(left, int(longest * 7 * 0.87 - slot / 2) + 8)
        slot = (width - left - right) / max(1, len(groups))
    height += bottom - 46
    plot_h = height - top - bottom

    def y(v: float) -> float:
        v = max(v, lo)
        return top + plot_h * (1 - (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)))

    out = _open(title, width, height)
    for t in log_ticks(lo, hi):
        ty = y(t)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="currentColor" '
                   'stroke-opacity="0.12"/>')  # fmt: skip
        out.append(
            f'<text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end" fill="currentColor">{t:g}</text>'
        )
    out.append(f'<text transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
               f'fill="currentColor">{escape(y_label)} (log scale)</text>')  # fmt: skip
    for i, (name, _) in enumerate(groups):
        cx = left + slot * (i + 0.5)
        colour = escape(colours.get(name, LINE))
        ly = height - bottom + 18
        turn = (
            f' transform="rotate(-30 {cx:.1f} {ly})" text-anchor="end"' if rotate else ' text-anchor="middle"'
        )
        out.append(f'<text x="{cx:.1f}" y="{ly}"{turn} fill="currentColor">{escape(name)}</text>')
        b = boxes.get(name)
        if b is None:
            continue
        half = min(28.0, slot * 0.3)
        tip = escape(
            f"{name}: median {b.median:.3f}, quartiles {b.q1:.3f}–{b.q3:.3f}, whiskers {b.low:.3f}–{b.high:.3f}"
        )
        out.append(f'<g><title>{tip}</title>'
                   f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(b.high):.1f}" y2="{y(b.low):.1f}" stroke="{colour}"/>'
                   f'<line x1="{cx - half / 2:.1f}" x2="{cx + half / 2:.1f}" y1="{y(b.high):.1f}" y2="{y(b.high):.1f}" stroke="{colour}"/>'
                   f'<line x1="{cx - half / 2:.1f}" x2="{cx + half / 2:.1f}" y1="{y(b.low):.1f}" y2="{y(b.low):.1f}" stroke="{colour}"/>'
                   f'<rect x="{cx - half:.1f}" y="{y(b.q3):.1f}" width="{2 * half:.1f}" '
                   f'height="{max(1.0, y(b.q1) - y(b.q3)):.1f}" fill="{colour}" fill-opacity="0.35" stroke="{colour}"/>'
                   f'<line x1="{cx - half:.1f}" x2="{cx + half:.1f}" y1="{y(b.median):.1f}" y2="{y(b.median):.1f}" '
                   f'stroke="{colour}" stroke-width="2.5"/></g>')  # fmt: skip
        for lab, v in b.outliers:
            out.append(f'<circle cx="{cx:.1f}" cy="{y(v):.1f}" r="3" fill="none" stroke="{colour}">'
                       f"<title>{escape(lab)}: {v:.3f}</title></circle>")  # fmt: skip
    out.append("</svg>")
    return "".join(out)


def _short(label: str, most: int = 22) -> str:
    """An axis label cut to `most` characters (the bar's tooltip keeps the whole name)."""
    return label if len(label) <= most else label[: most - 1] + "…"


def nice_ticks(hi: float, most: int = 6) -> list[float]:
    """Tick values 0, step, 2·step… up to `hi` (> 0) on a linear axis, with a 1-2-5 step giving at most `most`."""
    if not hi > 0:
        return [0.0]
    raw = hi / most
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [k * step for k in range(int(hi // step) + 1)]


def id_bins(ids: Sequence[int] | np.ndarray, most: int = 60) -> tuple[list[str], np.ndarray]:
    """Histogram bins of token ids for :func:`bar_chart`: at most `most` bins of one whole width (one id per bin
    when the ids span at most `most`), as (labels, edges) for ``np.histogram(ids, edges)``. A label names its bin's
    ids ("151,643", or "0–2,527" for a wider bin), so no two bins share a label (equal-width float bins over three
    ids were labelled 151,643, 151,643, 151,644)."""
    ids = np.asarray(ids, dtype=np.int64)
    if not ids.size:
        return ["0"], np.array([0, 1])
    lo, hi = int(ids.min()), int(ids.max())
    width = max(1, math.ceil((hi - lo + 1) / most))
    n = math.ceil((hi - lo + 1) / width)
    edges = lo + width * np.arange(n + 1, dtype=np.int64)
    if width == 1:
        return [f"{int(a):,}" for a in edges[:-1]], edges
    return [f"{int(a):,}–{int(a) + width - 1:,}" for a in edges[:-1]], edges


def bar_chart(
    x: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    colours: dict[str, str],
    *,
    title: str,
    y_label: str,
    log_y: bool = False,
    label_every: int = 1,
    legend: bool | None = None,
    width: int = 860,
    height: int = 320,
) -> str:
    """An SVG bar chart: one bar per `x` label, stacked from the (name, values) `series` in the order given
    (values aligned with `x`), coloured by `colours`; every segment's tooltip names its bar, series and value.
    `log_y` draws the bars on a log axis (one nonzero value per bar: stacks on a log axis mislead). `label_every`
    shows every n-th x label (a histogram's many bins; slanted labels are thinned further until they fit, and cut
    at 22 characters). `legend` (default: when there are several series) names the series above the bars.
    ValueError for misaligned series or a stack on a log axis."""
    if any(len(v) != len(x) for _, v in series):
        raise ValueError("every series needs one value per bar")
    if log_y and any(sum(float(v[i]) > 0 for _, v in series) > 1 for i in range(len(x))):
        raise ValueError("a log axis takes one value per bar (stacked bars on a log axis mislead)")
    totals = [sum(float(v[i]) for _, v in series) for i in range(len(x))]
    top_v = max(totals, default=0.0)
    legend = len(series) > 1 if legend is None else legend
    left, right, top = 64, 12, 12 + (22 if legend else 0)
    slot = (width - left - right) / max(1, len(x))
    every = max(1, label_every)
    rotate = any(len(lab) * 7 > slot * every for lab in x[::every])
    longest = 0
    if rotate:  # slanted labels need about 14 px each: thin them (every bar keeps its name in its tooltip)
        every = max(every, math.ceil(14 / slot))
        longest = max((len(_short(lab)) for lab in x[::every]), default=0)
        first = len(_short(x[0])) if len(x) else 0
        left = max(left, int(first * 7 * 0.71 - slot / 2) + 8)  # the first label reaches left of its bar
        slot = (width - left - right) / max(1, len(x))
    bottom = min(130, 24 + int(longest * 7 * 0.71)) if rotate else 40
    height += bottom - 40
    plot_h = height - top - bottom
    if log_y:
        positive = [t for t in totals if t > 0]
        lo, hi = (min(positive) / 1.5, max(positive) * 1.08) if positive else (1.0, 10.0)

        def y(v: float) -> float:
            v = max(v, lo)
            return top + plot_h * (1 - (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)))

        ticks = log_ticks(lo, hi)
    else:
        hi = top_v * 1.05 if top_v > 0 else 1.0

        def y(v: float) -> float:
            return top + plot_h * (1 - v / hi)

        whole = all(float(v).is_integer() for _, vs in series for v in vs)  # counts: no tick between integers
        ticks = [t for t in nice_ticks(hi) if not whole or float(t).is_integer()]
    out = _open(title, width, height)
    for t in ticks:
        ty = y(t)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="currentColor" '
                   'stroke-opacity="0.12"/>')  # fmt: skip
        out.append(
            f'<text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end" fill="currentColor">{t:,.10g}</text>'
        )
    axis = f"{y_label} (log scale)" if log_y else y_label
    out.append(f'<text transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
               f'fill="currentColor">{escape(axis)}</text>')  # fmt: skip
    if legend:
        lx = left
        for name, _ in series:
            colour = escape(colours.get(name, LINE))
            out.append(f'<rect x="{lx}" y="6" width="11" height="11" fill="{colour}"/>'
                       f'<text x="{lx + 15}" y="16" fill="currentColor">{escape(name)}</text>')  # fmt: skip
            lx += 30 + 7 * len(name)
    base = y(lo) if log_y else y(0.0)
    for i, lab in enumerate(x):
        bx = left + slot * i + slot * 0.1
        bw = max(1.0, slot * 0.8)
        acc = 0.0
        for name, values in series:
            v = float(values[i])
            if v <= 0:
                continue
            y0, y1 = (base if acc == 0 else y(acc)), y(acc + v)
            acc += v
            colour = escape(colours.get(name, LINE))
            tip = escape(f"{lab}: {name} {v:,.10g}" if legend else f"{lab}: {v:,.10g}")
            out.append(f'<rect x="{bx:.1f}" y="{y1:.1f}" width="{bw:.1f}" height="{max(0.5, y0 - y1):.1f}" '
                       f'fill="{colour}"><title>{tip}</title></rect>')  # fmt: skip
        if i % every == 0:
            cx, ly = left + slot * (i + 0.5), height - bottom + 16
            turn = (
                f' transform="rotate(-45 {cx:.1f} {ly})" text-anchor="end"'
                if rotate
                else ' text-anchor="middle"'
            )
            out.append(f'<text x="{cx:.1f}" y="{ly}"{turn} fill="currentColor">{escape(_short(lab))}</text>')
    out.append("</svg>")
    return "".join(out)


def _ticks_between(lo: float, hi: float) -> list[float]:
    """Round tick values inside [lo, hi] (lo < hi), a 1-2-5 step apart."""
    steps = nice_ticks(hi - lo)
    step = steps[1] - steps[0] if len(steps) > 1 else hi - lo
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) // step) + 1)]


def line_chart(
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    title: str,
    x_label: str,
    y_label: str,
    vline: tuple[float, str] | None = None,
    marker: tuple[float, float, str] | None = None,
    most_points: int = 600,
    width: int = 640,
    height: int = 300,
) -> str:
    """An SVG line chart of `ys` against `xs` (increasing), on linear axes fitted to the data, thinned to at most
    `most_points` vertices (evenly spaced, the last kept); `vline` (x, label) draws a dotted vertical line,
    `marker` (x, y, label) a dot with its tooltip. ValueError for misaligned or empty data."""
    if len(xs) != len(ys) or not len(xs):
        raise ValueError("a line needs as many x as y values, at least one")
    step = max(1, math.ceil(len(xs) / most_points))
    keep = list(range(0, len(xs), step))
    if keep[-1] != len(xs) - 1:
        keep.append(len(xs) - 1)
    x0, x1 = float(xs[0]), float(xs[-1]) if float(xs[-1]) > float(xs[0]) else float(xs[0]) + 1
    lo, hi = float(min(ys)), float(max(ys))
    pad = (hi - lo) * 0.05 or max(abs(hi), 1.0) * 0.05
    lo, hi = lo - pad, hi + pad
    left, right, top, bottom = 64, 16, 12, 44
    plot_w, plot_h = width - left - right, height - top - bottom

    def px_(v: float) -> float:
        return left + plot_w * (float(v) - x0) / (x1 - x0)

    def py(v: float) -> float:
        return top + plot_h * (1 - (float(v) - lo) / (hi - lo))

    out = _open(title, width, height)
    for v in _ticks_between(lo, hi):
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py(v):.1f}" y2="{py(v):.1f}" '
                   'stroke="currentColor" stroke-opacity="0.12"/>'
                   f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end" fill="currentColor">{v:,.4g}</text>')  # fmt: skip
    for v in _ticks_between(x0, x1):
        out.append(f'<text x="{px_(v):.1f}" y="{height - bottom + 16}" text-anchor="middle" '
                   f'fill="currentColor">{v:,.10g}</text>')  # fmt: skip
    out.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle" '
               f'fill="currentColor">{escape(x_label)}</text>')  # fmt: skip
    out.append(f'<text transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
               f'fill="currentColor">{escape(y_label)}</text>')  # fmt: skip
    points = " ".join(f"{px_(xs[i]):.1f},{py(ys[i]):.1f}" for i in keep)
    out.append(f'<polyline points="{points}" fill="none" stroke="{LINE}" stroke-width="2">'
               f"<title>{escape(y_label)}: {float(ys[0]):,.4g} → {float(ys[-1]):,.4g}</title></polyline>")  # fmt: skip
    if vline is not None:
        vx = px_(vline[0])
        out.append(f'<line class="tl-vline" x1="{vx:.1f}" x2="{vx:.1f}" y1="{top}" y2="{top + plot_h}" '
                   'stroke="currentColor" stroke-dasharray="3 3"/>'
                   f'<text x="{vx + 4:.1f}" y="{top + 12}" fill="currentColor">{escape(vline[1])}</text>')  # fmt: skip
    if marker is not None:
        mx, my, label = marker
        out.append(f'<circle class="tl-marker" cx="{px_(mx):.1f}" cy="{py(my):.1f}" r="5" fill="{MARK}">'
                   f"<title>{escape(label)}</title></circle>")  # fmt: skip
    out.append("</svg>")
    return "".join(out)

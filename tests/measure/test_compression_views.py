"""The Compression page's views for 204 languages: worst languages per tokenizer, LaTeX that fits a page, the
grouped dot plot (tokenizer legend and value axis on top, one panel per script group) and a colour-blind-safe
palette where the first tokenizers never share a hue family."""

from __future__ import annotations

import re
import tomllib

import pandas as pd
from support import ROOT

from analysis.measure import summaries
from analysis.texts.flores import languages
from ui.language_charts import dot_plot, ordered_languages
from ui.palette import OKABE_ITO, tokenizer_colours
from ui.trees import NODE_STYLES


def _rows(names=("A", "B"), codes=None) -> list[dict]:
    codes = codes or sorted(languages())
    out = []
    for k, t in enumerate(names):
        for i, c in enumerate(codes):
            lang = languages()[c]
            out.append({"tokenizer": t, "lang": c, "name": lang.name, "script": lang.script, "family": lang.family,
                        "bytes_per_token": 1.0 + (i % 50) / 10 + k, "parity": 1.0 + i / 100})  # fmt: skip
    return out


def test_worst_languages_per_tokenizer():
    rows = _rows()
    worst = summaries.worst_languages(rows, "bytes_per_token", 20)
    assert set(worst) == {"A", "B"} and all(len(w) == 20 for w in worst.values())
    a = [w["value"] for w in worst["A"]]
    assert a == sorted(a) and a[0] == min(r["bytes_per_token"] for r in rows if r["tokenizer"] == "A")
    p = [
        w["value"] for w in summaries.worst_languages(rows, "parity", 5)["A"]
    ]  # lower is better: highest first
    assert p == sorted(p, reverse=True)


def test_latex_longtable_of_every_language_repeats_its_header():
    rows = [{"code": r["lang"], "language": r["name"], "A": r["bytes_per_token"]} for r in _rows(("A",))]
    tex = summaries.to_latex(
        rows, ["code", "language", "A"], caption="bytes/token", longtable=True, label="tab:x"
    )
    assert tex.count("\\begin{longtable}{llr}") == 1 and "\\endhead" in tex and "\\endfirsthead" in tex
    body = [ln for ln in tex.splitlines() if re.match(r"^[a-z]{3}\\_[A-Z][a-z]{3} &", ln)]
    assert len(body) == 204 and all(ln.count("&") == 2 for ln in body)
    assert "\\caption{bytes/token}\\label{tab:x}\\\\" in tex


def test_dot_plot_groups_languages_with_legend_and_axis_on_top():
    names = ["Qwen", "Llama-3.1", "Qwen3"]
    df = pd.DataFrame(_rows(tuple(names)))
    order = ordered_languages(df, "bytes_per_token", "script")
    fig = dot_plot(df, names, "bytes_per_token", order, "bytes / token").to_plotly_json()
    layout = fig["layout"]
    groups = list(dict.fromkeys(order["group"]))
    assert len(fig["data"]) == len(groups) * len(names)
    assert [t["name"] for t in fig["data"] if t.get("showlegend")] == names  # one legend entry per tokenizer
    assert layout["legend"]["orientation"] == "h" and layout["legend"]["y"] == 1.0  # the legend on top
    assert layout["xaxis"]["side"] == "top" and layout["xaxis"]["showticklabels"]  # the value axis on top too
    last = f"xaxis{len(groups)}"
    assert layout[last]["showticklabels"] and layout[last].get("side", "bottom") == "bottom"
    assert {t["marker"]["color"] for t in fig["data"]} == set(OKABE_ITO[:3])
    assert sum(len(t["y"]) for t in fig["data"][:: len(names)]) == 204  # every language once per tokenizer
    assert layout["yaxis"]["title"]["text"].startswith("<b>Latin</b> (127)")


def test_palette_is_okabe_ito_in_an_order_of_distinct_hues():
    colours = tokenizer_colours(["Qwen", "Llama-3.1", "Qwen3", "gpt2"])
    assert list(colours.values()) == OKABE_ITO[:4]
    assert colours["Llama-3.1"] != colours["Qwen3"]
    # the first two colours are not both blues: hue of #0072B2 is blue, #E69F00 is orange
    r, g, b = (int(OKABE_ITO[1][i : i + 2], 16) for i in (1, 3, 5))
    assert r > b


def test_grouped_order_pools_small_groups_and_puts_worst_first():
    df = pd.DataFrame(_rows())
    order = ordered_languages(df, "bytes_per_token", "script")
    groups = list(dict.fromkeys(order["group"]))
    assert groups[0] == "Latin" and groups[-1] == "Other scripts"
    latin = order[order["group"] == "Latin"]["mean"].tolist()
    assert latin == sorted(latin)  # bytes/token: the lowest (worst) first
    assert len(order) == 204


def test_every_chart_without_explicit_colours_uses_the_same_palette():
    """Streamlit's chart theme colours every series that has no colour of its own: Okabe–Ito, not two blues."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["theme"]["chartCategoricalColors"] == OKABE_ITO


def _luminance(colour: str) -> float:
    """WCAG relative luminance of a #RRGGBB colour."""
    c = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_no_series_colour_vanishes_on_the_light_or_the_dark_theme():
    """The app follows the browser's light or dark theme: every palette colour (and the merge trees' node colours)
    stands out from both backgrounds (WCAG contrast ratio ≥ 1.25; Okabe–Ito's black had 1.11 on the dark one)."""
    backgrounds = {"light": "#FFFFFF", "dark": "#0E1117"}  # Streamlit's two themes
    for colour in [*OKABE_ITO, *(style[0] for style in NODE_STYLES.values())]:
        for theme, bg in backgrounds.items():
            hi, lo = sorted((_luminance(colour), _luminance(bg)), reverse=True)
            assert (hi + 0.05) / (lo + 0.05) >= 1.25, (colour, theme)

"""Charts of one metric over many languages (the 204 of FLORES-200): languages grouped by script or family and
ordered worst first within a group, and a dot plot with a panel per group, the tokenizer legend and the value axis
on top (the chart is long: its keys stay in reach at the top and at the bottom)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.texts import flores as fl
from ui.palette import tokenizer_colours, tokenizer_symbols

MIN_GROUP = 3  # scripts / families with fewer languages are pooled as "Other …"
ROW_PX = 16  # height of one language row in the dot plot


def group_label(code: str, by: str, counts: dict[str, int]) -> str:
    """The group a language is drawn in: its script (or family), small groups pooled as "Other …"."""
    meta = fl.language(code)
    g = meta.script_name if by == "script" else meta.family
    return g if counts.get(g, 0) >= MIN_GROUP else f"Other {'scripts' if by == 'script' else 'families'}"


def ordered_languages(
    df: pd.DataFrame, metric: str, by: str, *, higher_is_better: bool = True
) -> pd.DataFrame:
    """One row per language with its group and label, ordered by group size, then worst first within a group."""
    per = df.groupby("lang", sort=False)[metric].mean().rename("mean").reset_index()
    raw = [fl.language(c).script_name if by == "script" else fl.language(c).family for c in per["lang"]]
    counts = pd.Series(raw).value_counts().to_dict()
    per["group"] = [group_label(c, by, counts) for c in per["lang"]]
    per["label"] = [f"{fl.language(c).name} · {c}" for c in per["lang"]]
    size = per["group"].map(per["group"].value_counts())
    per["other"] = per["group"].str.startswith("Other ")
    worst_first = higher_is_better  # lowest first when higher is better
    per = per.assign(size=size).sort_values(["other", "size", "group", "mean"],
                                            ascending=[True, False, True, worst_first])  # fmt: skip
    return per.drop(columns=["other", "size"])


def dot_plot(df: pd.DataFrame, names: list[str], metric: str, order: pd.DataFrame, label: str) -> go.Figure:
    """Many languages: one row per language, one marker per tokenizer, a panel per group, the value axis labelled
    at the top and at the bottom and the legend on top (the figure is long, its keys are always in reach)."""
    groups = list(dict.fromkeys(order["group"]))
    sizes = [int((order["group"] == g).sum()) for g in groups]
    fig = make_subplots(rows=len(groups), cols=1, shared_xaxes=True, row_heights=sizes,
                        vertical_spacing=36 / (ROW_PX * len(order) + 36 * len(groups)))  # fmt: skip
    colours, symbols = tokenizer_colours(names), tokenizer_symbols(names)
    values = df.set_index(["tokenizer", "lang"])[metric]
    for row, (g, n_langs) in enumerate(zip(groups, sizes), 1):
        langs = order[order["group"] == g]
        for n in names:
            vals = [values.get((n, c)) for c in langs["lang"]]
            fig.add_trace(go.Scatter(x=vals, y=list(langs["label"]), mode="markers", name=n, legendgroup=n,
                                     showlegend=row == 1, marker={"color": colours[n], "symbol": symbols[n], "size": 8},
                                     hovertemplate=f"{n}<br>%{{y}}: %{{x:.3f}}<extra></extra>"), row=row, col=1)  # fmt: skip
        fig.update_yaxes(autorange="reversed", tickfont={"size": 11}, title_text=f"<b>{g}</b> ({n_langs})",
                         title_font={"size": 13}, row=row, col=1)  # fmt: skip
    fig.update_xaxes(showticklabels=True, side="top", title_text=label, row=1, col=1)
    fig.update_xaxes(showticklabels=True, title_text=label, row=len(groups), col=1)
    fig.update_xaxes(showgrid=True, gridcolor="#e2e8f0")
    fig.update_layout(height=ROW_PX * len(order) + 36 * len(groups) + 170, margin={"l": 10, "r": 10, "t": 110, "b": 50},
                      legend={"orientation": "h", "yref": "container", "yanchor": "top", "y": 1.0, "x": 0},
                      plot_bgcolor="white")  # fmt: skip
    return fig

"""Merge trees, drawn once for every page: an interactive Plotly forest (Merge trees) and indented text (Extend,
Prune). Trees are the nested dicts of `analysis.bpe.merge_tree` / `BPEReplay.text_trees` and
`analysis.methods.extension.Preview.merge_tree`."""

from __future__ import annotations

import html

import plotly.graph_objects as go
import streamlit as st

from analysis import AnalysisError, LoadedTokenizer
from analysis.bpe import collapse_tree, layout_forest
from analysis.bpe import merge_tree as base_merge_tree
from ui.palette import OKABE_ITO

#: node kind → (colour, marker symbol, hover note, legend entry); Okabe–Ito colours, distinct for colour-blind eyes
NODE_STYLES = {
    "merged": (OKABE_ITO[0], "circle", "", "made by a merge (its rank below the token)"),
    "atomic": (OKABE_ITO[6], "circle", "", "alphabet symbol (no merge)"),
    "unreachable": (
        OKABE_ITO[3],
        "x",
        "<br>UNREACHABLE: BPE builds the pieces below instead",
        "unreachable token",
    ),
    "collapsed": (
        OKABE_ITO[1],
        "triangle-down",
        "<br>collapsed: raise the depth to expand",
        "collapsed subtree (…)",
    ),
    "added": (OKABE_ITO[2], "square", "", "added / special token"),
    "merge_skipped": (
        OKABE_ITO[4],
        "diamond",
        "<br>whole pre-token in the vocabulary: merges skipped (ignore_merges)",
        "whole pre-token (merges skipped)",
    ),
}
LABEL_SIZE = 14  # token text on the nodes; the merge rank below it is drawn at RANK_SIZE
RANK_SIZE = 12


def _kind(n: dict) -> str:
    if n.get("reachable") is False:
        return "unreachable"
    for k in ("collapsed", "added", "merge_skipped"):
        if n.get(k):
            return k
    return "atomic" if n.get("rank") is None else "merged"


def _label_and_hover(tok: LoadedTokenizer, n: dict, kind: str) -> tuple[str, str]:
    raw = n["token"]
    readable = tok.readable(raw) if not n.get("added") else raw
    shown = html.escape(readable.replace(" ", "·").replace("\n", "↵") or "∅")
    rank = n.get("rank")
    label = (
        shown
        if rank is None
        else f"{shown}<br><span style='font-size:{RANK_SIZE}px;color:#475569'>#{rank}</span>"
    )
    if kind == "collapsed":
        label += " …"
    made = "atomic (no merge)" if rank is None and kind != "unreachable" else f"merge rank #{rank}"
    hover = f"<b>{html.escape(repr(readable))}</b><br>id {n.get('id')} · raw {html.escape(repr(raw))}<br>{made}{NODE_STYLES[kind][2]}"
    return label, hover


#: The most leaves one row of a drawn forest holds: beyond it the token labels overlap at a page's width.
ROW_LEAVES = 18


def _leaves(node: dict) -> int:
    kids = node.get("children") or []
    return sum(_leaves(k) for k in kids) if kids else 1


def forest_rows(trees: list[dict], max_depth: int, max_leaves: int = ROW_LEAVES) -> list[list[dict]]:
    """The trees of a text in reading order, wrapped into rows of at most `max_leaves` leaves (at `max_depth`),
    like the lines of a paragraph; a single wider tree gets a row of its own."""
    rows: list[list[dict]] = []
    width = 0
    for t in trees:
        w = _leaves(collapse_tree(t, max_depth))
        if rows and width + w <= max_leaves:
            rows[-1].append(t)
            width += w
        else:
            rows.append([t])
            width = w
    return rows


def merge_tree_figure(tok: LoadedTokenizer, trees: list[dict], max_depth: int) -> go.Figure:
    """A Plotly forest of merge trees cut at `max_depth`: nodes labelled with the token and its merge rank, one
    legend entry per kind of node shown."""
    nodes = layout_forest([collapse_tree(t, max_depth) for t in trees])
    ex: list[float | None] = []
    ey: list[float | None] = []
    for n in nodes:
        if n["parent"] is not None:
            p = nodes[n["parent"]]
            ex += [p["x"], n["x"], None]
            ey += [p["y"], n["y"], None]
    kinds = [_kind(n) for n in nodes]
    labels, hovers = zip(*(_label_and_hover(tok, n, k) for n, k in zip(nodes, kinds))) if nodes else ((), ())
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=ex,
            y=ey,
            mode="lines",
            line={"color": "#cbd5e1", "width": 1.5},
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[n["x"] for n in nodes],
            y=[n["y"] for n in nodes],
            mode="markers+text",
            text=list(labels),
            textposition="top center",
            textfont={"size": LABEL_SIZE, "color": "#0f172a"},
            hovertext=list(hovers),
            hoverinfo="text",
            marker={
                "size": 12,
                "color": [NODE_STYLES[k][0] for k in kinds],
                "symbol": [NODE_STYLES[k][1] for k in kinds],
                "line": {"width": 1, "color": "white"},
            },
            showlegend=False,
        )
    )
    for kind in [k for k in NODE_STYLES if k in kinds]:  # legend: one entry per kind of node on screen
        colour, symbol, _, text = NODE_STYLES[kind]
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=text,
                marker={"size": 12, "color": colour, "symbol": symbol},
            )
        )
    levels = max((-n["y"] for n in nodes), default=0)
    fig.update_layout(
        showlegend=True,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "font": {"size": 13}},
        height=max(300, 110 * (levels + 1) + 90),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={"visible": False},
        yaxis={"visible": False, "range": [-levels - 0.5, 0.75]},
        plot_bgcolor="white",
    )
    return fig


def depth_slider(depth: int, key: str, default: int) -> int:
    """A 'levels shown' slider for trees deeper than one level (its value clamped to the current tree)."""
    if depth <= 1:
        return 1
    if st.session_state.get(key, 0) > depth:
        st.session_state[key] = depth
    return st.slider("Levels shown (deeper subtrees collapse)", 1, depth, min(depth, default), key=key)


def _base_children(tok: LoadedTokenizer, token: str) -> list[dict]:
    """The base tokenizer's own tree below a base token (none when it has no merge tree)."""
    try:
        return base_merge_tree(tok, token).get("children") or []
    except AnalysisError:  # e.g. an added token: shown as a leaf
        return []


def merge_tree_text(tok: LoadedTokenizer, root: dict, *, expand_base: bool = False) -> str:
    """An indented text rendering of a merge tree: readable token, [id] and the merge that made it.

    `merge #r` is the tokenizer's own merge, `appended merge #r` an extension's (★ marks a new token). With
    `expand_base`, the base-vocabulary leaves of an extension tree are expanded into their own merges.
    """
    lines: list[str] = []

    def walk(n: dict, depth: int) -> None:
        extension = "new" in n
        label = ("★ " if n.get("new") else "") + repr(n.get("text") or tok.readable(n["token"]))
        if n.get("id") is not None:
            label += f" [{n['id']}]"
        if n.get("rank") is not None:
            label += f"  ({'appended ' if extension else ''}merge #{n['rank']})"
        lines.append("    " * depth + label)
        kids = n.get("children") or []
        if not kids and expand_base and extension and not n.get("new") and len(n["token"]) > 1:
            kids = _base_children(tok, n["token"])
        for k in kids:
            walk(k, depth + 1)

    walk(root, 0)
    return "\n".join(lines)

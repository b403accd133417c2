"""Merge trees: how BPE builds a token (or every token of a text), node labels carry the merge ranks."""

from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import AnalysisError
from analysis.bpe import (
    collapse_tree,
    explain_unreachable,
    get_replay,
    layout_forest,
    merge_tree,
    tree_depth,
    vocabulary_structure,
)
from ui import state

MAX_MATCHES = 200
MAX_TEXT_TOKENS = 80


@st.cache_resource(show_spinner="Analysing the vocabulary structure (once per tokenizer)…", max_entries=4)
def _structure(key: str, _tok):
    return vocabulary_structure(_tok)


@st.cache_resource(show_spinner=False, max_entries=4)
def _readables(key: str, _tok) -> list[tuple[int, str, str]]:
    """(id, raw, readable) for the model vocabulary, sorted by id."""
    return sorted((i, s, _tok.readable(s)) for s, i in _tok.vocab.items())


@st.cache_resource(show_spinner=False, max_entries=4)
def _replay(key: str, _tok, ignore_merges: bool | None):
    return get_replay(_tok, ignore_merges=ignore_merges)


def search_tokens(tok, q: str, limit: int = MAX_MATCHES) -> list[int]:
    """Ids whose raw or readable form contains q (exact matches first, then shorter first); `#123` = id."""
    q = q.strip("\n")
    if not q:
        return []
    m = re.fullmatch(r"#?(\d+)", q.strip())
    if m and int(m.group(1)) in tok.id_to_token and q.strip().startswith("#"):
        return [int(m.group(1))]
    if q in tok.vocab:
        exact = [tok.vocab[q]]
    else:
        exact = []
    ql = q.lower()
    hits: list[tuple[int, int, int]] = []
    for i, raw, readable in _readables(tok.content_hash, tok):
        if readable == q or raw == q:
            hits.append((0, len(readable), i))
        elif ql in readable.lower() or q in raw:
            hits.append((1, len(readable), i))
    hits.sort()
    out = exact + [i for _, _, i in hits if i not in exact]
    return out[:limit]


def tree_figure(tok, trees: list[dict], max_depth: int, height: int | None = None) -> go.Figure:
    """An interactive Plotly tree (forest): nodes labelled with the token and its merge rank."""
    cut = [collapse_tree(t, max_depth) for t in trees]
    nodes = layout_forest(cut)
    ex, ey = [], []
    for n in nodes:
        if n["parent"] is not None:
            p = nodes[n["parent"]]
            ex += [p["x"], n["x"], None]
            ey += [p["y"], n["y"], None]
    colors, labels, hovers, symbols = [], [], [], []
    for n in nodes:
        raw = n["token"]
        readable = tok.readable(raw) if not n.get("added") else raw
        shown = readable.replace(" ", "·").replace("\n", "↵") or "∅"
        rank = n.get("rank")
        label = shown if rank is None else f"{shown}<br><sub>#{rank}</sub>"
        if n.get("reachable") is False:
            color, sym = "#dc2626", "x"
        elif n.get("collapsed"):
            color, sym = "#f59e0b", "triangle-down"
            label += " …"
        elif n.get("added"):
            color, sym = "#111827", "square"
        elif n.get("merge_skipped"):
            color, sym = "#7c3aed", "diamond"
        elif rank is None:
            color, sym = "#9ca3af", "circle"
        else:
            color, sym = "#2563eb", "circle"
        colors.append(color)
        symbols.append(sym)
        labels.append(label)
        extra = ""
        if n.get("collapsed"):
            extra = "<br>collapsed: raise the depth to expand"
        if n.get("merge_skipped"):
            extra = "<br>whole pre-token in the vocabulary: merges skipped (ignore_merges)"
        if n.get("reachable") is False:
            extra = "<br>UNREACHABLE: BPE builds the pieces below instead"
        hovers.append(
            f"<b>{readable!r}</b><br>id {n.get('id')} · raw {raw!r}<br>"
            + (
                "atomic (no merge)"
                if rank is None and n.get("reachable") is not False
                else f"merge rank #{rank}"
            )
            + extra
        )
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=ex, y=ey, mode="lines", line={"color": "#cbd5e1", "width": 1.5}, hoverinfo="skip")
    )
    fig.add_trace(
        go.Scatter(
            x=[n["x"] for n in nodes],
            y=[n["y"] for n in nodes],
            mode="markers+text",
            text=labels,
            textposition="top center",
            hovertext=hovers,
            hoverinfo="text",
            marker={"size": 11, "color": colors, "symbol": symbols, "line": {"width": 1, "color": "white"}},
        )
    )
    levels = max((-n["y"] for n in nodes), default=0)
    fig.update_layout(
        showlegend=False,
        height=height or max(260, 90 * (levels + 1) + 60),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"visible": False},
        yaxis={"visible": False, "range": [-levels - 0.5, 0.6]},
        plot_bgcolor="white",
    )
    return fig


def depth_slider(depth: int, key: str, default: int) -> int:
    """A 'levels shown' slider for trees deeper than one level (value clamped to the current tree)."""
    if depth <= 1:
        return 1
    if st.session_state.get(key, 0) > depth:
        st.session_state[key] = depth
    return st.slider("Levels shown (deeper subtrees collapse)", 1, depth, min(depth, default), key=key)


def page() -> None:
    """The whole page."""
    st.title("Merge trees")
    st.caption(
        "How the BPE merges build a token from its own string (merges only, ignore_merges off, no dropout), "
        "or every token of a text (the tokenizer's own pipeline). Node labels show the token and, below it, the "
        "rank of the merge that made it; grey nodes are alphabet symbols, red marks an unreachable token."
    )
    if "mt-init" not in st.session_state:
        qp_token = st.query_params.get("token")
        if qp_token:
            st.session_state["mt-q"] = qp_token[:200]
            st.session_state["mt-mode"] = "One token"
    state.preselect_from_link("mt-init", "mt-tok")

    lib = state.library()
    names = list(lib)
    if st.session_state.get("mt-tok") not in names:
        st.session_state.pop("mt-tok", None)
    name = st.selectbox("Tokenizer", names, key="mt-tok")
    tok = lib[name]
    if tok.model_type != "BPE":
        st.info(
            f"**{name}** has a {tok.model_type} model. Merge trees exist only for BPE tokenizers — pick a BPE "
            "tokenizer (GPT-2, Llama, Qwen, Mistral, Gemma…) from the sidebar or the Load & inspect page."
        )
        return
    mode = st.radio("Show", ["One token", "Every token of a text"], key="mt-mode", horizontal=True)
    if mode == "One token":
        token_view(tok)
    else:
        text_view(tok)


def token_view(tok) -> None:
    """Search a token, draw its tree, explain unreachability, list the tokens built on it."""
    q = st.text_input(
        "Search a token (text or raw form; `#123` for an id)", key="mt-q", placeholder="e.g. ing, ▁the, #1000"
    )
    if not q:
        st.info("Type part of a token to search the vocabulary.")
        return
    try:
        matches = search_tokens(tok, q)
    except AnalysisError as e:
        state.show_error(e)
        return
    if not matches:
        st.warning(f"No vocabulary token contains {q!r}.")
        return
    id_to_token = tok.id_to_token
    tid = st.selectbox(
        f"Token ({len(matches)}{'+' if len(matches) >= MAX_MATCHES else ''} matches)",
        matches,
        key="mt-pick",
        format_func=lambda i: f"{i} · {tok.readable(id_to_token[i])!r}",
    )
    if tid is None:
        return
    raw = id_to_token[tid]
    st.query_params["token"] = raw
    try:
        tree = merge_tree(tok, raw)
        vs = _structure(tok.content_hash, tok)
    except AnalysisError as e:
        state.show_error(e)
        return
    depth = tree_depth(tree)
    c = st.columns(5)
    c[0].metric("id", tid)
    status = (
        "added" if tree.get("added") or tid in tok.added_ids else ("yes" if tree.get("reachable") else "NO")
    )
    c[1].metric("Reachable", status, help="Does BPE rebuild the token from its own string (merges only)?")
    c[2].metric("Depth", depth)
    c[3].metric("Final merge rank", "—" if tree.get("rank") is None else f"#{tree['rank']}")
    c[4].metric("Tokens built on it", vs.downstream.get(tid, 0))
    kind = []
    if tid in vs.atomic:
        kind.append("atomic (alphabet)")
    if tid in vs.leaves:
        kind.append("leaf (no merge uses it)")
    if kind:
        st.caption(" · ".join(kind))
    show = depth_slider(depth, "mt-depth", 6)
    st.plotly_chart(tree_figure(tok, [tree], show), width="stretch", key="mt-tree")

    if tree.get("reachable") is False and not tree.get("added"):
        e = explain_unreachable(tok, raw)
        st.subheader("Why it is unreachable")
        st.error(e["reason"])
        if e["candidates"]:
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "would-be merge": f"{tok.readable(c_['left'])!r} + {tok.readable(c_['right'])!r}",
                            "rank": c_["rank"],
                            "left reachable": c_["left_reachable"],
                            "right reachable": c_["right_reachable"],
                            "earlier merge that wins": ""
                            if not c_["blocked_by"]
                            else f"#{c_['blocked_by']['rank']} {tok.readable(c_['blocked_by']['left'])!r} + "
                            f"{tok.readable(c_['blocked_by']['right'])!r}",
                        }
                        for c_ in e["candidates"]
                    ]
                ),
                hide_index=True,
                width="stretch",
            )
        if tok.ignore_merges:
            st.caption(
                f"{tok.name} uses ignore_merges: this token is still produced when a whole pre-token equals it."
            )

    built = vs.children_of(tid)
    st.subheader(f"Tokens built on it ({len(built)})")
    if built:
        rows = []
        for t in sorted(built, key=lambda x: vs.final_rank.get(x, 0)):
            a, b = vs.split[t]
            rows.append(
                {
                    "id": t,
                    "token": tok.readable(id_to_token[t]),
                    "merge": f"{tok.readable(id_to_token[a])!r} + {tok.readable(id_to_token[b])!r}",
                    "rank": vs.final_rank.get(t),
                    "depth": vs.depth.get(t),
                }
            )
        st.dataframe(
            pd.DataFrame(rows), hide_index=True, width="stretch", height=min(400, 36 * len(rows) + 40)
        )
        nxt = st.selectbox(
            "Open one of them",
            ["—"] + [r["id"] for r in rows[:500]],
            key="mt-next",
            format_func=lambda i: i if i == "—" else f"{i} · {tok.readable(id_to_token[i])!r}",
        )
        if nxt != "—":
            st.button("Open", key="mt-open", on_click=_open_token, args=(nxt,))
    else:
        st.caption("No merge uses this token as a part.")


def _open_token(tid: int) -> None:
    """Button callback: show another token (runs before the widgets are built)."""
    st.session_state["mt-q"] = f"#{tid}"
    st.session_state.pop("mt-next", None)
    st.session_state.pop("mt-pick", None)


def text_view(tok) -> None:
    """Type a text and see the tree of every token it is split into."""
    text = st.text_area("Text", "Tokenization is unbelievably fun.", key="mt-text", height=100)
    if not text:
        st.info("Type some text.")
        return
    try:
        rep = _replay(tok.content_hash, tok, None)
        trees = rep.text_trees(text)
    except AnalysisError as e:
        state.show_error(e)
        return
    rust = tok.tokenizer.encode(text, add_special_tokens=False).tokens
    if [t["token"] for t in trees] != rust:  # never expected: the replay is tested against the library
        st.warning("The step-wise replay and the tokenizers library disagree on this text.")
    st.caption(
        f"{len(trees)} tokens"
        + (f"; the first {MAX_TEXT_TOKENS} are drawn" if len(trees) > MAX_TEXT_TOKENS else "")
    )
    trees = trees[:MAX_TEXT_TOKENS]
    depth = max((tree_depth(t) for t in trees), default=1)
    show = depth_slider(depth, "mt-tdepth", 4)
    st.plotly_chart(tree_figure(tok, trees, show), width="stretch", key="mt-forest")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "token": tok.readable(t["token"]) if not t.get("added") else t["token"],
                    "id": t["id"],
                    "final merge rank": t.get("rank"),
                    "depth": tree_depth(t),
                    "note": "special/added"
                    if t.get("added")
                    else ("merges skipped (ignore_merges)" if t.get("merge_skipped") else ""),
                }
                for t in trees
            ]
        ),
        hide_index=True,
        width="stretch",
    )


page()

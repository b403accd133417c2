"""Vocabulary diff: the overlap of 2–8 library tokenizers (shared, unique to each, Jaccard) and their unique
tokens, sortable and exportable."""

from __future__ import annotations

from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.views.vocab_diff import BY_LABELS, MAX_VOCAB, VocabDiff, vocab_diff
from ui import links
from ui.library import library
from ui.pickers import pick_tokenizers
from ui.progress import progress
from ui.workspace import keep

#: The page inputs kept in the workspace.
KEPT = ("vd-toks", "vd-by")

BY = {label: by for by, label in BY_LABELS.items()}


def overlap_charts(d: VocabDiff) -> None:
    """Bars of each vocabulary split into shared-with-all, shared-with-some and unique; the Jaccard heat map."""
    names = d.names
    unique = [len(d.unique[n]) for n in names]
    all_shared = [d.shared_by_all] * len(names)
    some = [d.sizes[n] - u - d.shared_by_all for n, u in zip(names, unique)]
    fig = go.Figure()
    for label, ys, colour in (("shared by all", all_shared, "#009E73"), ("shared with some", some, "#56B4E9"),
                              ("unique to it", unique, "#D55E00")):  # fmt: skip
        fig.add_bar(y=names, x=ys, name=label, orientation="h", marker_color=colour,
                    hovertemplate="%{y}: %{x:,} tokens " + label + "<extra></extra>")  # fmt: skip
    fig.update_layout(barmode="stack", height=110 + 40 * len(names), margin=dict(l=10, r=10, t=40, b=10),
                      xaxis_title="tokens", legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), yaxis=dict(automargin=True))  # fmt: skip
    c1, c2 = st.columns([3, 2])
    c1.plotly_chart(fig, width="stretch")
    z = [[1.0 if a == b else d.pair(a, b).jaccard for b in names] for a in names]
    heat = go.Figure(go.Heatmap(z=z, x=names, y=names, zmin=0, zmax=1, colorscale="Blues",
                                text=[[f"{v:.3f}" for v in row] for row in z], texttemplate="%{text}",
                                hovertemplate="%{y} vs %{x}: Jaccard %{z:.3f}<extra></extra>"))  # fmt: skip
    heat.update_layout(height=90 + 40 * len(names), margin=dict(l=10, r=10, t=30, b=10), title="Jaccard index",
                       xaxis=dict(automargin=True), yaxis=dict(automargin=True, autorange="reversed"))  # fmt: skip
    c2.plotly_chart(heat, width="stretch")


def pairs_table(d: VocabDiff) -> None:
    """One row per pair of tokenizers."""
    rows = [{"Tokenizer A": p.a, "Tokenizer B": p.b, "Shared tokens": p.shared, "Tokens in either": p.union,
             "Jaccard": round(p.jaccard, 4)} for p in d.pairs]  # fmt: skip
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def unique_tokens(d: VocabDiff) -> None:
    """The tokens unique to each tokenizer: a sortable table per tokenizer and its CSV."""
    tabs = st.tabs([f"Only in {n} ({len(d.unique[n]):,})" for n in d.names])
    for tab, n in zip(tabs, d.names):
        rows = d.unique[n]
        frame = pd.DataFrame({"Token (as text)": [u.readable for u in rows], "Raw token": [u.token for u in rows],
                              "Id": [u.id for u in rows], "Bytes": [u.n_bytes for u in rows]})  # fmt: skip
        tab.dataframe(frame, hide_index=True, width="stretch", height=320)
        tab.download_button(f"Download the tokens only in {n} (CSV)", partial(d.unique_csv, n),
                            file_name=f"only-in-{n}.csv".replace("/", "_"), mime="text/csv", key=f"vd-csv-{n}")  # fmt: skip
    st.caption("Click a column header to sort (e.g. by bytes: the longest tokens first).")


def read_link() -> None:
    """When the page is opened with `?t=…&t=…`: those tokenizers (allow-listed sources, up to 8)."""
    if not links.opened() or "t" not in st.query_params:
        return
    chosen = [
        n for n in dict.fromkeys(links.name_from_link(v) for v in st.query_params.get_all("t")[:8]) if n
    ]
    if chosen:
        st.session_state["vd-toks"] = chosen


def page() -> None:
    """Tokenizers → one engine call → overlap charts, pair table and unique tokens."""
    st.title("Vocabulary diff")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption("Which tokens the vocabularies share, which are unique to each, and how similar they are "
               "(Jaccard index = shared ÷ tokens in either).")  # fmt: skip
    read_link()
    lib = library()
    c1, c2 = st.columns([3, 1])
    with c1:
        names = pick_tokenizers("Tokenizers (2 to 8)", key="vd-toks", max_n=8, recent=2)
    by_label = c2.radio("Compare", list(BY), key="vd-by", help="By bytes, GPT-2's `Ġthe` and Llama-2's `▁the` are "
                        "the same token; raw strings compare the vocabulary files as written.")  # fmt: skip
    if len(names) < 2:
        st.info("Pick at least two tokenizers (add examples from the sidebar).")
        return
    by = BY[by_label]
    st.caption(f"Vocabularies of up to {MAX_VOCAB:,} tokens. The same comparison on the command line: `python -m "
               f"analysis vocab-diff A B …{' --by raw' if by == 'raw' else ''} [--unique-csv DIR] [--json]`")  # fmt: skip
    with progress(
        "Comparing vocabularies…"
    ) as cb:  # the first comparison of these vocabularies: stage by stage
        d = vocab_diff([lib[n] for n in names], names, by=by, max_vocab=MAX_VOCAB, progress=cb)  # type: ignore[arg-type]
    m = st.columns(3)
    m[0].metric("Distinct tokens in all", f"{d.union:,}")
    m[1].metric("Shared by all", f"{d.shared_by_all:,}")
    m[2].metric("Pairs compared", len(d.pairs))
    overlap_charts(d)
    pairs_table(d)
    unique_tokens(d)


page()

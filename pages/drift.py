"""Drift: do two tokenizers, or two loadings of one (tokenizer.json vs GGUF vs vocab/merges vs tiktoken vs
SentencePiece), cut the same text into the same ids? Per FLORES language and content class, and what differs in
the pipeline (:func:`analysis.measure.drift.drift`)."""

from __future__ import annotations

import shlex

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.core.outputs import json_document
from analysis.core.paths import public_document, public_source
from analysis.measure.drift import CONTENT_CLASSES, DriftReport, DriftRow, drift
from analysis.texts.flores import available_codes
from ui.library import library
from ui.pickers import pick_tokenizer
from ui.progress import progress

DEFAULT_LANGS = ["eng_Latn", "est_Latn", "zho_Hans", "hin_Deva", "arb_Arab"]


def cli_command(a: str, b: str, langs: list[str] | None, content: list[str]) -> str:
    """The equivalent `python -m analysis drift` command line."""
    parts = [".venv/bin/python", "-m", "analysis", "drift", a, b,
             "--langs", ",".join(langs) if langs else "all", "--content", ",".join(content) or "none", "--json"]  # fmt: skip
    return " ".join(shlex.quote(p) for p in parts)


def rows_frame(rows: list[DriftRow], key: str) -> pd.DataFrame:
    """One table row per language or content class."""
    return pd.DataFrame([{key: r.name, "Lines": r.lines, "Tokens A": r.tokens_a, "Tokens B": r.tokens_b,
                          "B / A": None if r.ratio is None else round(r.ratio, 4),
                          "Identical lines": f"{100 * r.identical:.2f} %"} for r in rows])  # fmt: skip


def identical_chart(rows: list[DriftRow]) -> None:
    """The share of identical lines and the token ratio B / A per language, the most drifting first."""
    order = sorted(rows, key=lambda r: (r.identical, r.name))
    fig = go.Figure()
    fig.add_bar(x=[r.name for r in order], y=[100 * r.identical for r in order], name="identical lines (%)",
                marker_color="#0072B2", hovertemplate="%{x}: %{y:.2f}% of lines identical<extra></extra>")  # fmt: skip
    fig.add_scatter(x=[r.name for r in order], y=[r.ratio for r in order], name="tokens B / A", yaxis="y2",
                    mode="markers", marker=dict(color="#D55E00", size=5),
                    hovertemplate="%{x}: B / A = %{y:.4f}<extra></extra>")  # fmt: skip
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=10), yaxis=dict(title="identical lines (%)", range=[0, 101]),
                      yaxis2=dict(title="tokens B / A", overlaying="y", side="right"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), xaxis=dict(showticklabels=len(rows) <= 40))  # fmt: skip
    st.plotly_chart(fig, width="stretch")


def first_difference(rows: list[DriftRow]) -> None:
    """The first differing line of a chosen language or class, both tokenisations side by side."""
    differing = [r for r in rows if r.first_diff]
    if not differing:
        return
    name = st.selectbox("First differing line of", [r.name for r in differing], key="dr-first")
    row = next(r for r in differing if r.name == name)
    d = row.first_diff
    assert d is not None
    st.caption(
        f"Line {d.index + 1} of {row.lines:,}" + (" (cut to the first tokens)" if len(d.ids_a) >= 200 else "")
    )
    st.text(d.text[:2000])
    c1, c2 = st.columns(2)
    for col, side, toks, ids in ((c1, "A", d.tokens_a, d.ids_a), (c2, "B", d.tokens_b, d.ids_b)):
        col.markdown(f"**{side}: {len(ids)} tokens**")
        col.dataframe(pd.DataFrame({"Token": [repr(t)[1:-1] for t in toks], "Id": ids}), hide_index=True,
                      width="stretch", height=260)  # fmt: skip


def pipeline_table(rep: DriftReport) -> None:
    """The parts of the pipeline that differ."""
    st.subheader("Pipeline")
    if not rep.pipeline:
        st.success("Special and added tokens, normalizer, pre-tokenizer, post-processor, decoder and chat template "
                   "are the same.")  # fmt: skip
        return
    shown = [{"Part": p.part, "A": ", ".join(p.a[:12]) + (f" … ({len(p.a):,} in all)" if len(p.a) > 12 else ""),
              "B": ", ".join(p.b[:12]) + (f" … ({len(p.b):,} in all)" if len(p.b) > 12 else "")}
             for p in rep.pipeline]  # fmt: skip
    st.dataframe(pd.DataFrame(shown), hide_index=True, width="stretch")


def results(rep: DriftReport) -> None:
    """Verdict, per-class table, per-language chart and table, first differences, pipeline, JSON download."""
    n = len(rep.languages)
    same = sum(r.identical_lines == r.lines for r in rep.languages)
    lines = sum(r.lines for r in (*rep.languages, *rep.content))
    ident = sum(r.identical_lines for r in (*rep.languages, *rep.content))
    m = st.columns(4)
    m[0].metric("Verdict", "identical ids" if rep.identical_everywhere else "ids differ")
    m[1].metric("Languages identical on every line", f"{same} of {n}")
    m[2].metric("Lines identical", f"{100 * ident / lines:.2f} %" if lines else "—")
    m[3].metric("Time", f"{rep.seconds:.1f} s")
    if rep.content:
        st.subheader("Content classes")
        st.dataframe(rows_frame(rep.content, "Class"), hide_index=True, width="stretch")
    if rep.languages:
        st.subheader("Languages")
        identical_chart(rep.languages)
        tall = {"height": 300} if len(rep.languages) > 8 else {}
        st.dataframe(rows_frame(rep.languages, "Language"), hide_index=True, width="stretch", **tall)
    first_difference([*rep.content, *rep.languages])
    pipeline_table(rep)
    for note in rep.notes:
        st.caption(note)
    st.download_button("Download the report (JSON)", json_document(public_document(rep.to_json())),
                       file_name="drift.json", mime="application/json", key="dr-json")  # fmt: skip


def page() -> None:
    """Two tokenizers, languages and content classes → one engine call → tables and charts."""
    st.title("Drift")
    st.caption("Do two tokenizers — or two loadings of one: tokenizer.json, vocab.json + merges.txt, GGUF, tiktoken, "
               "SentencePiece `.model` — cut the same text into the same ids? Lines are encoded without special "
               "tokens; BOS/EOS and template differences are listed under Pipeline.")  # fmt: skip
    lib = library()
    if len(lib) < 1:
        st.info("Add tokenizers from the sidebar.")
        return
    c1, c2 = st.columns(2)
    with c1:
        a = pick_tokenizer("Tokenizer A", key="dr-a", nth_recent=2)  # the two added last, A the earlier
    with c2:
        b = pick_tokenizer("Tokenizer B", key="dr-b")
    if a is None or b is None:
        return
    codes = available_codes()
    c1, c2 = st.columns([3, 2])
    every = c1.toggle(f"All {len(codes)} FLORES languages", key="dr-all", disabled=not codes,
                      help="all devtest lines of every language: tens of seconds on two cores")  # fmt: skip
    langs: list[str] | None = None
    if not every:
        langs = c1.multiselect(
            "Languages", codes, default=[c for c in DEFAULT_LANGS if c in codes], key="dr-langs"
        )
    content = c2.multiselect(
        "Content classes", list(CONTENT_CLASSES), default=list(CONTENT_CLASSES), key="dr-content"
    )
    st.caption("Same as: `" + cli_command(public_source(a.source) or a.name, public_source(b.source) or b.name, langs,
                                          content) + "`")  # fmt: skip
    if not every and not langs and not content:
        st.info("Pick languages or content classes.")
        return
    key = (a.content_hash, b.content_hash, "all" if every else tuple(langs or ()), tuple(content))
    if st.button("Compare", key="dr-run", type="primary"):
        with progress("Encoding with both tokenizers") as cb:
            st.session_state["dr-result"] = (
                key,
                drift(a, b, "all" if every else langs, content=content, progress=cb),
            )
    stored = st.session_state.get("dr-result")
    if stored is None or stored[0] != key:
        return
    results(stored[1])


page()

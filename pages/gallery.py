"""Example gallery: precomputed results for the bundled example tokenizers (STT, compression on every FLORES-200
language), read from the disk store, so that a first look takes seconds, not minutes."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis.views.gallery import Gallery, read_gallery
from ui.gallery import start_build
from ui.palette import tokenizer_colours


def overview(g: Gallery) -> None:
    """One row per example tokenizer: size, compression summary, parity vs English, STT."""
    rows = [
        {
            "Tokenizer": e.name,
            "Model": f"{e.model_type} ({e.flavour})",
            "Vocabulary": e.vocab_size,
            "Bytes/token, mean": e.summary.get("mean"),
            "Bytes/token, median": e.summary.get("median"),
            "Gini (bytes/token)": e.summary.get("gini"),
            "Parity vs English, mean": e.parity.get("mean"),
            "STT-unreachable": e.stt.get("unreachable") if e.stt else None,
        }
        for e in sorted(g.entries, key=lambda e: -(e.summary.get("mean") or 0))
    ]
    num = {c: st.column_config.NumberColumn(format="%.3f") for c in
           ("Bytes/token, mean", "Bytes/token, median", "Gini (bytes/token)", "Parity vs English, mean")}  # fmt: skip
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=num, key="gal-table")
    st.caption(f"Bytes/token on the {g.entries[0].languages} FLORES-200 languages (higher = fewer tokens); parity = "
               "a sentence's tokens ÷ its English translation's tokens, English itself left out; STT-unreachable = "
               "tokens the merges can never build (BPE only). Open *Compression* or *Token health* for the details.")  # fmt: skip


def per_language(g: Gallery) -> None:
    """Bytes/token per language: one box per tokenizer, and the languages that fare worst overall."""
    names = [e.name for e in g.entries]
    df = pd.DataFrame([{"tokenizer": e.name, "language": lang, "bytes/token": v}
                       for e in g.entries for lang, v in e.bytes_per_token.items()])  # fmt: skip
    fig = px.box(df, x="tokenizer", y="bytes/token", points="outliers", hover_name="language", color="tokenizer", log_y=True,
                 color_discrete_map=tokenizer_colours(names), category_orders={"tokenizer": names})  # fmt: skip
    fig.update_layout(height=420, showlegend=False, margin=dict(l=10, r=10, t=30, b=10))
    st.plotly_chart(fig, key="gal-box")
    med = g.medians()
    worst = sorted(med, key=med.get)[:10]
    st.markdown("**The ten languages with the fewest bytes per token** (median over these tokenizers): "
                + ", ".join(f"{lang} ({med[lang]:.2f})" for lang in worst))  # fmt: skip


def page() -> None:
    """The stored gallery (never computed in this run); the background build fills what is missing."""
    st.title("Example gallery")
    state = start_build()
    g = read_gallery()
    if g.data_key is None:
        st.info("FLORES-200 was not found (set TOKLAB_FLORES or TOKLAB_ASSETS): the gallery needs it.")
        return
    if g.missing:
        doing = "is being computed in the background" if state["running"] else "is not computed yet"
        st.info(f"{len(g.entries)} of {len(g.entries) + len(g.missing)} example tokenizers ready; the rest "
                f"({', '.join(g.missing)}) {doing}, once per server and stored on disk.")  # fmt: skip
        c1, c2 = st.columns(2)
        c1.button("Refresh", key="gal-refresh", icon=":material/refresh:")
        if not state["running"] and c2.button("Compute the missing entries now", key="gal-build"):
            start_build(force=True)
            st.rerun()
        if state["error"]:
            st.error(state["error"])
    if not g.entries:
        return
    overview(g)
    per_language(g)


page()

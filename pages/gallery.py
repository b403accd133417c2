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


def demo_models(g: Gallery) -> None:
    """The fetched demo models' under-trained candidates (from the embeddings; not verified here)."""
    if not g.models:
        return
    st.subheader("Under-trained tokens of the demo models")
    st.caption("Candidates from the embeddings alone (Land & Bartolo, \"Fishing for Magikarp\", EMNLP 2024): the "
               "rows whose main indicator falls in the lowest percentile among tokens that round-trip. Open "
               "*Under-trained tokens* to verify them with prompts.")  # fmt: skip
    for m in g.models:
        with st.expander(f"{m.label}: {m.n_candidates:,} candidates of {m.n_rows:,} rows", expanded=True):
            st.markdown(f"Main indicator **{m.main}** ≤ {m.threshold:.3g} (lowest {m.percentile:g} %). "
                        "By class: " + ", ".join(f"{k} {v:,}" for k, v in m.classes.items()))  # fmt: skip
            df = pd.DataFrame(m.candidates).rename(columns={"id": "Id", "token": "Token", "round_trip": "Round trip",
                                                            "class": "Class", m.main: m.main.capitalize()})  # fmt: skip
            st.dataframe(df, hide_index=True, width="stretch", height=min(400, 35 * (len(df) + 1) + 3),
                         key=f"gal-model-{m.key}")  # fmt: skip


def page() -> None:
    """The stored gallery (never computed in this run); the background build fills what is missing."""
    st.title("Example gallery")
    state = start_build()
    g = read_gallery()
    if g.data_key is None:
        st.info("FLORES-200 was not found (set TOKLAB_FLORES or TOKLAB_ASSETS): the gallery needs it.")
        return
    if g.missing or g.models_missing:
        doing = "is being computed in the background" if state["running"] else "is not computed yet"
        ready = f"{len(g.entries)} of {len(g.entries) + len(g.missing)} example tokenizers"
        if g.models or g.models_missing:
            ready += f" and {len(g.models)} of {len(g.models) + len(g.models_missing)} demo models"
        st.info(f"{ready} ready; the rest ({', '.join(g.missing + g.models_missing)}) {doing}, once per server and "
                "stored on disk.")  # fmt: skip
        c1, c2 = st.columns(2)
        c1.button("Refresh", key="gal-refresh", icon=":material/refresh:")
        if not state["running"] and c2.button("Compute the missing entries now", key="gal-build"):
            start_build(force=True)
            st.rerun()
        if state["error"]:
            st.error(state["error"])
    demo_models(g)
    if not g.entries:
        return
    overview(g)
    per_language(g)


page()

"""Example gallery: precomputed results for the bundled example tokenizers (STT, compression on every FLORES-200
language), read from the disk store, so that a first look takes seconds, not minutes. Its first view holds only
static elements (HTML tables, an SVG chart), which need no front-end module loaded on demand; the interactive chart and
tables come on request."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis.core import paths
from analysis.jobs.queue import AGAIN
from analysis.views.gallery import Gallery, read_gallery
from ui.charts import interactive_toggle, show_svg
from ui.gallery import build_job, start_build
from ui.jobs import STATE_WORDS, queue_line
from ui.palette import tokenizer_colours
from ui.svg import box_plot
from ui.tables import static_table


def _fmt(v: float | int | None, spec: str) -> str:
    """`v` formatted, or an em dash when missing."""
    return "—" if v is None else format(v, spec)


def overview(g: Gallery) -> None:
    """One row per example tokenizer: size, compression summary, parity vs English, STT."""
    rows = [
        {
            "Tokenizer": e.name,
            "Model": f"{e.model_type} ({e.flavour})",
            "Vocabulary": _fmt(e.vocab_size, ","),
            "Bytes/token, mean": _fmt(e.summary.get("mean"), ".3f"),
            "Bytes/token, median": _fmt(e.summary.get("median"), ".3f"),
            "Gini (bytes/token)": _fmt(e.summary.get("gini"), ".3f"),
            "Parity vs English, mean": _fmt(e.parity.get("mean"), ".3f"),
            "STT-unreachable": _fmt(e.stt.get("unreachable") if e.stt else None, ","),
        }
        for e in sorted(g.entries, key=lambda e: -(e.summary.get("mean") or 0))
    ]
    static_table(pd.DataFrame(rows))
    st.caption(f"Bytes/token on the {g.entries[0].languages} FLORES-200 languages (higher = fewer tokens); parity = "
               "a sentence's tokens ÷ its English translation's tokens, English itself left out; STT-unreachable = "
               "tokens the merges can never build (BPE only). Open *Compression* or *Token health* for the details.")  # fmt: skip


def per_language(g: Gallery) -> None:
    """Bytes/token per language: one box per tokenizer, and the languages that fare worst overall."""
    names = [e.name for e in g.entries]
    colours = tokenizer_colours(names)
    if interactive_toggle("gal-interactive"):
        df = pd.DataFrame([{"tokenizer": e.name, "language": lang, "bytes/token": v}
                           for e in g.entries for lang, v in e.bytes_per_token.items()])  # fmt: skip
        fig = px.box(df, x="tokenizer", y="bytes/token", points="outliers", hover_name="language", color="tokenizer",
                     log_y=True, color_discrete_map=colours, category_orders={"tokenizer": names})  # fmt: skip
        fig.update_layout(height=420, showlegend=False, margin=dict(l=10, r=10, t=30, b=10))
        st.plotly_chart(fig, key="gal-box")
    else:  # drawn with the page: no chart module to load first (ui/charts.py)
        groups = [(e.name, list(e.bytes_per_token.items())) for e in g.entries]
        show_svg(box_plot(groups, colours, title="Bytes per token on every FLORES-200 language, per tokenizer",
                          y_label="bytes/token"))  # fmt: skip
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
            shown = df.head(10).copy()
            shown[m.main.capitalize()] = shown[m.main.capitalize()].map(lambda v: f"{v:.4g}")
            static_table(shown.astype(str))
            if len(df) > len(shown) and st.toggle(f"All {len(df)} stored candidates (sortable table)",
                                                  key=f"gal-model-all-{m.key}"):  # fmt: skip
                st.dataframe(df, hide_index=True, width="stretch", height=min(400, 35 * (len(df) + 1) + 3),
                             key=f"gal-model-{m.key}")  # fmt: skip


def page() -> None:
    """The stored gallery (never computed in this run); the background build fills what is missing."""
    st.title("Example gallery")
    state = start_build()
    job = build_job()
    g = read_gallery()
    if g.data_key is None:
        st.info("FLORES-200 was not found (set TOKLAB_FLORES or TOKLAB_ASSETS): the gallery needs it.")
        return
    if g.missing or g.models_missing:
        running = job is not None and not job.final
        doing = ("is being computed by a background job (it yields to users' jobs)" if running
                 else "is not computed yet")  # fmt: skip
        ready = f"{len(g.entries)} of {len(g.entries) + len(g.missing)} example tokenizers"
        if g.models or g.models_missing:
            ready += f" and {len(g.models)} of {len(g.models) + len(g.models_missing)} demo models"
        st.info(f"{ready} ready; the rest ({', '.join(g.missing + g.models_missing)}) {doing}, once per server and "
                "stored on disk.")  # fmt: skip
        if running:
            st.progress(job.fraction, text=f"Gallery build · {STATE_WORDS[job.state]} · {queue_line(job)}")
        c1, c2 = st.columns(2)
        c1.button("Refresh", key="gal-refresh", icon=":material/refresh:")
        if not running and c2.button("Compute the missing entries now", key="gal-build"):
            start_build(force=True)
            st.rerun()
        if state["error"]:
            st.error(paths.public_text(state["error"]))
        if job is not None and job.state in AGAIN:
            st.error(f"The gallery build {job.state}: {paths.public_text(job.error or '')}")
    demo_models(g)
    if not g.entries:
        return
    overview(g)
    per_language(g)


page()

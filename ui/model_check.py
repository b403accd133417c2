"""The "Model check" section of the edit pages: an edit's exported model measured against the original, per
language (bits per byte on the same bytes, tokens per byte, mass on new ids, KL on unchanged spans), with an
optional initialisation bake-off and a warm-up of the new rows. Models load only when the button is pressed;
the JSON download is the document `python -m analysis model-check --json` prints."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.progress import scaled
from analysis.methods.undertrained import indicators_for
from analysis.model.embeddings import INIT_HELP, INITS
from analysis.model.model_check import HELDOUT_LINES, heldout_texts, load_pair, model_check, training_texts
from analysis.model.warmup import OBJECTIVES, WarmupConfig, warm_up
from analysis.texts.flores import available_codes
from ui.errors import try_step
from ui.progress import progress


def _run(
    original: str, edited: str, langs: list[str], lines: int, inits: list[str], steps: int, objective: str
) -> dict:
    """Load both models, measure, warm up; the JSON document."""
    with progress("Model check") as cb:
        first, second = load_pair(original, edited)
        res = model_check(first, second, heldout_texts(langs, lines), inits=inits,
                          progress=scaled(cb, 0.0, 0.4 if steps else 1.0))  # fmt: skip
        res.indicators = indicators_for(edited, second.tok, [u.id for u in res.new_tokens])
        if steps:
            cfg = WarmupConfig(steps=steps, objective=objective, tokens_per_step=256)
            wu = warm_up(first, second, training_texts(langs[:1]), heldout_texts(langs, lines), cfg,
                         progress=scaled(cb, 0.4, 1.0))  # fmt: skip
            res.warmup = wu.to_json()
    doc = paths.public_document(res.to_json())
    for k in ("original", "edited"):  # model files by name, never the server layout
        doc[k] = paths.public_source(doc[k])
    return doc


def _charts(doc: dict, key: str) -> None:
    rows = [
        {"language": c["lang"], "model": m, "bits per byte": c[f"bpb_{m}"]}
        for c in doc["languages"]
        for m in ("original", "edited")
    ]
    st.plotly_chart(px.bar(pd.DataFrame(rows), x="language", y="bits per byte", color="model", barmode="group",
                           title="Bits per byte on the same held-out bytes"), key=f"{key}-bpb")  # fmt: skip
    st.dataframe(pd.DataFrame(doc["languages"]), hide_index=True)
    bake = doc.get("bakeoff")
    if bake:
        for row in bake["languages"]:
            df = pd.DataFrame([{"init": k, **v} for k, v in row["inits"].items()])
            st.plotly_chart(px.bar(df, x="init", y="bpb_edited", hover_data=["mass_new_on_old_text", "kl_unchanged"],
                                   title=f"{row['lang']}: bits per byte by initialisation (original "
                                   f"{df['bpb_original'].iloc[0]:.4f})"), key=f"{key}-bake-{row['lang']}")  # fmt: skip
            st.dataframe(df[["init", "bpb_edited", "mass_new_on_old_text", "kl_unchanged"]], hide_index=True)
    wu = doc.get("warmup")
    if wu:
        curve = [
            {"step": p["step"], "language": lang, "bits per byte": v}
            for p in wu["curve"]
            for lang, v in p["bpb"].items()
        ]
        st.plotly_chart(px.line(pd.DataFrame(curve), x="step", y="bits per byte", color="language", markers=True,
                                title=f"Warm-up of the new rows ({wu['objective']})"), key=f"{key}-warm")  # fmt: skip


def model_check_section(original: str, edited: Path | str | None, key: str) -> None:
    """The section: languages, lines, inits and warm-up → a button → charts, table and JSON download. Shows a
    note instead when there is no exported model folder yet."""
    st.subheader("Model check")
    if edited and Path(edited).is_dir():  # just written; the field refuses an existing folder on the next run
        st.session_state[f"{key}-edited"] = str(edited)
    edited = st.session_state.get(f"{key}-edited")
    if not original or not edited or not Path(edited).is_dir():
        st.caption("Export the model to a server folder above to measure it against the original here.")
        return
    st.caption(f"The model exported to {paths.shown_path(edited)} against the original model.")
    c1, c2 = st.columns([3, 1])
    codes = available_codes()
    default = [c for c in ("est_Latn", "eng_Latn") if c in codes]
    langs = c1.multiselect("Languages (held-out FLORES lines; the first one is the warm-up's training text)", codes,
                           default=default, key=f"{key}-langs")  # fmt: skip
    lines = c2.number_input("Lines per language", 1, HELDOUT_LINES, 20, key=f"{key}-lines")
    c3, c4, c5 = st.columns([3, 1, 1])
    inits = c3.multiselect("Bake-off of the new rows", INITS, key=f"{key}-inits",
                           help="; ".join(f"{k}: {v}" for k, v in INIT_HELP.items()))  # fmt: skip
    steps = c4.number_input("Warm-up steps", 0, 2000, 0, key=f"{key}-steps")
    objective = c5.selectbox("Objective", OBJECTIVES, key=f"{key}-obj")
    if langs and st.button("Check the model", key=f"{key}-run"):
        doc = try_step(_run, original, str(edited), langs, int(lines), inits, int(steps), objective)
        if doc is not None:
            st.session_state[f"{key}-doc"] = doc
    doc = st.session_state.get(f"{key}-doc")
    if doc:
        _charts(doc, key)
        st.download_button("Download model_check.json", json_document(doc), file_name="model_check.json",
                           mime="application/json", key=f"{key}-download")  # fmt: skip

"""Token reuse (R-BPE): give the ids of unused scripts to a new target-language BPE, vocabulary size unchanged."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import LoadedTokenizer
from analysis.commands._equivalent import Equivalent, reuse_command
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.progress import Progress
from analysis.core.references import cite
from analysis.methods import reuse
from analysis.methods.reuse import measures as rm
from analysis.methods.reuse.defaults import (
    DEFAULT_MIN_FREQUENCY,
    DEFAULT_MIN_REUSABLE,
    DEFAULT_PRESERVED,
    DEFAULT_TARGET,
    PAGE_CORPORA,
    SAFE_PROTECT,
    TARGET_LANGS,
)
from analysis.texts.corpora import iter_bytes
from analysis.texts.flores import ENGLISH, FLORES_TRAIN_LINES, split_lines
from ui.charts import interactive_toggle, show_svg
from ui.export_check import export_check_section
from ui.jobs import stored_input
from ui.model_check import model_check_section, model_export_section, model_folder_export_section
from ui.pickers import BYTE_LEVEL_BPE, model_picker_keys, pick_model, pick_tokenizer
from ui.progress import progress
from ui.robustness import measured, robustness_button
from ui.spans import token_spans_html
from ui.svg import bar_chart
from ui.tables import static_table
from ui.workspace import current, json_download, keep, store

#: The page inputs kept in the workspace.
KEPT = ("reuse-tok", *model_picker_keys("reuse-model"))

TARGETS = TARGET_LANGS
PRESERVABLE = ["latin", "greek", "cyrillic", "cjk", "devanagari", "thai", "hebrew", "armenian", "georgian"]
SAMPLE = {
    "arabic": "يتحدث الباحثون عن نتائج جديدة في علم الفلك. Researchers describe new results in astronomy ✔ ❤."
}
COLOURS = {"reused": "#ef4444", "preserved": "#22c55e", "kept": "#94a3b8"}
RULE_HELP = {
    "paper": "as the paper: the R-BPE code that produced its Tables 1–2 (122 Unicode-4.0 blocks, 26 script keywords)",
    "unicode17": "every Unicode 17 block and script (R-BPE's later release: more scripts become reusable)",
}
PROTECT_HELP = {
    "symbols": "shared punctuation and symbols (Common/Inherited script: the danda । of Oriya and Gurmukhi, ✔, ❤)",
    "usage": "ids the FLORES training lines of kept-script languages use (slower: encodes every language)",
}
SOURCES = ["FLORES lines", "Shared corpora", "My files"]
CLASS_RULE = (
    "**Class rule.** A token's class comes from its standalone decoding (stripped): each character gets its "
    "Unicode block; Arabic, CJK, Greek and Latin blocks merge into one class each; General Punctuation is "
    "skipped. Several labels form a mixed class (`Cyrillic_Latin_merged`), except that kana and CJK together "
    "drop CJK (`の人` is Hiragana) and Hiragana + Katakana make `Katakana_Hiragana`. The *paper* rules keep the "
    "block table and 26 script keywords of the code that produced the paper's numbers (Qwen3: 41,752 reusable ids "
    "in 40 classes; Llama-3.1: 16,632 in 35); *unicode17* uses every Unicode 17 block and script name (Qwen3: "
    "42,543 ids in 92 classes: Ethiopic, Gurmukhi, Lao, Syriac … and blocks added after Unicode 4.0 become "
    "reusable)."
)


def training_text(lang: str) -> tuple[list[str], tuple, int, str, list[str]]:
    """The training-text choice: FLORES lines, the shared corpora, uploads; min frequency and trainer.

    Returns (texts, a key for the choice, min_frequency, trainer, the uploads' file names)."""
    c1, c2, c3 = st.columns([3, 1, 1])
    sources = c1.multiselect("Training text", SOURCES, default=["FLORES lines"] + ["Shared corpora"] * PAGE_CORPORA,
                             key="reuse-sources",
                             help="FLORES lines alone by default, so that training stays interactive; the command "
                             "line adds the shared corpora unless --no-corpora (the equivalent command says which)")  # fmt: skip
    min_freq = int(c2.number_input("Min. pair frequency", 0, 1000, DEFAULT_MIN_FREQUENCY, key="reuse-minfreq",
                                   help="2 stops FLORES-only training early; 0 lets the new vocabulary grow"))  # fmt: skip
    trainer = c3.radio("Trainer", ["bpe", "parity"], horizontal=True, key="reuse-trainer",
                       format_func=lambda t: {"bpe": "BPE", "parity": "parity-aware"}[t],
                       help=f"parity-aware BPE ({cite('parity-aware-bpe')}) balances the FLORES languages written "
                       "in the target script (e.g. Arabic, Urdu, Persian)")  # fmt: skip
    extra: list[str] = []
    uploaded: list[str] = []
    digest = hashlib.sha256()
    if "My files" in sources:
        for f in st.file_uploader("Your text files (txt, gz, jsonl, zip)", accept_multiple_files=True,
                                  key="reuse-upload", max_upload_size=paths.upload_widget_mb()) or []:  # fmt: skip
            data = f.getvalue()
            digest.update(f.name.encode() + data)
            uploaded.append(f.name)
            extra += list(iter_bytes(f.name, data))
    corpora = [p.name for p in reuse.corpus_files(lang)]
    st.caption(
        f"FLORES-200 {lang} lines 1–{FLORES_TRAIN_LINES}; shared corpora of {lang}: "
        f"{', '.join(corpora) or 'none'}; {len(extra):,} uploaded lines. Held-out metrics use lines "
        f"{FLORES_TRAIN_LINES + 1}–1012. The paper trains on 1 GB of Arabic."
    )
    texts = reuse.target_training_texts(lang, flores_train="FLORES lines" in sources,
                                        corpora="Shared corpora" in sources, extra=extra)  # fmt: skip
    return texts, (tuple(sources), digest.hexdigest()), min_freq, trainer, uploaded


def build(tok: LoadedTokenizer, texts: list[str], opts: dict) -> dict:
    """Train and map the new tokenizer (live progress), then measure it on held-out FLORES
    (`reuse_measures.measure_reuse`, the CLI's report) and pack the zip."""
    lang = TARGETS[opts["target"]]
    t0 = time.perf_counter()
    with progress("Training the target tokenizer…") as cb:
        rt = reuse.build_reuse_tokenizer(tok, texts, progress=cb, train_lang=lang, **opts)
    seconds = time.perf_counter() - t0
    with st.spinner("Measuring on held-out FLORES and packing the export…"):
        return {"report": rm.measure_reuse(rt, lang, ENGLISH, seconds=seconds), "zip": rt.zip_bytes()}


def classes_chart(vc: reuse.VocabClasses, plan: reuse.ReusePlan) -> None:
    """Tokens per Unicode class (reused red, preserved green) and the reusable-id counts."""
    top = list(vc.counts().items())[:40]
    status = [
        "reused" if k in plan.selected else "preserved" if k in plan.preserved_classes else "kept"
        for k, _ in top
    ]
    title = "Tokens per Unicode class (40 largest; red = reused, green = preserved)"
    if interactive_toggle("reuse-plotly"):
        fig = go.Figure(go.Bar(x=[k for k, _ in top], y=[v for _, v in top], marker_color=[COLOURS[s] for s in status],
                               customdata=status, hovertemplate="%{x}: %{y:,} tokens (%{customdata})<extra></extra>"))  # fmt: skip
        fig.update_layout(
            title=title, yaxis_type="log", yaxis_title="tokens", height=380, margin=dict(t=40, b=10)
        )
        st.plotly_chart(fig, width="stretch", key="reuse-classes-chart")
    else:  # static first: no chart module to load (ui/charts.py)
        series = [(s, [v if got == s else 0 for (_, v), got in zip(top, status)]) for s in COLOURS]
        svg = bar_chart(
            [k for k, _ in top], series, COLOURS, title=title, y_label="tokens", log_y=True, legend=True
        )
        show_svg(svg, heading=title)
    st.caption(
        f"{len(vc.counts())} classes; {len(vc.unclassified):,} tokens unclassified (whitespace, General Punctuation); "
        f"{len(vc.special_ids) + len(vc.byte_ids):,} special and single-byte ids are never reused."
    )
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Reusable classes", len(plan.selected))
    m2.metric("Reusable ids", f"{plan.reusable_count:,}")
    m3.metric("Eligible classes", len(plan.eligible))
    m4.metric("Protected ids", f"{len(plan.protected_ids):,}")
    with st.expander("Reusable classes (smallest first) and the class rule"):
        st.markdown(CLASS_RULE)
        static_table(
            pd.DataFrame({"class": list(plan.selected), "tokens": list(plan.selected.values())}), height=400
        )


def before_after(tok: LoadedTokenizer, rt: reuse.ReuseTokenizer, target: str) -> None:
    """A text tokenized by the base and by R-BPE."""
    st.subheader("Before / after")
    text = st.text_area(
        "Text", SAMPLE.get(target, split_lines(TARGETS[target])[1][0]), key="reuse-text", height=90
    )
    before = tok.tokenizer.encode(text, add_special_tokens=False)
    ids, offs, _ = rt.encode_with_offsets(text)
    p1, p2 = st.columns(2)
    with p1:
        st.markdown(f"**{tok.name}**: {len(before.ids)} tokens")
        st.html(token_spans_html(tok, text, before.ids, before.offsets))
    with p2:
        st.markdown(
            f"**R-BPE**: {len(ids)} tokens ({sum(1 for x in ids if x in rt.reused_ids)} on reused ids)"
        )
        st.html(token_spans_html(tok, text, ids, offs))
    decoded = rt.decode(ids)
    if decoded != text:
        st.warning(f"This text does not decode back exactly (it uses reused ids): `{decoded}`")


MEASURES = {"fertility": "fertility", "bytes_per_token": "bytes/token", "continued_words": "continued words",
            "premium": "premium vs English"}  # fmt: skip


def heldout(report: rm.ReuseReport) -> None:
    """The paper's measures before/after on the target's held-out lines and on English."""
    lang = report.train_lang
    st.subheader(f"Held-out FLORES ({lang}, lines {FLORES_TRAIN_LINES + 1}–1012)")
    rows = []
    sides = [(lang, report.heldout)] + (
        [(report.reference_lang, report.reference)] if report.reference else []
    )
    for name, c in sides:
        for key, label in MEASURES.items():
            b, a = c["before"][key], c["after"][key]
            rows.append({"language": name, "measure": label, "before": b, "after": a,
                         "change": None if b in (None, 0) or a is None else f"{a / b - 1:+.1%}"})  # fmt: skip
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="reuse-metrics-table")
    st.caption(
        "Premium: the mean per-sentence token ratio against the parallel English sentence (Petrov et al. 2023). "
        f"{cite('r-bpe')} report for Llama-3.1 with 1 GB of Arabic: fertility 2.37 → 1.87 (−21.1 %), premium "
        "1.67 → 1.26, continued words 0.55 → 0.27 (Tables 1 and 3)."
    )


def collateral_section(report: rm.ReuseReport, key: tuple) -> rm.ReuseReport:
    """The collateral table over every FLORES language (on demand), with the fertility per class; returns the
    report with the table once it is measured."""
    st.subheader("What the reuse breaks")
    st.caption(
        "Reused ids decode as target-script tokens everywhere: a language whose text uses one no longer "
        "round-trips. *reused*: the language's own script was given away; *kept*: collateral damage in a script "
        "you kept (e.g. Oriya and Gurmukhi use the Devanagari danda)."
    )
    stored = st.session_state.get("reuse-collateral")
    if stored is None or stored[0] != key:
        if not st.button("Check every FLORES language (held-out lines)", key="reuse-collateral-run"):
            return report
        measured = dataclasses.replace(report)
        with progress("Encoding and decoding every FLORES language…") as cb:
            measured.measure_collateral("heldout", progress=cb)
        st.session_state["reuse-collateral"] = stored = (key, measured)
    report = stored[1]
    rows = report.collateral
    s = rm.collateral_summary(rows)
    c = st.columns(3)
    c[0].metric("Languages that no longer round-trip", f"{s['not_round_trip']} of {s['languages']}")
    c[1].metric("…in a reused script", s["not_round_trip_by_role"].get("reused", 0))
    c[2].metric("…in a kept script (collateral)", s["not_round_trip_by_role"].get("kept", 0))
    df = pd.DataFrame(rows)
    df["example"] = [f"{e['text']} → {e['decoded']}" if e else "" for e in df["example"]]
    only = st.checkbox("Only languages that no longer round-trip", value=True, key="reuse-collateral-broken")
    view = df[~df["round_trip"]] if only else df
    cols = ["lang", "name", "role", "ids_changed", "round_trip", "broken_lines", "example", "fertility_before",
            "fertility_after", "premium_before", "premium_after"]  # fmt: skip
    st.dataframe(view[cols], hide_index=True, key="reuse-collateral-table",
                 column_config={"ids_changed": st.column_config.NumberColumn("share of ids reused", format="%.3f")})  # fmt: skip
    fert = rm.fertility_by_class(rows)
    st.markdown("**Fertility per class** (the languages of the paper's Table 2)")
    st.dataframe(
        pd.DataFrame([{"class": k, **v} for k, v in fert.items()]), hide_index=True, key="reuse-fert-class"
    )
    return report


def _robustness(report: rm.ReuseReport, cb: Progress) -> dict:
    """The report's robustness before → after, measured now (kept in the report, as the CLI's)."""
    report.measure_robustness(progress=cb)
    return report.robustness or {}


def consequence_and_export(tok: LoadedTokenizer, report: rm.ReuseReport, zipped: bytes, target: str,
                           command: Callable[..., Equivalent]) -> None:  # fmt: skip
    """What reusing ids costs (a reused script now decodes as the target), the zip, the report, the model
    export, robustness and the equivalent command (`command(robustness=…)`)."""
    demo = report.demo
    if demo is not None:
        st.warning(
            "**Reused scripts now decode as the target.** Their ids belong to the new tokenizer: text in a reused "
            f"script still encodes to old ids, but {demo['n_reused']} of its {len(demo['ids'])} ids now mean "
            f"{target} tokens.\n\n*Input:* {demo['text']}\n\n*Decoded:* {demo['decoded']}",
            icon="♻️",
        )
    d1, d2 = st.columns(2)
    d1.download_button("Download the R-BPE tokenizer (.zip)", zipped, file_name=f"{tok.name}-rbpe-{target}.zip",
                       mime="application/zip", key="reuse-download")  # fmt: skip
    json_download("Download the report (JSON)", json_document(paths.public_document(report.to_json())), "rbpe_report.json",
                  container=d2, key="reuse-report",
                       help="the document `python -m analysis reuse --json` prints (with the collateral table once "
                       "checked)")  # fmt: skip
    st.caption(
        "The zip holds `old_tokenizer/`, `new_tokenizer/` and `rbpe_mapping.json` (id maps, target blocks); load "
        "it with `analysis.methods.reuse.reuse.ReuseTokenizer.load(folder)`. An R-BPE tokenizer routes text between two "
        "tokenizers, so it is not one `tokenizer.json` and cannot join the library like Extend's or Prune's edits."
    )

    def recipe() -> (
        dict
    ):  # the check and the export run in a worker: the R-BPE folder travels as a workspace item (its zip)
        return {
            "op": "reuse",
            "rbpe": stored_input(store(), current(), zipped, ".zip", {"job-input": "rbpe"}),
        }

    model_export(recipe, f"{tok.name}-rbpe-{target}")
    ident = (tok.content_hash, target, len(zipped))
    robustness_button("reuse-rob", ident, lambda cb: _robustness(report, cb))
    shown = command(robustness=measured("reuse-rob", ident))
    st.caption(shown.caption())
    st.code(shown.text(), language="bash", wrap_lines=True)
    export_check_section("reuse-check", tok, zipped)
    model_check_section("reuse-mc", f"{tok.name} R-BPE ({target})", recipe, bakeoff=False, keep_model=False)


def model_export(recipe: Callable[[], dict], name: str) -> None:
    """The model with the reused ids' rows re-initialised by FVT (same size), next to the R-BPE tokenizer: a job of
    the workers, into this workspace (a zip to download) or, where the operator allows server paths, a new server
    folder."""
    with st.expander("Export the model too (reused rows re-initialised by FVT)"):
        st.caption(
            "Each reused id's input-embedding row (and LM-head row, unless tied) becomes the mean of the rows of the "
            "new token's pieces in the original tokenizer, as the paper initialises its continued pre-training. "
            "The model keeps its size; every other row is untouched."
        )
        model = pick_model("reuse-model", "Model of this tokenizer")
        if not model:
            return
        model_export_section("reuse-model-ws", recipe, model, name, False)
        model_folder_export_section("reuse-model", recipe, model, name, False)


def options(tok: LoadedTokenizer) -> tuple[dict, reuse.VocabClasses, reuse.ReusePlan]:
    """Rules, target, preserved scripts, threshold and protections → the classes and the reuse plan."""
    c0, c1, c2, c3 = st.columns([1.3, 1, 1.4, 1])
    rules = c0.radio("Class rules", reuse.RULES, key="reuse-rules", help="\n\n".join(f"**{k}**: {v}" for k, v in RULE_HELP.items()))  # fmt: skip
    target = c1.selectbox(
        "Target script", list(TARGETS), index=list(TARGETS).index(DEFAULT_TARGET), key="reuse-target"
    )
    preserved = tuple(
        sorted(
            c2.multiselect(
                "Also preserve", PRESERVABLE, default=list(DEFAULT_PRESERVED), key="reuse-preserve"
            )
        )
    )
    h = int(
        c3.number_input(
            "Threshold h (reusable ids)", 100, 200_000, DEFAULT_MIN_REUSABLE, step=1000, key="reuse-h"
        )
    )
    protect = tuple(st.multiselect("Protect from reuse", reuse.PROTECTIONS, default=list(SAFE_PROTECT), key="reuse-protect",
                                   format_func=lambda p: f"{p}: {PROTECT_HELP[p]}"))  # fmt: skip
    with st.spinner("Classifying the vocabulary by Unicode block (once per tokenizer and rule set)…"):
        vc = reuse.classify_vocab(tok, rules)
        shield = reuse.protected_ids(tok, vc, target, preserved, h, protect)
    plan = reuse.choose_reusable(vc, target, preserved, h, shield)
    if plan.reusable_count < h:
        st.warning(f"Only **{plan.reusable_count:,}** reusable ids for the threshold h = {h:,}: {tok.name}'s vocabulary "
                   "has few tokens of scripts that can be given up. The new tokenizer gets at most that many new "
                   "tokens; preserve fewer scripts or use the *unicode17* rules for more.")  # fmt: skip
    opts = {"target": target, "preserved": preserved, "min_reusable": h, "rules": rules, "protect": protect}
    return opts, vc, plan


def page() -> None:
    """Tokenizer, rules, target, threshold → `reuse.choose_reusable` → classes; Train → R-BPE, measures, export."""
    st.title("Token reuse (R-BPE)")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        f"R-BPE ({cite('r-bpe')}) classifies the vocabulary by **Unicode block**, picks the classes of scripts you "
        "do not need (smallest first, up to the threshold h), trains a new byte-level BPE on the target language and "
        "maps its tokens onto those ids. Target-script text is encoded by the new tokenizer, everything else by the "
        "old one; every id is an old id, so the model's embedding matrix keeps its size."
    )
    tok = pick_tokenizer("Tokenizer", key="reuse-tok", needs=BYTE_LEVEL_BPE, feature="R-BPE token reuse")
    if tok is None:
        return
    opts, vc, plan = options(tok)
    classes_chart(vc, plan)
    lang = TARGETS[opts["target"]]
    texts, text_key, min_freq, trainer, uploaded = training_text(lang)
    opts |= {"min_frequency": min_freq, "trainer": trainer}
    key = (tok.content_hash, text_key, *sorted((k, str(v)) for k, v in opts.items()))
    if st.button("Train the new tokenizer", type="primary", key="reuse-train"):
        st.session_state["reuse-built"] = (key, build(tok, texts, opts))
    stored = st.session_state.get("reuse-built")
    if stored is None or stored[0] != key:
        st.info("Train the new tokenizer to see the preview, the held-out metrics and the export.")
        return
    built = stored[1]
    report: rm.ReuseReport = built["report"]
    i = report.rt.info
    st.success(
        f"New vocabulary {i['new_vocab_size']:,} tokens: {i['common_tokens']:,} already in {tok.name} (same id), "
        f"{i['reused_tokens']:,} placed on reused ids. Trained on {i['training_chars']:,} target characters."
    )
    before_after(tok, report.rt, opts["target"])
    heldout(report)
    report = collateral_section(report, key)
    command = partial(reuse_command, tok, opts=opts, lang=lang, sources=text_key[0], uploads=uploaded,
                      collateral=bool(report.collateral))  # fmt: skip
    consequence_and_export(tok, report, built["zip"], opts["target"], command)


page()

"""Token reuse (R-BPE): give the ids of unused scripts to a new target-language BPE, vocabulary size unchanged."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import LoadedTokenizer, reuse
from analysis.flores import FLORES_TRAIN_LINES, split_lines
from ui.pickers import BYTE_LEVEL_BPE, pick_tokenizer
from ui.progress import progress
from ui.spans import token_spans_html

TARGETS = {"arabic": "arb_Arab", "hebrew": "heb_Hebr", "cyrillic": "rus_Cyrl", "devanagari": "hin_Deva",
           "thai": "tha_Thai", "greek": "ell_Grek", "armenian": "hye_Armn", "georgian": "kat_Geor",
           "ethiopic": "amh_Ethi"}  # fmt: skip
PRESERVABLE = ["latin", "greek", "cyrillic", "cjk", "devanagari", "thai", "hebrew", "armenian", "georgian"]
SAMPLE = {
    "arabic": "يتحدث الباحثون عن نتائج جديدة في علم الفلك. Researchers describe new results in astronomy."
}
COLOURS = {"reused": "#ef4444", "preserved": "#22c55e", "kept": "#94a3b8"}


def build(tok: LoadedTokenizer, target: str, preserved: tuple[str, ...], h: int, corpora: bool) -> dict:
    """Train and map the new tokenizer (live progress), then measure it on held-out FLORES and pack the zip."""
    lang = TARGETS[target]
    with progress("Training the target tokenizer…") as cb:
        rt = reuse.build_reuse_tokenizer(tok, reuse.target_training_texts(lang, corpora=corpora), target=target,
                                         preserved=preserved, min_reusable=h, progress=cb)  # fmt: skip
    with st.spinner("Measuring on held-out FLORES and packing the export…"):
        held, eng = split_lines(lang)[1], split_lines("eng_Latn")[1]
        return {"rt": rt, "target": reuse.compare(rt, held, eng), "english": reuse.compare(rt, eng),
                "demo": reuse.reused_script_demo(rt), "zip": rt.zip_bytes()}  # fmt: skip


def classes_chart(vc: reuse.VocabClasses, plan: reuse.ReusePlan) -> None:
    """Tokens per Unicode class (reused red, preserved green) and the reusable-id counts."""
    top = list(vc.counts().items())[:40]
    status = [
        "reused" if k in plan.selected else "preserved" if k in plan.preserved_classes else "kept"
        for k, _ in top
    ]
    fig = go.Figure(go.Bar(x=[k for k, _ in top], y=[v for _, v in top], marker_color=[COLOURS[s] for s in status],
                           customdata=status, hovertemplate="%{x}: %{y:,} tokens (%{customdata})<extra></extra>"))  # fmt: skip
    fig.update_layout(title="Tokens per Unicode class (40 largest; red = reused, green = preserved)", yaxis_type="log",
                      yaxis_title="tokens", height=380, margin=dict(t=40, b=10))  # fmt: skip
    st.plotly_chart(fig, width="stretch", key="reuse-classes-chart")
    st.caption(
        f"{len(vc.counts())} classes; {len(vc.unclassified):,} tokens unclassified (whitespace, General Punctuation); "
        f"{len(vc.special_ids) + len(vc.byte_ids):,} special and single-byte ids are never reused."
    )
    m1, m2, m3 = st.columns(3)
    m1.metric("Reusable classes", len(plan.selected))
    m2.metric("Reusable ids", f"{plan.reusable_count:,}")
    m3.metric("Eligible classes", len(plan.eligible))
    with st.expander("Reusable classes (smallest first)"):
        st.dataframe(pd.DataFrame({"class": list(plan.selected), "tokens": list(plan.selected.values())}),
                     hide_index=True, key="reuse-selected-table")  # fmt: skip


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
    if rt.decode(ids) != text:
        st.warning("This text does not decode back exactly (it contains characters of a reused script).")


def heldout(built: dict, lang: str) -> None:
    """Fertility and bytes/token before/after on the target's held-out lines and on English; parity."""
    st.subheader(f"Held-out FLORES ({lang}, lines {FLORES_TRAIN_LINES + 1}–1012)")
    rows = [
        {"language": name, "fertility before": c["before"]["fertility"], "fertility after": c["after"]["fertility"],
         "change": f"{c['fertility_change']:+.1%}", "bytes/token before": c["before"]["bytes_per_token"],
         "bytes/token after": c["after"]["bytes_per_token"]}
        for name, c in ((lang, built["target"]), ("eng_Latn", built["english"]))
    ]  # fmt: skip
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="reuse-metrics-table")
    t = built["target"]
    st.caption(
        f"Parity {lang} / eng_Latn (tokens per parallel sentence): {t['parity_before']:.3f} → {t['parity_after']:.3f}. "
        "The paper reports −24.4 % Arabic fertility on average with 1 GB of training text."
    )


def consequence_and_export(tok: LoadedTokenizer, built: dict, target: str) -> None:
    """What reusing ids costs (a reused script now decodes as the target) and the zip."""
    demo = built["demo"]
    if demo is not None:
        st.warning(
            "**Reused scripts now decode as the target.** Their ids belong to the new tokenizer: text in a reused "
            f"script still encodes to old ids, but {demo['n_reused']} of its {len(demo['ids'])} ids now mean "
            f"{target} tokens.\n\n*Input:* {demo['text']}\n\n*Decoded:* {demo['decoded']}",
            icon="♻️",
        )
    st.download_button("Download the R-BPE tokenizer (.zip)", built["zip"], file_name=f"{tok.name}-rbpe-{target}.zip",
                       mime="application/zip", key="reuse-download")  # fmt: skip
    st.caption(
        "The zip holds `old_tokenizer/`, `new_tokenizer/` and `rbpe_mapping.json` (id maps, target blocks); load "
        "it with `analysis.reuse.ReuseTokenizer.load(folder)`."
    )


def page() -> None:
    """Tokenizer, target and threshold → `reuse.choose_reusable` → classes; Train → R-BPE, metrics, export."""
    st.title("Token reuse (R-BPE)")
    st.caption(
        "R-BPE (Hamdan et al., EMNLP 2025) classifies the vocabulary by **Unicode block**, picks the classes of "
        "scripts you do not need (smallest first, up to the threshold h), trains a new byte-level BPE on the target "
        "language and maps its tokens onto those ids. Target-script text is encoded by the new tokenizer, "
        "everything else by the old one; every id is an old id, so the model's embedding matrix keeps its size."
    )
    tok = pick_tokenizer("Tokenizer", key="reuse-tok", needs=BYTE_LEVEL_BPE, feature="R-BPE token reuse")
    if tok is None:
        return
    with st.spinner("Classifying the vocabulary by Unicode block (once per tokenizer)…"):
        vc = reuse.classify_vocab(tok)
    c1, c2, c3 = st.columns(3)
    target = c1.selectbox("Target script", list(TARGETS), key="reuse-target")
    preserved = tuple(
        sorted(c2.multiselect("Also preserve", PRESERVABLE, default=["latin", "greek"], key="reuse-preserve"))
    )
    h = int(c3.number_input("Threshold h (reusable ids)", 100, 200_000, 20_000, step=1000, key="reuse-h"))
    classes_chart(vc, reuse.choose_reusable(vc, target, preserved, h))
    lang = TARGETS[target]
    corpora = st.checkbox(
        "Also train on the shared corpora of this language (prose, UI strings, word-frequency list; slower, better)",
        value=False, key="reuse-corpora",
    )  # fmt: skip
    st.caption(
        f"Training text: FLORES-200 {lang} lines 1–{FLORES_TRAIN_LINES}" + (" + shared corpora" if corpora else "")
        + f"; held-out metrics on lines {FLORES_TRAIN_LINES + 1}–1012. The paper trains on 1 GB of Arabic."
    )  # fmt: skip
    key = (tok.content_hash, target, preserved, h, corpora)
    if st.button("Train the new tokenizer", type="primary", key="reuse-train"):
        st.session_state["reuse-built"] = (key, build(tok, target, preserved, h, corpora))
    stored = st.session_state.get("reuse-built")
    if stored is None or stored[0] != key:
        st.info("Train the new tokenizer to see the preview, the held-out metrics and the export.")
        return
    built = stored[1]
    i = built["rt"].info
    st.success(
        f"New vocabulary {i['new_vocab_size']:,} tokens: {i['common_tokens']:,} already in {tok.name} (same id), "
        f"{i['reused_tokens']:,} placed on reused ids. Trained on {i['training_chars']:,} target characters."
    )
    before_after(tok, built["rt"], target)
    heldout(built, lang)
    consequence_and_export(tok, built, target)


page()

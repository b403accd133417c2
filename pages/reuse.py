"""Token reuse (R-BPE): give the ids of unused scripts to a new target-language BPE, vocabulary size unchanged."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import reuse
from analysis.flores import FLORES_TRAIN_LINES, split_lines
from ui import state
from ui.render import token_spans_html

st.title("Token reuse (R-BPE)")
st.caption(
    "R-BPE (Hamdan et al., EMNLP 2025) classifies the vocabulary by **Unicode block**, picks the classes of "
    "scripts you do not need (smallest first, up to the threshold h), trains a new byte-level BPE on the target "
    "language and maps its tokens onto those ids. Target-script text is encoded by the new tokenizer, "
    "everything else by the old one; every id is an old id, so the model's embedding matrix keeps its size."
)

TARGETS = {
    "arabic": "arb_Arab",
    "hebrew": "heb_Hebr",
    "cyrillic": "rus_Cyrl",
    "devanagari": "hin_Deva",
    "thai": "tha_Thai",
    "greek": "ell_Grek",
    "armenian": "hye_Armn",
    "georgian": "kat_Geor",
    "ethiopic": "amh_Ethi",
}
PRESERVABLE = ["latin", "greek", "cyrillic", "cjk", "devanagari", "thai", "hebrew", "armenian", "georgian"]
SAMPLE = {
    "arabic": "يتحدث الباحثون عن نتائج جديدة في علم الفلك. Researchers describe new results in astronomy.",
}


@st.cache_resource(
    show_spinner="Classifying the vocabulary by Unicode block (once per tokenizer)…", max_entries=4
)
def _classes(_tok, tok_hash: str) -> reuse.VocabClasses:
    return reuse.classify_vocab(_tok)


@st.cache_data(show_spinner="Measuring on held-out FLORES and packing the export…", max_entries=4)
def _results(key: tuple, _rt: reuse.ReuseTokenizer, lang: str) -> tuple[dict, dict, dict | None, bytes]:
    """Held-out metrics (target with parity, English), the reused-script demo and the zip, once per build."""
    held, eng = split_lines(lang)[1], split_lines("eng_Latn")[1]
    return (
        reuse.compare(_rt, held, eng),
        reuse.compare(_rt, eng),
        reuse.reused_script_demo(_rt),
        _rt.zip_bytes(),
    )


def _build(tok, target: str, preserved: tuple[str, ...], h: int, lang: str, corpora: bool, bar):
    texts = reuse.target_training_texts(lang, corpora=corpora)
    return reuse.build_reuse_tokenizer(
        tok,
        texts,
        target=target,
        preserved=preserved,
        min_reusable=h,
        progress=lambda done, total, msg="": bar.progress(min(done / total, 1.0), text=msg),
    )


def page() -> None:
    """The whole page (a function, so early exits still let app.py draw the sidebar)."""
    tok = state.pick_tokenizer("Tokenizer", key="reuse-tok")
    if tok.model_type != "BPE" or not tok.is_byte_level:
        st.error(
            f"**{tok.name}** is a {tok.flavour} tokenizer. R-BPE token reuse works on byte-level BPE tokenizers "
            "(GPT-2, Llama-3, Qwen, SmolLM style): load one on *Load & inspect*.",
            icon="⚠️",
        )
        return

    vc = _classes(tok, tok.content_hash)
    c1, c2, c3 = st.columns(3)
    target = c1.selectbox("Target script", list(TARGETS), key="reuse-target")
    preserved = c2.multiselect("Also preserve", PRESERVABLE, default=["latin", "greek"], key="reuse-preserve")
    h = int(c3.number_input("Threshold h (reusable ids)", 100, 200_000, 20_000, step=1000, key="reuse-h"))
    plan = state.guarded(reuse.choose_reusable, vc, target, tuple(preserved), h)
    if plan is None:
        return

    counts = vc.counts()
    top = list(counts.items())[:40]
    status = [
        "reused" if k in plan.selected else "preserved" if k in plan.preserved_classes else "kept"
        for k, _ in top
    ]
    colour = {"reused": "#ef4444", "preserved": "#22c55e", "kept": "#94a3b8"}
    fig = go.Figure(
        go.Bar(
            x=[k for k, _ in top],
            y=[v for _, v in top],
            marker_color=[colour[s] for s in status],
            customdata=status,
            hovertemplate="%{x}: %{y:,} tokens (%{customdata})<extra></extra>",
        )
    )
    fig.update_layout(
        title="Tokens per Unicode class (40 largest; red = reused, green = preserved)",
        yaxis_type="log",
        yaxis_title="tokens",
        height=380,
        margin=dict(t=40, b=10),
    )
    st.plotly_chart(fig, width="stretch", key="reuse-classes-chart")
    st.caption(
        f"{len(counts)} classes; {len(vc.unclassified):,} tokens unclassified (whitespace, General Punctuation); "
        f"{len(vc.special_ids) + len(vc.byte_ids):,} special and single-byte ids are never reused."
    )

    m1, m2, m3 = st.columns(3)
    m1.metric("Reusable classes", len(plan.selected))
    m2.metric("Reusable ids", f"{plan.reusable_count:,}")
    m3.metric("Eligible classes", len(plan.eligible))
    with st.expander("Reusable classes (smallest first)"):
        st.dataframe(
            pd.DataFrame({"class": list(plan.selected), "tokens": list(plan.selected.values())}),
            hide_index=True,
            key="reuse-selected-table",
        )

    lang = TARGETS[target]
    corpora = st.checkbox(
        "Also train on the shared corpora of this language (prose, UI strings, word-frequency list; slower, better)",
        value=False,
        key="reuse-corpora",
    )
    st.caption(
        f"Training text: FLORES-200 {lang} lines 1–{FLORES_TRAIN_LINES}"
        + (" + shared corpora" if corpora else "")
        + f"; held-out metrics on lines {FLORES_TRAIN_LINES + 1}–1012. The paper trains on 1 GB of Arabic."
    )
    key = (tok.content_hash, target, tuple(sorted(preserved)), h, lang, corpora)
    if st.button("Train the new tokenizer", type="primary", key="reuse-train"):
        bar = st.progress(0.0, text="Starting…")
        built = state.guarded(_build, tok, target, tuple(sorted(preserved)), h, lang, corpora, bar)
        bar.empty()
        if built is not None:
            st.session_state["reuse-built"] = (key, built)
    stored = st.session_state.get("reuse-built")
    if stored is None or stored[0] != key:
        st.info("Train the new tokenizer to see the preview, the held-out metrics and the export.")
        return
    rt: reuse.ReuseTokenizer = stored[1]

    i = rt.info
    st.success(
        f"New vocabulary {i['new_vocab_size']:,} tokens: {i['common_tokens']:,} already in {tok.name} (same id), "
        f"{i['reused_tokens']:,} placed on reused ids. Trained on {i['training_chars']:,} target characters."
    )

    # ------------------------------------------------------------------------------------------ preview
    st.subheader("Before / after")
    text = st.text_area("Text", SAMPLE.get(target, split_lines(lang)[1][0]), key="reuse-text", height=90)
    before = tok.tokenizer.encode(text, add_special_tokens=False)
    ids, offs, _ = rt.encode_with_offsets(text)
    p1, p2 = st.columns(2)
    with p1:
        st.markdown(f"**{tok.name}**: {len(before.ids)} tokens")
        st.html(token_spans_html(tok, text, before.ids, before.offsets))
    with p2:
        n_new = sum(1 for x in ids if x in rt.reused_ids)
        st.markdown(f"**R-BPE**: {len(ids)} tokens ({n_new} on reused ids)")
        st.html(token_spans_html(tok, text, ids, offs))
    if rt.decode(ids) != text:
        st.warning("This text does not decode back exactly (it contains characters of a reused script).")

    # ------------------------------------------------------------------------------------------ metrics
    st.subheader(f"Held-out FLORES ({lang}, lines {FLORES_TRAIN_LINES + 1}–1012)")
    cmp_t, cmp_e, demo, zipped = _results(key, rt, lang)
    rows = []
    for name, c in ((lang, cmp_t), ("eng_Latn", cmp_e)):
        rows.append(
            {
                "language": name,
                "fertility before": c["before"]["fertility"],
                "fertility after": c["after"]["fertility"],
                "change": f"{c['fertility_change']:+.1%}",
                "bytes/token before": c["before"]["bytes_per_token"],
                "bytes/token after": c["after"]["bytes_per_token"],
            }
        )
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="reuse-metrics-table")
    st.caption(
        f"Parity {lang} / eng_Latn (tokens per parallel sentence): {cmp_t['parity_before']:.3f} → "
        f"{cmp_t['parity_after']:.3f}. The paper reports −24.4 % Arabic fertility on average with 1 GB of training text."
    )

    # ------------------------------------------------------------------------------------------ consequence
    if demo is not None:
        st.warning(
            "**Reused scripts now decode as the target.** Their ids belong to the new tokenizer: text in a reused "
            f"script still encodes to old ids, but {demo['n_reused']} of its {len(demo['ids'])} ids now mean "
            f"{target} tokens.\n\n*Input:* {demo['text']}\n\n*Decoded:* {demo['decoded']}",
            icon="♻️",
        )

    st.download_button(
        "Download the R-BPE tokenizer (.zip)",
        zipped,
        file_name=f"{tok.name}-rbpe-{target}.zip",
        mime="application/zip",
        key="reuse-download",
    )
    st.caption(
        "The zip holds `old_tokenizer/`, `new_tokenizer/` and `rbpe_mapping.json` (id maps, target blocks); load "
        "it with `analysis.reuse.ReuseTokenizer.load(folder)`."
    )


page()

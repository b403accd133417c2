"""Extend: continued BPE training vs naive extension, with a live before/after preview and export."""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import AnalysisError, bpe
from analysis.corpora import Corpus, Source, shared_corpora
from analysis.export import zip_bytes
from analysis.extension import ADDED_MARK, METHOD_LABELS, Plan, Preview, methods_for, plan
from analysis.flores import FLORES_TRAIN_LINES, available_codes, split_lines
from analysis.training import continue_training
from ui import state

st.title("Extend a tokenizer")
st.caption(
    "Add N tokens learned from your text. **Continued BPE training** (paper 000 §3.1) continues the merge "
    "learning on top of the tokenizer's own segmentation, so every new token is reachable. The **naive** "
    "baselines train a separate tokenizer on the same text and add its new tokens (regenerated merges, its "
    "appended merge list, or `add_tokens`). One training run gives every N up to the maximum: the slider only "
    "re-applies a prefix."
)

PALETTE = ["#fde68a", "#bfdbfe", "#bbf7d0", "#fecaca", "#ddd6fe", "#fed7aa", "#a5f3fc", "#f5d0fe"]


# ------------------------------------------------------------------------------------------ caches
@st.cache_data(show_spinner=False, max_entries=8)
def _continued(_tok, tok_hash: str, _text: Corpus, text_fp: str, n_max: int, max_len: int | None):
    """One continued-training run (keyed by tokenizer hash, text fingerprint and parameters)."""
    return continue_training(_tok, _text, n_max, max_token_length=max_len)


@st.cache_data(show_spinner=False, max_entries=8)
def _aux(_tok, tok_hash: str, _text: Corpus, text_fp: str, n_max: int, max_len: int | None):
    """The auxiliary tokenizer of the naive baselines (one per tokenizer/text/size)."""
    return plan(
        _tok,
        "add-tokens" if _tok.model_type != "WordPiece" else "wordpiece",
        _text,
        n_max,
        max_token_length=max_len,
    ).aux


@st.cache_resource(show_spinner=False, max_entries=4)
def _preview(
    _tok,
    tok_hash: str,
    text_fp: str,
    n_max: int,
    max_len: int | None,
    methods: tuple[str, ...],
    eval_key: tuple,
    _plans: dict,
    _texts: dict,
    target: str,
    sentence: str,
) -> Preview:
    """The live-preview engine (simulators, caches) for one training configuration."""
    return Preview(
        _tok,
        _plans,
        _texts,
        target=target,
        english="eng_Latn" if "eng_Latn" in _texts else None,
        sentence=sentence,
    )


def spans(pieces: list[str]) -> str:
    """Coloured token spans (whitespace made visible)."""
    out = ['<div style="line-height:2.1;font-family:monospace">']
    for k, p in enumerate(pieces):
        shown = p.replace(" ", "·").replace("\n", "↵")
        out.append(
            f'<span style="background:{PALETTE[k % len(PALETTE)]};padding:2px 1px;margin:0 1px;'
            f'border-radius:3px">{html.escape(shown)}</span>'
        )
    out.append("</div>")
    return "".join(out)


def tree_lines(tok, node: dict, depth: int = 0, expand: bool = False) -> list[str]:
    """An indented text rendering of a merge tree (★ = new token; base leaves expanded with analysis.bpe)."""
    mark = "★ " if node.get("new") else ""
    if node.get("new"):
        rank = f"  (appended merge #{node['rank']})" if node.get("rank") else ""
    else:
        rank = (
            f"  (base merge #{node['rank']})"
            if node.get("rank") is not None and depth and "text" not in node
            else ""
        )
    text = node.get("text") or tok.readable(node["token"])
    out = ["  " * depth + f"{mark}{text!r}{rank}"]
    kids = node.get("children") or []
    if not kids and expand and not node.get("new") and len(node["token"]) > 1:
        try:
            base_tree = bpe.merge_tree(tok, node["token"])
            kids = base_tree.get("children") or []
        except AnalysisError:
            kids = []
    for k in kids:
        out.extend(tree_lines(tok, k, depth + 1, expand))
    return out


def page() -> None:
    """The whole page."""
    tok = state.pick_tokenizer("Tokenizer", key="ext-tok")
    st.caption("Add Llama-3.1, Qwen3, Llama-2 … from the sidebar examples or the Load & inspect page.")
    available = methods_for(tok)
    s = tok.summary()
    st.caption(
        f"{tok.name}: {s['model_type']}, {s['flavour']}, {s['vocab_size']:,} tokens, {s['merges']:,} merges"
        + (", ignore_merges on" if s["ignore_merges"] else "")
    )

    # -------------------------------------------------------------------------------------- text
    langs = available_codes()
    if not langs:
        st.error("FLORES-200 devtest files were not found (set TOKLAB_ASSETS to the shared assets folder).")
        return
    c1, c2 = st.columns(2)
    lang = c1.selectbox(
        "Target language (FLORES-200)",
        langs,
        index=langs.index("est_Latn") if "est_Latn" in langs else 0,
        key="ext-lang",
    )
    others = c2.multiselect(
        "Other languages to check",
        [x for x in langs if x != lang],
        default=["eng_Latn"] if lang != "eng_Latn" else [],
        key="ext-others",
    )
    st.info(
        f"FLORES {lang}: lines 1–{FLORES_TRAIN_LINES} can be used for **training**; lines "
        f"{FLORES_TRAIN_LINES + 1}–1012 are **held out** and only used to measure. Other languages are measured "
        "on all 1,012 lines.",
        icon="ℹ️",
    )
    with st.expander("Training text", expanded=True):
        use_flores = st.checkbox(
            f"FLORES {lang} training lines (1–{FLORES_TRAIN_LINES})", value=True, key="ext-use-flores"
        )
        corpora = shared_corpora()
        default_c = [k for k in (f"text/{lang}.txt.gz",) if k in corpora]
        chosen = st.multiselect("Shared corpora", list(corpora), default=default_c, key="ext-corpora")
        uploads = st.file_uploader(
            "Upload text files (.txt, .jsonl, .gz) or a .zip of them",
            accept_multiple_files=True,
            key="ext-uploads",
        )
        folder = st.text_input("Local folder with text files (optional)", key="ext-folder")
        budget = st.number_input(
            "Character budget",
            min_value=10_000,
            max_value=2_000_000_000,
            value=5_000_000,
            step=1_000_000,
            key="ext-budget",
        )
    sources = []
    if use_flores:
        sources.append(Source("flores-train", f"{lang}:{FLORES_TRAIN_LINES}"))
    sources += [Source("file", str(corpora[k])) for k in chosen]
    sources += [Source("bytes", u.name, u.getvalue()) for u in uploads or []]
    if folder.strip():
        sources.append(Source("folder", folder.strip()))
    if not sources:
        st.warning("Choose some training text.")
        return
    text = Corpus(tuple(sources), int(budget))

    # -------------------------------------------------------------------------------------- methods
    c1, c2, c3 = st.columns([2, 1, 1])
    defaults = [m for m in ("continued", "regen") if m in available] or available[:1]
    methods = c1.multiselect(
        "Methods", available, default=defaults, format_func=lambda m: METHOD_LABELS[m], key="ext-methods"
    )
    n_max = int(c2.number_input("Train up to N new tokens", 10, 64_000, 1000, step=500, key="ext-nmax"))
    max_len = int(c3.number_input("Max token length (0 = none)", 0, 128, 0, key="ext-maxlen")) or None
    if not methods:
        st.warning("Choose at least one method.")
        return
    config = (tok.content_hash, text.fingerprint, n_max, max_len, tuple(methods), lang, tuple(others))
    if st.button("Train", type="primary", key="ext-train"):
        st.session_state["ext-config"] = config
    if st.session_state.get("ext-config") != config:
        st.caption("Press **Train** to run the chosen methods on this text (trained once, then cached).")
        return

    # -------------------------------------------------------------------------------------- training
    plans: dict[str, Plan] = {}
    try:
        with st.spinner("Training (once per tokenizer, text and N) …"):
            if "continued" in methods:
                res = _continued(tok, tok.content_hash, text, text.fingerprint, n_max, max_len)
                plans["continued"] = plan(tok, "continued", [], n_max, training=res)
            naive = [m for m in methods if m != "continued"]
            if naive:
                aux = _aux(tok, tok.content_hash, text, text.fingerprint, n_max, max_len)
                for m in naive:
                    plans[m] = plan(tok, m, [], n_max, aux=aux)
    except AnalysisError as e:
        state.show_error(e)
        return
    if "continued" in plans:
        tr = plans["continued"].training
        st.caption(
            f"Continued training: {tr.n_new:,} new tokens from {tr.chars:,} characters "
            f"({tr.word_types:,} word types) in {tr.seconds.get('total', 0):.1f} s"
            + (f"; {len(tr.char_steps)} missing characters added first" if tr.char_steps else "")
        )

    _, held = split_lines(lang)
    texts = {f"{lang} held-out": held}
    for o in others:
        texts[o] = [ln for ln in Source("flores", o).units()]
    target = f"{lang} held-out"
    pv = _preview(
        tok,
        tok.content_hash,
        text.fingerprint,
        n_max,
        max_len,
        tuple(methods),
        (lang, tuple(others)),
        plans,
        texts,
        target,
        held[0],
    )
    n_cap = max(p.n_available for p in plans.values())
    if n_cap < 1:
        st.error("The text gave no new tokens.")
        return
    n = st.slider("N (new tokens)", 1, n_cap, n_cap, key="ext-n")

    # -------------------------------------------------------------------------------------- metrics
    results = {m: pv.at(m, n) for m in plans}
    rows = []
    for m, r in results.items():
        row = {"method": METHOD_LABELS[m], "added": r["added"]}
        for k, v in r["texts"].items():
            row[f"{k}: before"] = round(v["before"], 4)
            row[f"{k}: after"] = round(v["after"], 4)
            row[f"{k}: Δrel"] = f"{v['delta_rel']:+.2%}"
        row["STT-unreachable added"] = (
            r["unreachable_added"] if m in ("continued", "regen", "merges") else "n/a"
        )
        row["added tokens used on held-out"] = (
            f"{r['used_share']:.1%}" if not math.isnan(r["used_share"]) else "—"
        )
        if "english" in r:
            row["English exact match"] = f"{r['english']['exact_match']:.1%}"
            row["English Levenshtein (mean / max)"] = (
                f"{r['english']['levenshtein']:.4f} / {r['english']['levenshtein_max']:.3f}"
            )
        rows.append(row)
    st.subheader(f"Bytes per token at N = {n:,}")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(
        "Bytes/token = Σ UTF-8 bytes / Σ tokens (no special tokens). Δrel = relative change. "
        "STT-unreachable = added tokens the merges can never build (methods.md §2). English exact match "
        "and Levenshtein distance (per sentence, divided by the base length) compare with the base "
        "tokenization, as in paper 000 Table 6. Preview update: "
        + ", ".join(f"{m} {r['seconds']:.2f} s" for m, r in results.items())
    )

    # curve
    points = sorted({max(1, round(n_cap * k / 12)) for k in range(1, 13)} | {n})
    fig = go.Figure()
    for m in plans:
        cur = _curve(pv, m, tuple(points), (tok.content_hash, text.fingerprint, n_max, max_len, lang))
        fig.add_trace(
            go.Scatter(
                x=[x for x, _ in cur], y=[y for _, y in cur], mode="lines+markers", name=METHOD_LABELS[m]
            )
        )
    fig.add_vline(x=n, line_dash="dot")
    fig.update_layout(
        xaxis_title="N new tokens",
        yaxis_title=f"bytes / token ({target})",
        height=360,
        margin=dict(l=10, r=10, t=30, b=10),
    )
    st.plotly_chart(fig, width="stretch")

    # sentence before / after
    st.subheader("One sentence, before and after")
    id2tok = tok.id_to_token
    st.markdown("**Base**")
    first = next(iter(results.values()))
    st.markdown(
        spans([tok.readable(id2tok[i]) for i in first.get("sentence_before", [])]), unsafe_allow_html=True
    )
    for m, r in results.items():
        inv = {i: t for t, i in r["new_ids"].items()}
        pieces = [
            tok.readable(id2tok[i])
            if i in id2tok
            else inv[i].lstrip(ADDED_MARK)
            if m == "add-tokens"
            else tok.readable(inv[i])
            for i in r.get("sentence_after", [])
        ]
        st.markdown(
            f"**{METHOD_LABELS[m]}** ({len(pieces)} tokens vs {len(first.get('sentence_before', []))})"
        )
        st.markdown(spans(pieces), unsafe_allow_html=True)

    # added tokens
    st.subheader("Added tokens")
    tabs = st.tabs([METHOD_LABELS[m] for m in plans])
    for tab, (m, r) in zip(tabs, results.items()):
        with tab:
            p = plans[m]
            freq = {}
            if p.training is not None:
                freq = {s.token: s.freq for s in p.training.prefix(n) if s.new}
            unreach = set(r["unreachable"])
            counts = r["used_counts"]
            table = []
            for k, t in enumerate(r["added_tokens"], 1):
                key = ADDED_MARK + t if m == "add-tokens" else t
                tid = r["new_ids"].get(key)
                table.append(
                    {
                        "#": k,
                        "id": tid,
                        "token": t if m == "add-tokens" else tok.readable(t),
                        "training pair frequency": freq.get(t),
                        "held-out count": counts.get(tid, 0),
                        "reachable": t not in unreach,
                    }
                )
            df = pd.DataFrame(table)
            st.dataframe(df, hide_index=True, width="stretch", height=280)
            if m in ("continued", "regen", "merges") and r["added_tokens"]:
                opts = r["added_tokens"][: min(2000, len(r["added_tokens"]))]
                pick = st.selectbox("Merge tree of", opts, format_func=tok.readable, key=f"ext-tree-{m}")
                expand = st.checkbox("Expand base tokens into their base merges", key=f"ext-tree-x-{m}")
                tree = pv.merge_tree(m, n, pick)
                st.code("\n".join(tree_lines(tok, tree, expand=expand)), language=None)
                if not tree.get("reachable"):
                    st.warning("Unreachable: the merges build the pieces above, never the token itself.")

    # export
    st.subheader("Export")
    c1, c2 = st.columns([2, 1])
    em = c1.selectbox(
        "Method to export", list(plans), format_func=lambda m: METHOD_LABELS[m], key="ext-export-m"
    )
    if c2.button("Build the extended tokenizer", key="ext-build"):
        with st.spinner("Building tokenizer.json …"):
            try:
                ext = pv.extension(em, n)
            except AnalysisError as e:
                state.show_error(e)
                return
            r = results[em]
            report = {
                "base": tok.name,
                "base_hash": tok.content_hash,
                "method": em,
                "method_label": METHOD_LABELS[em],
                "n": r["n"],
                "added": ext.n_added,
                "merges_added": len(ext.merges),
                "text": text.label,
                "text_fingerprint": text.fingerprint,
                "max_token_length": max_len,
                "unreachable_added": r["unreachable_added"],
                "metrics": r["texts"],
                "english": r.get("english"),
                "used_share": r["used_share"],
            }
            st.session_state["ext-zip"] = (
                em,
                n,
                config,
                zip_bytes(ext.tokenizer, report, folder=f"{tok.name}-{em}-{n}".replace(" ", "_")),
            )
    z = st.session_state.get("ext-zip")
    if z and z[0] == em and z[1] == n and z[2] == config:
        st.download_button(
            "Download zip (Hugging Face folder)",
            z[3],
            file_name=f"{tok.name}-{em}-{n}.zip".replace(" ", "_"),
            mime="application/zip",
            key="ext-download",
        )
        st.caption(
            "tokenizer.json (merges as lists), tokenizer_config.json, special_tokens_map.json and "
            "extension_report.json; loads with AutoTokenizer.from_pretrained and Tokenizer.from_file."
        )


@st.cache_data(show_spinner=False, max_entries=32)
def _curve(_pv: Preview, method: str, points: tuple[int, ...], key: tuple) -> list[tuple[int, float]]:
    """Bytes/token over N for one method (from the single training run)."""
    return _pv.curve(method, points)


page()

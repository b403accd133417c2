"""Source-attributed BPE: train plain BPE and SA-BPE side by side on repository/language-attributed code."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import AnalysisError
from analysis import sabpe as S
from analysis.export import zip_bytes
from ui import state

DEFAULT_LANGS = ["python", "go", "rust", "javascript", "lua", "ruby"]
METRIC_LABELS = {
    "bytes_per_token": "bytes/token (held-out) ↑",
    "coverage": "coverage: vocab tokens used (held-out) ↑",
    "mean_token_length": "mean token length (bytes)",
    "gini": "Gini of token frequencies (held-out) ↓",
    "single_repo_share": "single-repo tokens, % of used learned tokens (≥90% of training occurrences) ↓",
    "single_repo_tokens": "single-repo tokens (count) ↓",
    "single_repo_merges": "merges found in one repository ↓",
    "skipped": "skipped pairs",
    "stt_unreachable": "STT-unreachable tokens",
    "train_seconds": "training time (s)",
}


@st.cache_resource(show_spinner="Reading and pre-tokenizing the code corpus…", max_entries=4)
def _words(tok_hash: str, _base, langs: tuple[str, ...], files_per_repo: int) -> S.SourceWords:
    return S.collect_words(_base, S.read_code(languages=langs, max_files_per_repo=files_per_repo))


@st.cache_resource(show_spinner=False, max_entries=4)
def _heldout(langs: tuple[str, ...], files_per_repo: int) -> list[str]:
    held = [x for x in langs if x in S.code_languages(heldout=True)]
    if not held:
        return []
    return [r.text for r in S.read_code(languages=held, heldout=True, max_files_per_repo=files_per_repo)]


def _train(key: tuple, base, words, vocab: int, priority: str, skip: S.SkipRule, progress) -> S.SABPEResult:
    """One training run, kept in this browser session (the last 6 runs; a progress bar needs a live call)."""
    store = st.session_state.setdefault("sa-results", {})
    if key not in store:
        name = "BPE" if priority == "F" and not skip.active else f"SA-BPE [{priority}]"
        store[key] = S.train(base, words, vocab, priority=priority, skip=skip, name=name, progress=progress)
        while len(store) > 6:
            store.pop(next(iter(store)))
    return store[key]


@st.cache_resource(show_spinner="Measuring on held-out repositories…", max_entries=8)
def _evaluate(key: tuple, _res: S.SABPEResult, _held: list[str]) -> dict:
    return S.evaluate(_res, _held)


def history_figure(runs: dict[str, S.SABPEResult], y: str) -> go.Figure:
    """Merge history: one line per run over the merge index; skipped pairs marked with ×."""
    fig = go.Figure()
    colours = ["#2563eb", "#dc2626", "#059669"]
    for k, (label, res) in enumerate(runs.items()):
        hist = pd.DataFrame(res.history_records())
        if hist.empty:
            continue
        hist["index"] = range(1, len(hist) + 1)
        merged, skipped = hist[~hist["skipped"]], hist[hist["skipped"]]
        hover = "%{customdata[0]}<br>F=%{customdata[1]:,} R=%{customdata[2]} L=%{customdata[3]}"
        cd = ["token", "freq", "repos", "languages"]
        fig.add_trace(
            go.Scattergl(
                x=merged["index"], y=merged[y], mode="markers", marker={"size": 3, "color": colours[k % 3]},
                name=f"{label}: merged", customdata=merged[cd].to_numpy(), hovertemplate=hover,
            )
        )  # fmt: skip
        if len(skipped):
            fig.add_trace(
                go.Scattergl(
                    x=skipped["index"], y=skipped[y], mode="markers",
                    marker={"size": 6, "symbol": "x", "color": colours[k % 3]}, name=f"{label}: skipped",
                    customdata=skipped[cd].to_numpy(), hovertemplate=hover,
                )
            )  # fmt: skip
    fig.update_layout(
        xaxis_title="queue step (merge index, skipped pairs included)",
        yaxis_title={
            "freq": "F (pair frequency)",
            "repos": "R (repositories)",
            "languages": "L (languages)",
            "priority": "priority",
        }[y],  # fmt: skip
        height=420,
        margin={"t": 30},
    )
    if y in ("freq", "priority"):
        fig.update_yaxes(type="log")
    return fig


def page() -> None:
    """The whole page."""
    st.title("Source-attributed BPE (SA-BPE)")
    st.caption(
        "Train a byte-level BPE tokenizer from scratch on code whose files carry their **repository** and "
        "**language** (paper 003). Every candidate pair keeps its frequency F, the number of repositories R and "
        "languages L it occurs in. SA-BPE changes the merge **priority** (e.g. F·log R·L) and can **skip** merges "
        "that live in too few sources. Inference stays plain BPE. Plain BPE (priority F) is trained on the "
        "same words for comparison, and both are measured on held-out repositories."
    )
    langs_all = S.code_languages()
    if not langs_all:
        st.error("The shared code corpus was not found (set TOKLAB_ASSETS to the shared assets folder).")
        return
    base = state.pick_tokenizer("Normalizer + pre-tokenizer from", key="sa-base")
    if not base.is_byte_level:
        st.error(
            f"{base.name} is not byte-level: choose GPT-2, Qwen, Llama-3 … (its pre-tokenizer is reused)."
        )
        return
    c1, c2, c3 = st.columns([3, 1, 1])
    langs = c1.multiselect(
        "Code languages", langs_all, default=[x for x in DEFAULT_LANGS if x in langs_all], key="sa-langs"
    )
    files = c2.number_input("Files per repository", 1, 200, 3, key="sa-files")
    vocab = c3.number_input("Vocabulary size", 300, 32768, 2000, step=100, key="sa-vocab")
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    priority = c1.selectbox(
        "Priority criterion", S.PRIORITIES, index=S.PRIORITIES.index(S.DEFAULT_PRIORITY), key="sa-priority",
        format_func=lambda p: f"{p} — {S.PRIORITY_HELP[p]}",
    )  # fmt: skip
    min_r = c2.number_input("Skip if R <", 1, 100, 1, key="sa-min-r", help="paper's R_t (1 = off)")
    min_l = c3.number_input("Skip if L <", 1, 20, 1, key="sa-min-l", help="paper's L_t (1 = off)")
    share = c4.number_input(
        "Skip if top-repo share >", 0.0, 1.0, 1.0, step=0.05, key="sa-share", help="1.0 = off (our addition)"
    )
    skip = S.SkipRule(int(min_r), int(min_l), None if share >= 1.0 else float(share))
    if not langs:
        st.info("Choose at least one language.")
        return
    params = (base.content_hash, tuple(sorted(langs)), int(files), int(vocab))
    if st.button("Train plain BPE and SA-BPE", type="primary", key="sa-train"):
        st.session_state["sa-run"] = (params, priority, skip)
    run = st.session_state.get("sa-run")
    if not run or run[0] != params or run[1] != priority or run[2] != skip:
        st.info(
            "Press the button to train (cached: changing a setting back shows the earlier result at once)."
        )
        if not run:
            return
        params, priority, skip = run
    _, lang_key, n_files, n_vocab = params
    try:
        words = _words(base.content_hash, base, lang_key, n_files)
        held = _heldout(lang_key, n_files)
        runs: dict[str, S.SABPEResult] = {}
        configs = [("BPE", "F", S.SkipRule())]
        if priority != "F" or skip.active:
            configs.append(("SA-BPE", priority, skip))
        for label, pr, sk in configs:
            key = (*params, pr, sk)
            bar = st.progress(0.0, text=f"Training {label} …")
            runs[label] = _train(
                key,
                base,
                words,
                n_vocab,
                pr,
                sk,
                lambda d, t, m="", b=bar: b.progress(min(d / t, 1.0), f"{d:,} / {t:,} {m}"),
            )
            bar.empty()
        metrics = (
            {lb: _evaluate((*params, r.priority, r.skip), r, held) for lb, r in runs.items()} if held else {}
        )
    except AnalysisError as e:
        state.show_error(e)
        return
    st.caption(
        f"{words.n_records:,} files, {len(words.repos)} repositories, {len(words.languages)} languages, "
        f"{words.n_bytes / 1e6:.1f} MB, {len(words.words):,} word types; held-out: {len(held):,} files."
    )

    # ------------------------------------------------------------------------------ comparison
    st.subheader("Comparison on held-out repositories")
    if metrics:
        rows = []
        for field, label in METRIC_LABELS.items():
            row = {"metric": label}
            for lb, m in metrics.items():
                row[f"{lb} ({runs[lb].label})"] = m[field] * 100 if field == "single_repo_share" else m[field]
            rows.append(row)
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    else:
        st.warning(
            "None of the chosen languages has held-out repositories; only training statistics are shown."
        )
        st.dataframe(pd.DataFrame([r.summary() | {"run": lb} for lb, r in runs.items()]), hide_index=True)

    # ------------------------------------------------------------------------------ history
    st.subheader("Merge history")
    y = st.radio(
        "Plot", ["repos", "languages", "freq", "priority"], horizontal=True, key="sa-y",
        format_func=lambda v: {"repos": "R", "languages": "L", "freq": "F", "priority": "priority"}[v],
    )  # fmt: skip
    st.plotly_chart(history_figure(runs, y), width="stretch")

    # ------------------------------------------------------------------------------ concentrated
    st.subheader("Tokens most concentrated in one repository")
    cols = st.columns(len(runs))
    for col, (lb, res) in zip(cols, runs.items()):
        col.markdown(f"**{lb}** ({res.label})")
        conc = res.concentrated(25)
        if conc:
            col.dataframe(pd.DataFrame(conc), hide_index=True, width="stretch")
        else:
            col.caption("No learned token has ≥ 90 % of its training occurrences in one repository.")

    # ------------------------------------------------------------------------------ export
    st.subheader("Export")
    cols = st.columns(len(runs))
    for col, (lb, res) in zip(cols, runs.items()):
        report = res.summary() | {"metrics": metrics.get(lb)}
        col.download_button(
            f"Download {lb} tokenizer (.zip)",
            zip_bytes(res.tokenizer, report, folder=lb.lower(), report_name="sabpe_report.json"),
            file_name=f"{lb.lower()}-{n_vocab}.zip",
            mime="application/zip",
            key=f"sa-dl-{lb}",
        )
        if col.button(f"Add {lb} to the library", key=f"sa-add-{lb}"):
            name = state.add_to_library(res.tokenizer, f"{lb} {res.priority} {n_vocab}")
            col.success(f"Added as {name}.")


page()

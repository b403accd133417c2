"""Source-attributed BPE: train plain BPE and SA-BPE side by side on repository/language-attributed code."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import DataError, LoadedTokenizer
from analysis import sabpe as S
from analysis.export import zip_bytes
from analysis.references import cite
from ui.caching import cache_resource
from ui.library import add_to_library
from ui.pickers import BYTE_LEVEL, pick_tokenizer
from ui.progress import progress

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
Y_LABELS = {
    "repos": "R (repositories)",
    "languages": "L (languages)",
    "freq": "F (pair frequency)",
    "priority": "priority",
}
COLOURS = ["#2563eb", "#dc2626", "#059669"]
MAX_RUNS = 6


@cache_resource(show_spinner="Reading and pre-tokenizing the code corpus…", max_entries=4)
def _words(base: LoadedTokenizer, langs: tuple[str, ...], files_per_repo: int) -> S.SourceWords:
    return S.collect_words(base, S.read_code(languages=langs, max_files_per_repo=files_per_repo))


@cache_resource(show_spinner=False, max_entries=4)
def _heldout(langs: tuple[str, ...], files_per_repo: int) -> list[str]:
    held = [x for x in langs if x in S.code_languages(heldout=True)]
    if not held:
        return []
    return [r.text for r in S.read_code(languages=held, heldout=True, max_files_per_repo=files_per_repo)]


def train_run(
    base: LoadedTokenizer, params: tuple, priority: str, skip: S.SkipRule
) -> tuple[S.SABPEResult, dict | None]:
    """One training run and its held-out metrics, kept in this session (the last runs; the bar needs a live call)."""
    _, langs, files, vocab = params
    store = st.session_state.setdefault("sa-results", {})
    key = (*params, priority, skip)
    if key not in store:
        name = "BPE" if priority == "F" and not skip.active else f"SA-BPE [{priority}]"
        words = _words(base, langs, files)
        with progress(f"Training {name} …") as cb:
            res = S.train(base, words, vocab, priority=priority, skip=skip, name=name, progress=cb)
        held = _heldout(langs, files)
        with st.spinner("Measuring on held-out repositories…"):
            store[key] = (res, S.evaluate(res, held) if held else None)
        while len(store) > MAX_RUNS:
            store.pop(next(iter(store)))
    return store[key]


def history_figure(runs: dict[str, S.SABPEResult], y: str) -> go.Figure:
    """Merge history: one line per run over the merge index; skipped pairs marked with ×."""
    fig = go.Figure()
    hover = "%{customdata[0]}<br>F=%{customdata[1]:,} R=%{customdata[2]} L=%{customdata[3]}"
    cd = ["token", "freq", "repos", "languages"]
    for k, (label, res) in enumerate(runs.items()):
        hist = pd.DataFrame(res.history_records())
        if hist.empty:
            continue
        hist["index"] = range(1, len(hist) + 1)
        for part, kind, marker in ((hist[~hist["skipped"]], "merged", {"size": 3}),
                                   (hist[hist["skipped"]], "skipped", {"size": 6, "symbol": "x"})):  # fmt: skip
            if len(part):
                fig.add_trace(go.Scattergl(x=part["index"], y=part[y], mode="markers", name=f"{label}: {kind}",
                                           marker=marker | {"color": COLOURS[k % 3]}, customdata=part[cd].to_numpy(),
                                           hovertemplate=hover))  # fmt: skip
    fig.update_layout(xaxis_title="queue step (merge index, skipped pairs included)", yaxis_title=Y_LABELS[y],
                      height=420, margin={"t": 30})  # fmt: skip
    if y in ("freq", "priority"):
        fig.update_yaxes(type="log")
    return fig


def settings(langs_all: list[str]) -> tuple[list[str], int, int, str, S.SkipRule]:
    """Languages, files per repository, vocabulary size, priority and skip rule."""
    c1, c2, c3 = st.columns([3, 1, 1])
    langs = c1.multiselect(
        "Code languages", langs_all, default=[x for x in DEFAULT_LANGS if x in langs_all], key="sa-langs"
    )
    files = c2.number_input("Files per repository", 1, 200, 3, key="sa-files")
    vocab = c3.number_input("Vocabulary size", 300, 32768, 2000, step=100, key="sa-vocab")
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    priority = c1.selectbox("Priority criterion", S.PRIORITIES, index=S.PRIORITIES.index(S.DEFAULT_PRIORITY),
                            key="sa-priority", format_func=lambda p: f"{p} — {S.PRIORITY_HELP[p]}")  # fmt: skip
    min_r = c2.number_input("Skip if R <", 1, 100, 1, key="sa-min-r", help="paper's R_t (1 = off)")
    min_l = c3.number_input("Skip if L <", 1, 20, 1, key="sa-min-l", help="paper's L_t (1 = off)")
    share = c4.number_input("Skip if top-repo share >", 0.0, 1.0, 1.0, step=0.05, key="sa-share",
                            help="1.0 = off (our addition)")  # fmt: skip
    skip = S.SkipRule(int(min_r), int(min_l), None if share >= 1.0 else float(share))
    return langs, int(files), int(vocab), priority, skip


def comparison(runs: dict[str, S.SABPEResult], metrics: dict[str, dict]) -> None:
    """Every metric for every run on the held-out repositories (or training statistics when there are none)."""
    st.subheader("Comparison on held-out repositories")
    if not metrics:
        st.warning(
            "None of the chosen languages has held-out repositories; only training statistics are shown."
        )
        st.dataframe(pd.DataFrame([r.summary() | {"run": lb} for lb, r in runs.items()]), hide_index=True)
        return
    rows = [
        {"metric": label} | {f"{lb} ({runs[lb].label})": m[field] * 100 if field == "single_repo_share" else m[field]
                             for lb, m in metrics.items()}
        for field, label in METRIC_LABELS.items()
    ]  # fmt: skip
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def concentrated_and_export(runs: dict[str, S.SABPEResult], metrics: dict[str, dict], n_vocab: int) -> None:
    """The tokens most concentrated in one repository, and per run a zip and an "add to library" button."""
    st.subheader("Tokens most concentrated in one repository")
    for col, (lb, res) in zip(st.columns(len(runs)), runs.items()):
        col.markdown(f"**{lb}** ({res.label})")
        conc = res.concentrated(25)
        if conc:
            col.dataframe(pd.DataFrame(conc), hide_index=True, width="stretch")
        else:
            col.caption("No learned token has ≥ 90 % of its training occurrences in one repository.")
    st.subheader("Export")
    for col, (lb, res) in zip(st.columns(len(runs)), runs.items()):
        report = res.summary() | {"metrics": metrics.get(lb)}
        col.download_button(f"Download {lb} tokenizer (.zip)",
                            zip_bytes(res.tokenizer, report, folder=lb.lower(), report_name="sabpe_report.json"),
                            file_name=f"{lb.lower()}-{n_vocab}.zip", mime="application/zip", key=f"sa-dl-{lb}")  # fmt: skip
        if col.button(f"Add {lb} to the library", key=f"sa-add-{lb}"):
            col.success(f"Added as {add_to_library(res.tokenizer, f'{lb} {res.priority} {n_vocab}')}.")


def page() -> None:
    """Base pre-tokenizer and settings → `sabpe.train` (plain and SA-BPE) → comparison, history, export."""
    st.title("Source-attributed BPE (SA-BPE)")
    st.caption(
        "Train a byte-level BPE tokenizer from scratch on code whose files carry their **repository** and "
        f"**language** ({cite('sa-bpe')}). Every candidate pair keeps its frequency F, the number of repositories R and "
        "languages L it occurs in. SA-BPE changes the merge **priority** (e.g. F·log R·L) and can **skip** merges "
        "that live in too few sources. Inference stays plain BPE. Plain BPE (priority F) is trained on the "
        "same words for comparison, and both are measured on held-out repositories."
    )
    langs_all = S.code_languages()
    if not langs_all:
        raise DataError(
            "The shared code corpus was not found (set TOKLAB_ASSETS to the shared assets folder)."
        )
    base = pick_tokenizer(
        "Normalizer + pre-tokenizer from", key="sa-base", needs=BYTE_LEVEL, feature="SA-BPE"
    )
    if base is None:
        return
    langs, files, vocab, priority, skip = settings(langs_all)
    if not langs:
        st.info("Choose at least one language.")
        return
    params = (base.content_hash, tuple(sorted(langs)), files, vocab)
    if st.button("Train plain BPE and SA-BPE", type="primary", key="sa-train"):
        st.session_state["sa-run"] = (params, priority, skip)
    run = st.session_state.get("sa-run")
    if run != (params, priority, skip):
        st.info(
            "Press the button to train (cached: changing a setting back shows the earlier result at once)."
        )
        if not run or run[0][0] != base.content_hash:
            return
        params, priority, skip = run
    configs = [("BPE", "F", S.SkipRule())] + (
        [("SA-BPE", priority, skip)] if priority != "F" or skip.active else []
    )
    done = {label: train_run(base, params, pr, sk) for label, pr, sk in configs}
    runs = {label: res for label, (res, _) in done.items()}
    metrics = {label: m for label, (_, m) in done.items() if m is not None}
    words = _words(base, params[1], params[2])
    st.caption(
        f"{words.n_records:,} files, {len(words.repos)} repositories, {len(words.languages)} languages, "
        f"{words.n_bytes / 1e6:.1f} MB, {len(words.words):,} word types; held-out: {len(_heldout(params[1], params[2])):,} files."
    )
    comparison(runs, metrics)
    st.subheader("Merge history")
    y = st.radio("Plot", list(Y_LABELS), horizontal=True, key="sa-y",
                 format_func=lambda v: {"repos": "R", "languages": "L", "freq": "F", "priority": "priority"}[v])  # fmt: skip
    st.plotly_chart(history_figure(runs, y), width="stretch")
    concentrated_and_export(runs, metrics, params[3])


page()

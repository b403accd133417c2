"""Source-attributed BPE: train plain BPE and SA-BPE side by side on repository/language-attributed code."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import DataError, LoadedTokenizer
from analysis.commands._equivalent import sabpe_command
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.references import cite
from analysis.methods import sabpe as S
from analysis.methods.sabpe.defaults import (
    DEFAULT_MIN_LANGUAGES,
    DEFAULT_MIN_SOURCES,
    PAGE_FILES_PER_REPO,
    PAGE_LANGUAGES,
    PAGE_VOCAB_SIZE,
)
from analysis.texts import code
from analysis.texts.corpora import shared_corpora
from analysis.tokenizer.export import zip_bytes
from ui.caching import cache_resource
from ui.corpus_jobs import corpus_panel
from ui.export_check import export_check_section
from ui.library import add_to_library
from ui.pickers import BYTE_LEVEL, pick_tokenizer
from ui.progress import progress
from ui.robustness import measured, robustness_button
from ui.workspace import json_download

DEFAULT_LANGS = list(PAGE_LANGUAGES)
METRIC_LABELS = {
    "bytes_per_token": "bytes/token (held-out) ↑",
    "coverage": "coverage: vocab tokens used (held-out) ↑",
    "mean_token_length": "mean token length (bytes)",
    "token_frequency_gini": "Gini of token frequencies (held-out) ↓",
    "language_compression_gini": "Gini over per-language compression (held-out; the paper's) ↓",
    "three_digit_numbers": "three-digit numbers as tokens",
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
    return S.collect_words(base, code.read_code(languages=langs, max_files_per_repo=files_per_repo))


@cache_resource(show_spinner=False, max_entries=4)
def _heldout(langs: tuple[str, ...], files_per_repo: int) -> list[code.CodeRecord]:
    held = [x for x in langs if x in code.code_languages(heldout=True)]
    if not held:
        return []
    return code.read_code(languages=held, heldout=True, max_files_per_repo=files_per_repo)


@cache_resource(show_spinner="Training the parity-aware baseline …", max_entries=2)
def _parity(base: LoadedTokenizer, langs: tuple[str, ...], files_per_repo: int, vocab: int) -> tuple:
    by_lang = S.records_by_language(code.read_code(languages=langs, max_files_per_repo=files_per_repo))
    tok, secs = S.train_parity_baseline(base, by_lang, vocab)
    info = {"languages": list(by_lang), "variant": "base", "seconds": secs,
            "targets": "equal compression rate per language"}  # fmt: skip
    return tok, info


def source_words(
    base: LoadedTokenizer, langs: list[str], files: int
) -> tuple[Callable[[], S.SourceWords] | None, list[str]]:
    """The counted words (a call: the shared corpus is read only once training starts) and the corpus they come
    from: the shared code corpus read in this process, or a code corpus (folder/glob, or shared files) counted
    by a background job on the local executor."""
    src = st.radio("Code to train on", ["the shared code corpus", "a code corpus (background job)"],
                   horizontal=True, key="sa-source")  # fmt: skip
    if src == "the shared code corpus":
        return partial(_words, base, tuple(sorted(langs)), files), [str(code.code_dir())]
    shared = {k: v for k, v in shared_corpora().items() if k.startswith("code/") and "heldout" not in k}
    opts = {"languages": sorted(langs), "max_files_per_repo": files, "max_bytes_per_repo": None}
    inputs_key = "sa-corpus"
    counted = corpus_panel(inputs_key, base, "source-words", shared, layout="code", options=opts,
                           default_pattern="*.jsonl.gz", label="Count the code corpus")  # fmt: skip
    if counted is None:
        return None, []
    return partial(lambda w: w, counted.result), list(counted.ident.inputs)


def train_run(
    base: LoadedTokenizer, key: tuple, sw: S.SourceWords, priority: str, skip: S.SkipRule
) -> S.SABPEResult:
    """One training run, kept in this session (the last runs; the progress bar needs a live call)."""
    vocab = key[3]
    store = st.session_state.setdefault("sa-results", {})
    k = (*key, priority, skip)
    if k not in store:
        name = "BPE" if priority == "F" and not skip.active else f"SA-BPE [{priority}]"
        with progress(f"Training {name} …") as cb:
            store[k] = S.train(base, sw, vocab, priority=priority, skip=skip, name=name, progress=cb)
        while len(store) > MAX_RUNS:
            store.pop(next(iter(store)))
    return store[k]


def compare(
    base: LoadedTokenizer, key: tuple, sw: S.SourceWords, corpus: list[str], run: tuple
) -> S.SabpeComparison:
    """The page's SabpeComparison (the CLI's document): plain BPE, SA-BPE and, when chosen, the parity-aware
    baseline, measured on the held-out repositories (one per configuration, kept in this session)."""
    priority, skip, parity = run
    store = st.session_state.setdefault("sa-comparisons", {})
    k = (key, priority, skip, parity)
    if k not in store:
        runs = {}
        if priority != "F" or skip.active:
            runs["bpe"] = train_run(base, key, sw, "F", S.SkipRule())
        runs["sabpe"] = train_run(base, key, sw, priority, skip)
        cmp = S.SabpeComparison(corpus, sw, runs, _heldout(key[1], key[2]))
        if parity:
            cmp.parity, cmp.parity_info = _parity(base, key[1], key[2], key[3])
        with st.spinner("Measuring on held-out repositories…"):
            cmp.metrics()
        store[k] = cmp
        while len(store) > MAX_RUNS:
            store.pop(next(iter(store)))
    return store[k]


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


def settings(langs_all: list[str]) -> tuple[list[str], int, int, str, S.SkipRule, bool]:
    """Languages, files per repository, vocabulary size, priority, skip rule and the parity-aware baseline."""
    c1, c2, c3 = st.columns([3, 1, 1])
    langs = c1.multiselect(
        "Code languages", langs_all, default=[x for x in DEFAULT_LANGS if x in langs_all], key="sa-langs"
    )
    interactive = ("the page trains on two shared cores, so it starts small; the command line reads every file "
                   "(the equivalent command states this value)")  # fmt: skip
    files = c2.number_input(
        "Files per repository", 1, 200, PAGE_FILES_PER_REPO, key="sa-files", help=interactive
    )
    vocab = c3.number_input("Vocabulary size", 300, 32768, PAGE_VOCAB_SIZE, step=100, key="sa-vocab")
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    priority = c1.selectbox("Priority criterion", S.PRIORITIES, index=S.PRIORITIES.index(S.DEFAULT_PRIORITY),
                            key="sa-priority", format_func=lambda p: f"{p} — {S.PRIORITY_HELP[p]}")  # fmt: skip
    min_r = c2.number_input(
        "Skip if R <", 1, 100, DEFAULT_MIN_SOURCES, key="sa-min-r", help="paper's R_t (1 = off)"
    )
    min_l = c3.number_input(
        "Skip if L <", 1, 20, DEFAULT_MIN_LANGUAGES, key="sa-min-l", help="paper's L_t (1 = off)"
    )
    share = c4.number_input("Skip if top-repo share >", 0.0, 1.0, 1.0, step=0.05, key="sa-share",
                            help="1.0 = off (our addition)")  # fmt: skip
    skip = S.SkipRule(int(min_r), int(min_l), None if share >= 1.0 else float(share))
    parity = st.checkbox("Also train the parity-aware BPE baseline (programming languages as the parity "
                         "languages, equal target rates; shared code corpus)", key="sa-parity")  # fmt: skip
    return langs, int(files), int(vocab), priority, skip, parity


def comparison(cmp: S.SabpeComparison) -> None:
    """Every metric for every run on the held-out repositories (or training statistics when there are none)."""
    st.subheader("Comparison on held-out repositories")
    metrics = cmp.metrics()
    if not metrics:
        st.warning(
            "None of the chosen languages has held-out repositories; only training statistics are shown."
        )
        st.dataframe(pd.DataFrame([r.summary() | {"run": k} for k, r in cmp.runs.items()]), hide_index=True)
        return
    rows = [
        {"metric": label} | {_column(cmp, k): _cell(m.get(field), field) for k, m in metrics.items()}
        for field, label in METRIC_LABELS.items()
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    lang = cmp.language_rows()
    if lang:
        st.subheader("Compression per held-out language")
        st.dataframe(pd.DataFrame(lang).rename(columns=lambda c: language_column(cmp, c)), hide_index=True,
                     width="stretch")  # fmt: skip
        st.caption(
            "bytes/token and coverage (distinct tokens used) per programming language; the Gini over the "
            f"per-language compression is the paper's measure ({cite('sa-bpe')}, App. D), reported next to "
            "the Gini over token frequencies."
        )


def language_column(cmp: S.SabpeComparison, column: str) -> str:
    """A readable header for a column of `language_rows` (`bpe_bytes_per_token` → "BPE (…): bytes/token")."""
    for key in S.RUN_LABELS:
        for suffix, what in (("_bytes_per_token", "bytes/token"), ("_coverage", "coverage")):
            if column == f"{key}{suffix}":
                return f"{_column(cmp, key)}: {what}"
    return {"language": "Language", "files": "Files", "bytes": "Bytes"}.get(column, column)


def _column(cmp: S.SabpeComparison, key: str) -> str:
    label = S.RUN_LABELS[key]
    return f"{label} ({cmp.runs[key].label})" if key in cmp.runs else f"{label} (equal target rates)"


def _cell(v: object, field: str) -> object:
    if isinstance(v, float) and field == "single_repo_share":
        return v * 100
    return v


def concentrated_and_export(cmp: S.SabpeComparison, n_vocab: int) -> None:
    """The tokens most concentrated in one repository, the report (the CLI's --json), and per run a zip and an
    "add to library" button."""
    runs = {S.RUN_LABELS[k]: r for k, r in cmp.runs.items()}
    st.subheader("Tokens most concentrated in one repository")
    for col, (lb, res) in zip(st.columns(len(runs)), runs.items()):
        col.markdown(f"**{lb}** ({res.label})")
        conc = res.concentrated(25)
        if conc:
            col.dataframe(pd.DataFrame(conc), hide_index=True, width="stretch")
        else:
            col.caption("No learned token has ≥ 90 % of its training occurrences in one repository.")
    st.subheader("Export")
    report = paths.public_document(cmp.to_json())  # the code corpus by name, never the server layout
    json_download(
        "Download the report (sabpe_report.json)",
        json_document(report),
        "sabpe_report.json",
        key="sa-dl-report",
    )
    st.caption("The same document as `python -m analysis sabpe --json` (and `--out`'s sabpe_report.json).")
    for col, (lb, res) in zip(st.columns(len(runs)), runs.items()):
        col.download_button(f"Download {lb} tokenizer (.zip)",  # built on click
                            partial(zip_bytes, res.tokenizer, report, folder=lb.lower(), report_name="sabpe_report.json"),
                            file_name=f"{lb.lower()}-{n_vocab}.zip", mime="application/zip", key=f"sa-dl-{lb}")  # fmt: skip
        if col.button(f"Add {lb} to the library", key=f"sa-add-{lb}"):
            col.success(f"Added as {add_to_library(res.tokenizer, f'{lb} {res.priority} {n_vocab}')}.")
    if "bpe" in cmp.runs and cmp.heldout:
        st.markdown(
            "Robustness of SA-BPE against plain BPE trained on the same words, per held-out language:"
        )
        ident = tuple(r.tokenizer.content_hash for r in cmp.runs.values())
        robustness_button("sa-rob", ident, lambda cb: cmp.measure_robustness(progress=cb) or {})
    export_check_section("sa-check", None, {lb: r.tokenizer for lb, r in runs.items()})


def page() -> None:
    """Base pre-tokenizer, settings and code → `sabpe.SabpeComparison` → comparison, history, export."""
    st.title("Source-attributed BPE (SA-BPE)")
    st.caption(
        "Train a byte-level BPE tokenizer from scratch on code whose files carry their **repository** and "
        f"**language** ({cite('sa-bpe')}). Every candidate pair keeps its frequency F, the number of repositories R and "
        "languages L it occurs in. SA-BPE changes the merge **priority** (e.g. F·log R·L) and can **skip** merges "
        "that live in too few sources. Inference stays plain BPE. Plain BPE (priority F) is trained on the "
        "same words for comparison, and both are measured on held-out repositories."
    )
    langs_all = code.code_languages()
    if not langs_all:
        raise DataError(
            "The shared code corpus was not found (set TOKLAB_ASSETS to the shared assets folder)."
        )
    base = pick_tokenizer(
        "Normalizer + pre-tokenizer from", key="sa-base", needs=BYTE_LEVEL, feature="SA-BPE"
    )
    if base is None:
        return
    langs, files, vocab, priority, skip, parity = settings(langs_all)
    if not langs:
        st.info("Choose at least one language.")
        return
    words, corpus = source_words(base, langs, files)
    if words is None:
        return
    key = (base.content_hash, tuple(sorted(langs)), files, vocab, tuple(corpus))
    if parity and corpus != [str(code.code_dir())]:
        st.caption(
            "The parity-aware baseline reads the text itself: it is trained on the shared code corpus only."
        )
        parity = False
    choice = (priority, skip, parity)
    if st.button("Train plain BPE and SA-BPE", type="primary", key="sa-train"):
        st.session_state["sa-run"] = (key, choice)
    run = st.session_state.get("sa-run")
    if run != (key, choice):
        st.info(
            "Press the button to train (cached: changing a setting back shows the earlier result at once)."
        )
        if not run or run[0] != key:  # the words on the page are this key's: show an earlier run of them only
            return
        choice = run[1]
    sw = words()
    cmp = compare(base, key, sw, corpus, choice)
    st.caption(
        f"{sw.n_records:,} files, {len(sw.repos)} repositories, {len(sw.languages)} languages, "
        f"{sw.n_bytes / 1e6:.1f} MB, {len(sw.words):,} word types; held-out: {len(cmp.heldout):,} files."
    )
    comparison(cmp)
    st.subheader("Merge history")
    y = st.radio("Plot", list(Y_LABELS), horizontal=True, key="sa-y",
                 format_func=lambda v: {"repos": "R", "languages": "L", "freq": "F", "priority": "priority"}[v])  # fmt: skip
    st.plotly_chart(history_figure({S.RUN_LABELS[k]: r for k, r in cmp.runs.items()}, y), width="stretch")
    concentrated_and_export(cmp, key[3])
    ident = tuple(r.tokenizer.content_hash for r in cmp.runs.values())
    command = sabpe_command(base, languages=key[1], files_per_repo=files, vocab_size=vocab, priority=choice[0],
                            skip=choice[1], parity=choice[2], corpus=() if corpus == [str(code.code_dir())] else corpus,
                            robustness="bpe" not in cmp.runs or measured("sa-rob", ident))  # fmt: skip
    st.caption(command.caption())
    st.code(command.text(), language="bash", wrap_lines=True)


page()

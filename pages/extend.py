"""Extend: continued BPE training vs naive extension, with a live before/after preview and export."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import DataError, LoadedTokenizer
from analysis.adapt.embeddings import INITS
from analysis.bpe.parity import VARIANTS
from analysis.bpe.training import continue_training, training_mode
from analysis.commands._equivalent import Equivalent, extend_command
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.references import cite, reference
from analysis.evaluate.speculative import SPEC_VOCAB_MAX_SIZE_DIFFERENCE, largest_compatible_extension
from analysis.jobs import TrainingWords, train_from_words
from analysis.measure.robustness import robustness_delta
from analysis.methods.extension import (
    ADDED_MARK,
    DEFAULT_MIN_FREQUENCY,
    METHOD_LABELS,
    PAGE_MAX_CHARS,
    PAGE_N,
    ExtendResult,
    Plan,
    Preview,
    compare_parity,
    default_corpora,
    heldout_label,
    methods_for,
    parity_applies,
    parity_text,
    plan,
)
from analysis.texts.corpora import Corpus, Source, shared_corpora
from analysis.texts.flores import FLORES_TRAIN_LINES, available_codes, split_lines
from analysis.tokenizer.export import zip_bytes
from ui.caching import cache_data, cache_resource
from ui.corpus_jobs import corpus_panel
from ui.errors import try_step
from ui.export_check import export_check_section, speculative_line
from ui.library import add_edited_button
from ui.model_check import (
    model_check_section,
    model_export_section,
    model_folder_export_section,
    recipe_inputs,
)
from ui.palette import OKABE_ITO
from ui.pickers import model_picker_keys, pick_model, pick_tokenizer, server_path_input
from ui.robustness import robustness_section
from ui.spans import pieces_html, token_spans_html
from ui.trees import merge_tree_text
from ui.workspace import json_download, unless_kept
from ui.workspace import keep as keep_inputs

#: The page inputs kept in the workspace.
KEPT = ("ext-tok", "ext-lang", "ext-methods", "ext-nmax", "ext-minfreq", *model_picker_keys("ext-model"), "ext-init",
        "ext-model-gguf", "ext-trained", "ext-built")  # fmt: skip

NO_FLORES = "FLORES-200 was not found: set TOKLAB_FLORES (or TOKLAB_ASSETS to the shared assets folder)."
MERGE_METHODS = ("continued", "regen", "merges")
NAIVE_METHODS = ("regen", "merges", "add-tokens")
#: Languages offered with the target for the parity-aware comparison (those FLORES has).
PARITY_DEFAULTS = ("eng_Latn", "fin_Latn", "lvs_Latn")
#: Summary entries shown for the plain and the parity-aware auxiliary tokenizer.
PARITY_COLUMNS = {"premium_mean": "premium mean", "premium_max": "premium max", "premium_gini": "premium Gini",
                  "premium_std": "premium std", "bytes_per_token": "bytes/token"}  # fmt: skip


# ------------------------------------------------------------------------------------------ engine calls (cached)
@cache_data(show_spinner=False, max_entries=8)
def _continued(tok: LoadedTokenizer, text: Corpus, n_max: int, max_len: int | None, min_freq: int):
    """One continued-training run per tokenizer, text, size and minimum frequency."""
    return continue_training(tok, text, n_max, max_token_length=max_len, min_frequency=min_freq)


@cache_resource(show_spinner="Training on the counted corpus …", max_entries=4)
def _from_words(tok: LoadedTokenizer, job: tuple, n_max: int, max_len: int | None, min_freq: int,
                _words: TrainingWords):  # fmt: skip
    """Continued training from a corpus job's words (`job` identifies them; the words are not hashed)."""
    return train_from_words(tok, _words, n_max, max_token_length=max_len, min_frequency=min_freq)


@cache_data(show_spinner=False, max_entries=8)
def _aux(tok: LoadedTokenizer, text: Corpus, n_max: int, max_len: int | None, min_freq: int):
    """The auxiliary tokenizer of the naive baselines (one per tokenizer, text and size)."""
    method = "add-tokens" if tok.model_type != "WordPiece" else "wordpiece"
    return plan(tok, method, text, n_max, max_token_length=max_len, min_frequency=min_freq).aux


@cache_resource(show_spinner="Training (once per tokenizer, text and N) …", max_entries=4)
def _preview(tok: LoadedTokenizer, text: Corpus, n_max: int, max_len: int | None, methods: tuple[str, ...],
             lang: str, others: tuple[str, ...], min_freq: int, job: tuple | None,
             _words: TrainingWords | None) -> Preview:  # fmt: skip
    """The trained plans of every method and the live-preview engine over the held-out texts; continued
    training from a corpus job's words when `job` names one."""
    plans: dict[str, Plan] = {}
    if "continued" in methods:
        tr = (_from_words(tok, job, n_max, max_len, min_freq, _words) if job is not None
              else _continued(tok, text, n_max, max_len, min_freq))  # fmt: skip
        plans["continued"] = plan(tok, "continued", [], n_max, training=tr, min_frequency=min_freq)
    naive = [m for m in methods if m != "continued"]
    aux = _aux(tok, text, n_max, max_len, min_freq) if naive else None
    for m in naive:
        plans[m] = plan(tok, m, [], n_max, aux=aux, min_frequency=min_freq)
    held = split_lines(lang)[1]
    target = heldout_label(lang)  # the CLI's name (--heldout-flores)
    # every language on its held-out lines, as `extend --heldout-flores LANG` measures it
    texts = {target: held} | {heldout_label(o): split_lines(o)[1] for o in others}
    english = heldout_label("eng_Latn") if heldout_label("eng_Latn") in texts else None
    return Preview(tok, plans, texts, target=target, english=english, sentence=held[0])


@cache_data(show_spinner=False, max_entries=32)
def _curve(
    args: tuple, method: str, points: tuple[int, ...], _words: TrainingWords | None
) -> list[tuple[int, float]]:
    """Bytes/token over N for one method (from the single training run)."""
    return _preview(*args, _words).curve(method, points)


# ------------------------------------------------------------------------------------------ inputs
def marker(config: tuple) -> str:
    """A short plain name of the page's training inputs, kept in the workspace: after a reload or a restart the
    page shows what was trained (and built) for the same inputs again, without another click."""
    return hashlib.sha256(repr(config).encode("utf-8")).hexdigest()[:16]


def languages() -> tuple[str, tuple[str, ...]]:
    """The target language (training and held-out lines) and other languages to check."""
    langs = available_codes()
    if not langs:
        raise DataError(NO_FLORES)
    c1, c2 = st.columns(2)
    index = langs.index("est_Latn") if "est_Latn" in langs else 0
    lang = c1.selectbox(
        "Target language (FLORES-200)", langs, index=unless_kept("ext-lang", index, 0), key="ext-lang"
    )
    others = c2.multiselect("Other languages to check", [x for x in langs if x != lang],
                            default=["eng_Latn"] if lang != "eng_Latn" else [], key="ext-others")  # fmt: skip
    return lang, tuple(others)


def training_text(lang: str) -> tuple[Corpus | None, Any]:
    """FLORES training lines, shared corpora, uploads and a folder, cut at a character budget; and the folded
    box that holds these settings (the page adds where continued training counts its words)."""
    # folded: the defaults (FLORES training lines and the language's shared corpus) are said in the label, so the
    # results start on the first screen
    box = st.expander(
        f"Training text: FLORES {lang} training lines and its shared corpus, unless changed here"
    )
    with box:
        use_flores = st.checkbox(f"FLORES {lang} training lines (1–{FLORES_TRAIN_LINES})", value=True,
                                 key="ext-use-flores")  # fmt: skip
        corpora = shared_corpora()
        default_c = default_corpora(lang, corpora)
        chosen = st.multiselect("Shared corpora", list(corpora), default=default_c, key="ext-corpora")
        uploads = st.file_uploader("Upload text files (.txt, .jsonl, .gz) or a .zip of them",
                                   accept_multiple_files=True, key="ext-uploads", max_upload_size=paths.upload_widget_mb())  # fmt: skip
        folder = server_path_input("Folder of text files on the server (optional)", "ext-folder")
        budget = st.number_input("Character budget", min_value=10_000, max_value=100_000_000, value=PAGE_MAX_CHARS,
                                 step=1_000_000, key="ext-budget",
                                 help="the page trains interactively on two shared cores, so it reads at most this "
                                 "much; the command line reads the whole text unless --max-chars (the equivalent "
                                 "command states this budget)")  # fmt: skip
    sources = [Source("flores-train", f"{lang}:{FLORES_TRAIN_LINES}")] if use_flores else []
    sources += [Source("file", str(corpora[k])) for k in chosen]
    sources += [Source("bytes", u.name, u.getvalue()) for u in uploads or []]
    if folder is not None:
        sources.append(Source("folder" if folder.is_dir() else "file", str(folder)))
    return (Corpus(tuple(sources), int(budget)) if sources else None), box


def methods_and_size(tok: LoadedTokenizer) -> tuple[tuple[str, ...], int, int | None, int]:
    """The methods that apply to this tokenizer, the largest N, the longest new token and the minimum frequency
    of a new token (the CLI's --min-frequency)."""
    available = methods_for(tok)
    c1, c2, c3, c4 = st.columns([3, 1, 1, 1])  # the methods' names stay readable
    defaults = [m for m in ("continued", "regen") if m in available] or available[:1]
    methods = c1.multiselect("Methods", available, default=unless_kept("ext-methods", defaults),
                             format_func=lambda m: METHOD_LABELS[m], key="ext-methods")  # fmt: skip
    n_max = int(c2.number_input("Train up to N new tokens", 10, 64_000, unless_kept("ext-nmax", PAGE_N, "min"), step=500,
                                key="ext-nmax"))  # fmt: skip
    max_len = int(c3.number_input("Max token length (0 = none)", 0, 128, 0, key="ext-maxlen")) or None
    min_freq = int(c4.number_input("Min. frequency (0 = none)", 0, 1_000_000,
                                   unless_kept("ext-minfreq", DEFAULT_MIN_FREQUENCY, "min"), key="ext-minfreq",
                                   help="new tokens rarer than this in the training text are not added"))  # fmt: skip
    return tuple(methods), n_max, max_len, min_freq


def corpus_words(
    tok: LoadedTokenizer, methods: tuple[str, ...], n_max: int
) -> tuple[bool, tuple | None, object]:
    """(corpus chosen, job identity, its TrainingWords): continued training's words from a corpus folder/glob
    counted by a background job on the local executor; the naive baselines keep the training text above."""
    if "continued" not in methods:
        return False, None, None
    src = st.radio("Continued training counts its words in", ["the training text above", "a corpus (background job)"],
                   horizontal=True, key="ext-words-src")  # fmt: skip
    if src == "the training text above":
        return False, None, None
    files = {k: v for k, v in shared_corpora().items() if k.startswith("text/")}
    opts = (
        {"n_new": n_max} if training_mode(tok) == "sentencepiece" else {}
    )  # coverage characters count toward N
    counted = corpus_panel("ext-corpus", tok, "words", files, options=opts, label="Count the words")
    if counted is None:
        return True, None, None
    return True, counted.ident, counted.result


# ------------------------------------------------------------------------------------------ results
def equivalent(
    tok: LoadedTokenizer, text: Corpus, method: str, n: int, config: tuple, job: tuple | None
) -> Equivalent:
    """The `extend` command that reproduces this page's numbers for one method at N: the same training text
    (a corpus job's files instead, when continued training counted them), budget, minimum frequency and
    held-out languages."""
    _, _, _, max_len, _, lang, others, min_freq, _ = config
    if job is not None and method == "continued":
        sources, budget = [Source("file", str(p)) for p in job[2]], None
    else:
        sources, budget = list(text.sources), text.max_chars
    return extend_command(tok, method=method, n=n, sources=sources, max_chars=budget, min_frequency=min_freq,
                          max_token_length=max_len, heldout_flores=[lang, *others])  # fmt: skip


def show_commands(commands: list[Equivalent]) -> None:
    """The equivalent commands, one line each, copyable, with the notes on the files they name."""
    st.caption(commands[0].caption() + (" One line per method." if len(commands) > 1 else ""))
    notes = {x for c in commands for x in c.notes}
    for x in sorted(notes - set(commands[0].notes)):
        st.caption(x)
    st.code("\n".join(c.text() for c in commands), language="bash", wrap_lines=True)


def metrics_table(results: dict[str, dict], n: int) -> None:
    """Bytes/token per text (one column per method, so the table fits the page) and, per method, what was added:
    STT-unreachable added tokens, use on held-out, English stability."""
    methods = list(results)
    texts = list(next(iter(results.values()))["texts"])
    rows, config = [], {"before": st.column_config.NumberColumn(format="%.4f")}
    for k in texts:
        row = {"text": k, "before": results[methods[0]]["texts"][k]["before"]}
        for m in methods:
            v = results[m]["texts"][k]
            row[m], row[f"{m} Δrel"] = v["after"], 100 * v["delta_rel"]
            config[m] = st.column_config.NumberColumn(format="%.4f", help=METHOD_LABELS[m])
            config[f"{m} Δrel"] = st.column_config.NumberColumn(format="%+.2f%%", help="relative change")
        rows.append(row)
    st.subheader(f"Bytes per token at N = {n:,}")
    st.dataframe(
        pd.DataFrame(rows), hide_index=True, width="stretch", column_config=config, key="ext-bpt-table"
    )
    st.caption("Columns by method: " + "; ".join(f"**{m}** = {METHOD_LABELS[m]}" for m in methods) + ".")
    added = []
    for m, r in results.items():
        row = {"method": METHOD_LABELS[m], "added": r["added"],
               "STT-unreachable added": r["unreachable_added"] if m in MERGE_METHODS else "n/a",
               "used on held-out": f"{r['used_share']:.1%}" if not math.isnan(r["used_share"]) else "—"}  # fmt: skip
        if "english" in r:
            e = r["english"]
            row["English exact match"] = f"{e['exact_match']:.1%}"
            row["English Levenshtein"] = f"{e['levenshtein']:.4f} / {e['levenshtein_max']:.3f}"
        added.append(row)
    # the method's full name and the headers are never cut ("Naive: new t…", "English Levens…")
    widths = {"method": st.column_config.TextColumn("method", width="large"),
              "English Levenshtein": st.column_config.TextColumn("English Levenshtein", width="medium",
                                                                 help="mean / max, per sentence, ÷ base length")}  # fmt: skip
    st.dataframe(
        pd.DataFrame(added), hide_index=True, width="stretch", key="ext-added-table", column_config=widths
    )
    st.caption(
        "Bytes/token = Σ UTF-8 bytes / Σ tokens (no special tokens); Δrel = relative change. "
        "STT-unreachable = added tokens that the merges can never build from their own string (the "
        "Self-Tokenization Test). English exact match and Levenshtein distance (per sentence, divided by the base "
        f"length) compare with the base tokenization, as in {reference('continued-bpe').short}, Table 6. "
        "Preview update: " + ", ".join(f"{m} {r['seconds']:.2f} s" for m, r in results.items())
    )


def curve_chart(
    pv: Preview, args: tuple, words: TrainingWords | None, n: int, n_cap: int, results: dict[str, dict]
) -> None:
    """Bytes/token on the held-out target text against N, one line per method: twelve fixed points (computed
    once per training) plus the slider's N, whose value the preview has already measured."""
    points = tuple(sorted({max(1, round(n_cap * k / 12)) for k in range(1, 13)}))
    fig = go.Figure()
    for m in pv.plans:
        here = results[m]  # the preview at the slider's N: the same measurement, no second simulation
        at_n = {here["n"]: here["texts"][pv.target]["after"]}
        cur = sorted((dict(_curve(args, m, points, words)) | at_n).items())
        fig.add_trace(go.Scatter(x=[x for x, _ in cur], y=[y for _, y in cur], mode="lines+markers",
                                 name=METHOD_LABELS[m]))  # fmt: skip
    fig.add_vline(x=n, line_dash="dot")
    fig.update_layout(xaxis_title="N new tokens", yaxis_title=f"bytes / token ({pv.target})", height=360,
                      margin=dict(l=10, r=10, t=30, b=10))  # fmt: skip
    st.plotly_chart(fig, width="stretch")


def own_text_before_after(
    tok: LoadedTokenizer, pv: Preview, results: dict[str, dict], n: int, text: str
) -> None:
    """The user's text tokenized by the base and by every method's extended tokenizer at this N."""
    base = tok.tokenizer.encode(text, add_special_tokens=False)
    st.markdown(f"**Base** ({len(base.ids)} tokens)")
    st.html(token_spans_html(tok, text, base.ids, base.offsets, show_whitespace=True))
    for m in results:
        ext = try_step(pv.extension, m, min(n, pv.plans[m].n_available))  # built once per method and N
        if ext is None:
            continue
        enc = ext.tokenizer.tokenizer.encode(text, add_special_tokens=False)
        st.markdown(f"**{METHOD_LABELS[m]}** ({len(enc.ids)} tokens vs {len(base.ids)})")
        st.html(token_spans_html(ext.tokenizer, text, enc.ids, enc.offsets, show_whitespace=True))


def sentence_before_after(tok: LoadedTokenizer, pv: Preview, results: dict[str, dict], n: int) -> None:
    """One held-out sentence, or the user's own text, tokenized by the base and by every method."""
    st.subheader("Before and after")
    own = st.text_area(
        "Your own text (empty: the first held-out FLORES sentence)", key="ext-own-text", height=80
    )
    if own.strip():
        own_text_before_after(tok, pv, results, n, own)
        return
    id2tok = tok.id_to_token
    before = next(iter(results.values())).get("sentence_before", [])
    st.markdown("**Base**")
    st.html(pieces_html([tok.readable(id2tok[i]) for i in before]))
    for m, r in results.items():
        inv = {i: t for t, i in r["new_ids"].items()}
        pieces = [
            tok.readable(id2tok[i]) if i in id2tok else inv[i].lstrip(ADDED_MARK) if m == "add-tokens"
            else tok.readable(inv[i])
            for i in r.get("sentence_after", [])
        ]  # fmt: skip
        st.markdown(f"**{METHOD_LABELS[m]}** ({len(pieces)} tokens vs {len(before)})")
        st.html(pieces_html(pieces))


def added_tokens(tok: LoadedTokenizer, pv: Preview, results: dict[str, dict], n: int) -> None:
    """Per method: the added tokens with training frequency and held-out use, and the merge tree of one."""
    st.subheader("Added tokens")
    for tab, (m, r) in zip(st.tabs([METHOD_LABELS[m] for m in pv.plans]), results.items()):
        with tab:
            p = pv.plans[m]
            freq = {s.token: s.freq for s in p.training.prefix(n) if s.new} if p.training is not None else {}
            unreach = set(r["unreachable"])
            table = []
            for k, t in enumerate(r["added_tokens"], 1):
                tid = r["new_ids"].get(ADDED_MARK + t if m == "add-tokens" else t)
                table.append({"#": k, "id": tid, "token": t if m == "add-tokens" else tok.readable(t),
                              "training pair frequency": freq.get(t), "held-out count": r["used_counts"].get(tid, 0),
                              "reachable": t not in unreach})  # fmt: skip
            st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch", height=280)
            if m in MERGE_METHODS and r["added_tokens"]:
                pick = st.selectbox("Merge tree of", r["added_tokens"][:2000], format_func=tok.readable,
                                    key=f"ext-tree-{m}")  # fmt: skip
                expand = st.checkbox("Expand base tokens into their base merges", key=f"ext-tree-x-{m}")
                tree = pv.merge_tree(m, n, pick)
                st.code(merge_tree_text(tok, tree, expand_base=expand), language=None)
                if not tree.get("reachable"):
                    st.warning("Unreachable: the merges build the pieces above, never the token itself.")


# ------------------------------------------------------------------------------------------ parity-aware auxiliary
def parity_languages(lang: str) -> list[str]:
    """The default training languages of the parity-aware comparison: the target and a few others FLORES has."""
    langs = available_codes()
    return list(dict.fromkeys(x for x in (lang, *PARITY_DEFAULTS) if x in langs))


def parity_section(
    tok: LoadedTokenizer, methods: tuple[str, ...], lang: str, n: int, max_len: int | None, min_freq: int
) -> None:
    """Plain vs parity-aware auxiliary tokenizer of a naive method, trained on the FLORES training lines of several
    languages (the CLI's `extend --parity --flores L1 --flores L2 …`) and measured on their held-out lines."""
    naive = [m for m in methods if m in NAIVE_METHODS]
    if not naive:
        return
    ref = reference("parity-aware-bpe")
    with st.expander(f"Parity-aware auxiliary vs plain ({ref.short.replace(' (', ' ').rstrip(')')})"):
        why = parity_applies(tok)
        if why:
            st.caption(f"Does not apply here: {why}.")
            return
        st.caption(
            f"{cite('parity-aware-bpe')}: each merge is the best one of the language compressed worst so far. "
            f"The plain and the parity-aware auxiliary tokenizer (same size, same text: FLORES lines "
            f"1–{FLORES_TRAIN_LINES} of each language) give N new tokens each; both extensions are measured on the "
            f"held-out lines {FLORES_TRAIN_LINES + 1}–1012, premium = tokens / English tokens on the same sentences."
        )
        c1, c2, c3 = st.columns([3, 1, 1])
        langs = c1.multiselect("Training languages (FLORES-200, at least 2)", available_codes(),
                               default=parity_languages(lang), key="ext-par-langs")  # fmt: skip
        method = c2.selectbox("Method", naive, format_func=lambda m: METHOD_LABELS[m], key="ext-par-method")
        variant = c3.selectbox("Variant", VARIANTS, key="ext-par-variant",
                               help="the `tokenizers` ParityBpeTrainer variant (the CLI's --parity-variant)")  # fmt: skip
        if len(langs) < 2:
            st.caption("Choose at least two languages.")
            return
        inputs = (tok.content_hash, method, n, tuple(langs), variant, min_freq, max_len)
        if st.button("Compare plain and parity-aware", key="ext-par-run"):
            with st.spinner("Training both auxiliary tokenizers and measuring …"):
                pt = parity_text({c: split_lines(c)[0] for c in langs}, variant)
                got = try_step(
                    compare_parity, tok, method, n, pt, min_frequency=min_freq, max_token_length=max_len
                )
            if got is not None:
                st.session_state["ext-parity"] = (inputs, got[0])
        saved = st.session_state.get("ext-parity")
        if saved is None or saved[0] != inputs:
            st.caption("Press the button to train both auxiliary tokenizers (once per choice).")
            return
        parity_results(saved[1])
        sources = [Source("flores-train", f"{c}:{FLORES_TRAIN_LINES}") for c in langs]
        show_commands([extend_command(tok, method=method, n=n, sources=sources, min_frequency=min_freq,
                                      max_token_length=max_len, parity_variant=variant)])  # fmt: skip


def parity_results(cmp: dict) -> None:
    """The two summaries, the per-language premiums and a one-sentence reading of a `compare_parity` result."""
    if "difference" not in cmp:
        st.info(cmp.get("note", "nothing measured"))
        return
    sides = {"plain": "plain auxiliary", "parity": "parity-aware auxiliary"}
    rows = [{"auxiliary": label} | {v: cmp[k]["summary"][c] for c, v in PARITY_COLUMNS.items()}
            for k, label in sides.items()]  # fmt: skip
    fmt = {v: st.column_config.NumberColumn(format="%.4f") for v in PARITY_COLUMNS.values()}
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=fmt, key="ext-par-table")
    ref = cmp["reference"]
    fig = go.Figure()
    for (k, label), colour in zip({"base": "base", **sides}.items(), ("#999999", *OKABE_ITO)):
        prem = [r for r in cmp[k]["rows"] if r["lang"] != ref]
        fig.add_trace(go.Bar(x=[r["lang"] for r in prem], y=[r["premium"] for r in prem], name=label,
                             marker_color=colour))  # fmt: skip
    fig.update_layout(barmode="group", yaxis_title=f"premium vs {ref}", height=320,
                      margin=dict(l=10, r=10, t=30, b=10))  # fmt: skip
    st.plotly_chart(fig, width="stretch", key="ext-par-chart")
    a, b = cmp["plain"]["summary"], cmp["parity"]["summary"]
    st.markdown(
        f"With {cmp['n']:,} new tokens ({METHOD_LABELS[cmp['method']]}, {cmp['variant']} variant), the parity-aware "
        f"auxiliary {'lowers' if b['premium_max'] < a['premium_max'] else 'does not lower'} the worst premium "
        f"({a['premium_max']:.3f} → {b['premium_max']:.3f}, {b['premium_max_lang']}) and moves the Gini "
        f"{a['premium_gini']:.4f} → {b['premium_gini']:.4f}, at {b['bytes_per_token']:.4f} bytes/token vs "
        f"{a['bytes_per_token']:.4f} plain; {cmp['overlap']:,} of the added tokens are the same."
    )


def report(
    pv: Preview, method: str, n: int, text_label: str, min_freq: int, corpus: dict | None
) -> ExtendResult:
    """The run's ExtendResult (the CLI's document) for one method at N."""
    p = pv.plans[method]
    tr = p.training
    return ExtendResult(pv.extension(method, n), n_requested=n, text=text_label, heldout=pv.texts, training=tr,
                        text_chars=tr.chars if tr is not None else None, aux=p.aux, min_frequency=min_freq,
                        corpus=corpus)  # fmt: skip


def export_model(res: ExtendResult, label: str) -> None:
    """Write the extended tokenizer with a model whose embeddings and LM head grew to the new ids — into this
    workspace as downloads (the Hugging Face folder as a zip, optionally a .gguf), or into a server folder when the
    operator allows server paths — and measure that model against the original (the Model check section)."""
    st.markdown("**With a model** (its input embeddings and LM head grown to the new ids)")
    model = pick_model("ext-model", "Model of this tokenizer", optional=True)
    if not model or model == "none":
        return
    c1, c2 = st.columns([1, 2])
    init = c1.selectbox("New rows", INITS, key="ext-init", help="fvt: mean of the constituent tokens' rows")
    gguf = c2.checkbox("Also write a .gguf for llama.cpp", key="ext-model-gguf",
                       help="As `python -m analysis extend … --gguf`: f32 weights, the extended vocabulary.")  # fmt: skip
    name = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{label}-{init}").strip("_")

    def recipe() -> dict[
        str, Any
    ]:  # the export and the check run in a worker: the edit travels as workspace items
        return {"op": "extend", "init": init, **recipe_inputs(res.extension.base, res.extension.tokenizer,
                                                              paths.public_document(res.to_json()))}  # fmt: skip

    model_export_section("ext-model-ws", recipe, model, name, gguf)
    model_folder_export_section("ext-model", recipe, model, name, gguf)

    model_check_section("ext-mc", f"{label} ({init} rows)", recipe, original=model, keep_model=False)


def export(tok: LoadedTokenizer, pv: Preview, label: str, config: tuple, n: int, corpus: dict | None) -> None:
    """Build the extended tokenizer (tokenizer.json + the CLI's extension_report.json) and offer the zip, the
    report alone and the model export."""
    st.subheader("Export")
    c1, c2 = st.columns([2, 1])
    em = c1.selectbox(
        "Method to export", list(pv.plans), format_func=lambda m: METHOD_LABELS[m], key="ext-export-m"
    )
    built = f"{em}:{n}:{marker(config)}"
    z = st.session_state.get("ext-zip")
    shown = bool(z) and z[:3] == (em, n, config)
    again = not shown and st.session_state.get("ext-built") == built  # built before a reload or a restart
    if c2.button("Build the extended tokenizer", key="ext-build") or again:
        st.session_state["ext-built"] = built
        with st.spinner("Building tokenizer.json and measuring it (robustness: a few seconds) …"):
            res = report(pv, em, n, label, config[7], corpus if em == "continued" else None)
            held = {k.removesuffix(" (FLORES held-out)"): v for k, v in pv.texts.items()}
            res.robustness = robustness_delta(
                tok, res.extension.tokenizer, held
            )  # in the report, shown below
            doc = paths.public_document(res.to_json())  # files by name, never the server layout
            folder = f"{tok.name}-{em}-{n}".replace(" ", "_")
            st.session_state["ext-zip"] = (em, n, config, zip_bytes(res.extension.tokenizer, doc, folder=folder),
                                           json_document(doc), res)  # fmt: skip
    z = st.session_state.get("ext-zip")
    if z and z[:3] == (em, n, config):
        st.download_button("Download zip (Hugging Face folder)", z[3], file_name=f"{tok.name}-{em}-{n}.zip".replace(" ", "_"),
                           mime="application/zip", key="ext-download")  # fmt: skip
        json_download("Download extension_report.json", z[4], "extension_report.json", key="ext-report")
        speculative_line(z[5].extension.tokenizer, tok, f"{tok.name} +{n}")
        robustness_section(z[5].robustness.to_json() if z[5].robustness else None)
        add_edited_button(z[5].extension.tokenizer, f"{tok.name} +{n} ({METHOD_LABELS[em]})", "ext-add")
        st.caption(
            "tokenizer.json (merges as lists), tokenizer_config.json, special_tokens_map.json and "
            "extension_report.json (the document `python -m analysis extend --json` prints); loads with "
            "AutoTokenizer.from_pretrained and Tokenizer.from_file."
        )
        export_model(z[5], f"{tok.name} +{n} ({METHOD_LABELS[em]})")
        export_check_section("ext-check", tok, z[3])


#: The result tabs under the N slider.
RESULT_TABS = ["Compression", "Before and after", "Added tokens", "Export"]


def page() -> None:
    """Tokenizer, text, methods → one training run per method (`Preview`) → metrics, curve, spans, export."""
    st.title("Extend a tokenizer")
    keep_inputs(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        f"Add N tokens learned from your text: **continued BPE training** ({cite('continued-bpe')}, §3.1) keeps "
        f"every new token reachable; the **naive** baselines add a separately trained tokenizer's tokens "
        f"({reference('extension-thesis').short}). One training run gives every N up to the maximum."
    )
    c1, c2 = st.columns([1, 2])
    with c1:
        # an example added from the sidebar joins the library but does not replace this page's tokenizer
        tok = pick_tokenizer("Tokenizer", key="ext-tok", follow_added=False)
    s = tok.summary()
    with c2:
        lang, others = languages()
    st.caption(f"{tok.name}: {s['model_type']}, {s['flavour']}, {s['vocab_size']:,} tokens, {s['merges']:,} merges"
               + (", ignore_merges on" if s["ignore_merges"] else "")
               + ". Add Llama-3.1, Qwen3, Llama-2 … from the sidebar examples or the Load & inspect page. "
               f"FLORES {lang}: lines 1–{FLORES_TRAIN_LINES} can be used for **training**; lines "
               f"{FLORES_TRAIN_LINES + 1}–1012 are **held out** and only used to measure, in every language checked "
               "(as the command line's --heldout-flores).")  # fmt: skip
    text, text_box = training_text(lang)
    if text is None:
        st.warning("Choose some training text.")
        return
    methods, n_max, max_len, min_freq = methods_and_size(tok)
    if not methods:
        st.warning("Choose at least one method.")
        return
    parity_section(tok, methods, lang, n_max, max_len, min_freq)
    with text_box:  # where continued training counts its words: part of the training text's settings
        from_corpus, job, words = corpus_words(tok, methods, n_max)
    if from_corpus and job is None:
        return
    config = (tok.content_hash, text.fingerprint, n_max, max_len, methods, lang, others, min_freq, job)
    c_train, c_n = st.columns([1, 7], vertical_alignment="bottom")  # one row: Train, then the N slider
    if c_train.button("Train", type="primary", key="ext-train"):
        st.session_state["ext-config"], st.session_state["ext-trained"] = config, marker(config)
    elif st.session_state.get("ext-trained") == marker(config):  # trained before a reload or a restart
        st.session_state["ext-config"] = config
    if st.session_state.get("ext-config") != config:
        c_n.caption("Press **Train** to run the chosen methods on this text (trained once, then cached).")
        return
    args = (tok, text, n_max, max_len, methods, lang, others, min_freq, job)
    pv = _preview(*args, words)
    n_cap = max(p.n_available for p in pv.plans.values())
    if n_cap < 1:
        st.warning("The text gave no new tokens: every pair it contains is already a token.")
        return
    keep = largest_compatible_extension(tok)
    spec_help = (f"llama.cpp pairs a draft and a target model for speculative decoding only when their vocabularies "
                 f"differ by at most {SPEC_VOCAB_MAX_SIZE_DIFFERENCE} tokens and agree on every token's text.")  # fmt: skip
    n = c_n.slider("N (new tokens)", 1, n_cap, n_cap, key="ext-n", help=spec_help)
    # one line, so that the result tabs below still start above the fold at 1280×800
    c_n.caption(f"Speculative decoding: N ≤ {keep} keeps {tok.name} + N a valid draft/target pair with {tok.name}"
                + ("" if n <= keep else f" (N = {n} does not)") + "." if keep else
                f"Speculative decoding: llama.cpp reads no {tok.model_type} tokenizer of this kind.")  # fmt: skip
    results = {m: pv.at(m, n) for m in pv.plans}
    # the results in tabs, right under the slider: at 1280×800 the first result is on screen, not 3,800 px down
    t_measure, t_text, t_added, t_export = st.tabs(RESULT_TABS, key="ext-results")
    with t_measure:
        if "continued" in pv.plans:
            tr = pv.plans["continued"].training
            st.caption(f"Continued training: {tr.n_new:,} new tokens from {tr.chars:,} characters ({tr.word_types:,} word "
                       f"types) in {tr.seconds.get('total', 0):.1f} s"
                       + (f"; {len(tr.char_steps)} missing characters added first" if tr.char_steps else ""))  # fmt: skip
        metrics_table(results, n)
        show_commands([equivalent(tok, text, m, n, config, job) for m in results])
        curve_chart(pv, args, words, n, n_cap, results)
    with t_text:
        sentence_before_after(tok, pv, results, n)
    with t_added:
        added_tokens(tok, pv, results, n)
    named = [paths.public_name(p) for p in job[2]] if job else []  # never the server's layout in the export
    corpus = ({"executor": "local", "inputs": named, "workers": job[4]} if job
              else {"executor": "inprocess", "reader": "in this process"})  # how continued training read its words  # fmt: skip
    with t_export:
        export(tok, pv, text.label if job is None else f"corpus: {', '.join(named)}", config, n, corpus)


page()

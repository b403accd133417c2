"""Dynamic tokenization: merge a batch's most frequent adjacent token pairs (Feher, Vulić, Minixhofer)."""

from __future__ import annotations

import hashlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from safetensors.numpy import save

from analysis import DataError, LoadedTokenizer
from analysis.commands._equivalent import Equivalent, dynamic_command
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.references import cite
from analysis.methods.dynamic import (
    BOUNDARIES,
    FULL_CURVE_MERGES,
    BatchEmbeddings,
    DynamicReport,
    DynamicResult,
    PairRules,
    SampledBatches,
    batch_fvt_embeddings,
    dynamic_tokenize,
    merged_ids,
    merged_offsets,
    readable_token,
    sampled_batches,
    tokens_concatenate,
)
from analysis.methods.dynamic.defaults import (
    DEFAULT_N,
    DEFAULT_SEED,
    PAGE_BATCH_SIZE,
    PAGE_BOUNDARY,
    PAGE_LANG,
    PAGE_TARGET,
)
from analysis.texts.flores import available_codes
from analysis.texts.flores import lines as flores_lines
from analysis.tokenizer.defaults import SAMPLE_TEXT
from ui.caching import cache_resource
from ui.charts import interactive_toggle, show_svg
from ui.expanders import lazy_expander
from ui.pickers import Needs, model_picker_keys, pick_model, pick_tokenizer
from ui.spans import token_spans_html
from ui.svg import line_chart
from ui.tables import static_table
from ui.workspace import json_download, keep

#: The page inputs kept in the workspace.
KEPT = ("dyn-tok", *model_picker_keys("dyn-model"))

#: The tokenizers the page can merge: token strings that concatenate to the text (the engine's own test).
CONCATENATING = Needs(
    "needs BPE or Unigram",
    "a BPE or Unigram model whose tokens concatenate to the text (WordPiece's '##' pieces do not)",
    tokens_concatenate,
)

NO_FLORES = "FLORES-200 was not found: set TOKLAB_FLORES (or TOKLAB_ASSETS to the shared assets folder)."
BOUNDARY_HELP = {
    "pretokens": "never across the base pre-tokenizer's pieces",
    "word": "never across whitespace (punctuation may join a word)",
    "word_hyphen": "as word, but punctuation joins a word only when it is '-'",
    "sentence": "anything but special tokens (the space-marker rule still holds)",
}
DEFAULT_LANG = PAGE_LANG
DEFAULT_BOUNDARY = PAGE_BOUNDARY
DEFAULT_TARGET = PAGE_TARGET
MERGE_COLUMNS = ["k", "left", "right", "merged", "merged (raw)", "count", "replaced", "avg length after"]


@cache_resource(show_spinner="Merging…", max_entries=16)
def _run(
    tok: LoadedTokenizer, texts: tuple[str, ...], merges: int, boundary: str, special: bool
) -> DynamicResult:
    return dynamic_tokenize(tok, list(texts), merges, boundary, special_tokens=special)


@cache_resource(show_spinner="Merging every batch to its maximum…", max_entries=8)
def _batches(
    tok: LoadedTokenizer, texts: tuple[str, ...], size: int, seed: int, boundary: str, special: bool
) -> SampledBatches:
    return sampled_batches(
        tok, list(texts), batch_size=size, seed=seed, boundary=boundary, special_tokens=special
    )


def batch_source(texts: list[str]) -> tuple[str, str, int] | list[str]:
    """The batch as the equivalent command names it: (``flores``, language, n) or the user's lines."""
    if st.session_state.get("dyn-src", "FLORES sentences") == "FLORES sentences":
        return ("flores", st.session_state.get("dyn-lang", DEFAULT_LANG), len(texts))
    return texts


def show_command(command: Equivalent) -> None:
    """The equivalent command, copyable, with its notes."""
    st.caption(command.caption())
    st.code(command.text(), language="bash", wrap_lines=True)


def batch() -> list[str]:
    """FLORES sentences of one language, or the user's lines (one example each)."""
    if (
        st.radio("Batch", ["FLORES sentences", "My text"], horizontal=True, key="dyn-src")
        == "FLORES sentences"
    ):
        langs = available_codes()
        if not langs:
            raise DataError(NO_FLORES)
        c1, c2 = st.columns(2)
        lang = c1.selectbox("Language", langs, index=langs.index(DEFAULT_LANG) if DEFAULT_LANG in langs else 0,
                            key="dyn-lang", help="Estonian by default: most tokenizers split it into many pieces, "
                            "so there is much to merge")  # fmt: skip
        n = c2.slider("Sentences in the batch", 1, 128, DEFAULT_N, key="dyn-n")
        return flores_lines(lang)[:n]
    raw = st.text_area("One example per line", value=SAMPLE_TEXT, height=160, key="dyn-text")
    return [ln for ln in raw.splitlines() if ln.strip()]


def numbers(res: DynamicResult, full: DynamicResult) -> None:
    """Tokens before/after, reduction, unique tokens, merges available at the boundary level."""
    before, after = sum(res.lengths_before), sum(res.lengths_after)
    m = st.columns(5)
    m[0].metric("Tokens before", f"{before:,}")
    m[1].metric("Tokens after", f"{after:,}", delta=f"{after - before:,}", delta_color="inverse")
    m[2].metric("Reduction", f"{res.reduction_pct:.1f}%")
    m[3].metric(
        "Unique after", f"{len(res.unique_tokens):,}", help="distinct tokens in the batch after the merges"
    )
    m[4].metric("Possible merges", f"{len(full.merges):,}" + ("" if full.exhausted else "+"),
                help="merges until no valid pair is left: the boundary level (word / pre-token) is reached")  # fmt: skip


def curve(full: DynamicResult, k: int, target: float) -> None:
    """Average sequence length against merges, and the merges needed for the target reduction."""
    n_max = len(full.merges)
    c1, c2 = st.columns([1, 3])
    need = full.merges_for_reduction(target)
    c1.metric("Merges needed", "not reachable" if need is None else f"{need:,}",
              help=f"for {target:g}% fewer tokens than the base tokenizer's")  # fmt: skip
    if need is None and n_max:
        best = 100 * (1 - full.merges2seqlen[-1] / full.merges2seqlen[0]) if full.merges2seqlen[0] else 0.0
        c1.caption(f"This batch allows at most {best:.1f}% at this boundary: lower the target or allow longer "
                   "merges (word or sentence boundary).")  # fmt: skip
    if full.exhausted and n_max:
        need_rel = full.merges_for_reduction(target, relative_to_max=True)
        c1.metric(f"Merges for {target:g}% of max.", "—" if need_rel is None else f"{need_rel:,}",
                  help="the paper's scale: 100% = the boundary-level (word / pre-token) length")  # fmt: skip
    if interactive_toggle("dyn-plotly", container=c2):
        fig = go.Figure(
            go.Scatter(x=list(range(n_max + 1)), y=full.merges2seqlen, mode="lines", name="avg length")
        )
        fig.add_vline(x=k, line_dash="dot", annotation_text=f"k = {k}")
        if need is not None:
            fig.add_trace(
                go.Scatter(x=[need], y=[full.merges2seqlen[need]], mode="markers", name=f"{target:g}% target")
            )
        fig.update_layout(xaxis_title="merges k", yaxis_title="average sequence length", height=340,
                          margin=dict(t=30, b=10))  # fmt: skip
        c2.plotly_chart(fig, width="stretch", key="dyn-curve")
    else:  # static first: no chart module to load (ui/charts.py)
        point = (
            None if need is None else (need, full.merges2seqlen[need], f"{target:g}% target: {need:,} merges")
        )
        show_svg(line_chart(list(range(n_max + 1)), full.merges2seqlen, title="Average sequence length by merges",
                            x_label="merges k", y_label="average sequence length", vline=(k, f"k = {k}"),
                            marker=point), container=c2)  # fmt: skip
    c2.caption("Each merge joins the batch's most frequent adjacent pair, so the average number of tokens per "
               "example drops fastest over the first merges and then slowly, once the pairs left occur only once or "
               "twice; the dotted line is the chosen k, the marker the merges the target needs.")  # fmt: skip


def spans(tok: LoadedTokenizer, texts: list[str], res: DynamicResult, k: int) -> None:
    """One example before and after the merges."""
    i = st.selectbox(
        "Example", range(len(texts)), format_func=lambda j: f"{j + 1}: {texts[j][:80]}", key="dyn-seq"
    )
    ws = st.checkbox("Show whitespace", key="dyn-ws")
    st.markdown(f"**Before** — {len(res.base_tokens[i])} tokens")
    st.html(token_spans_html(tok, texts[i], res.base_ids[i], res.base_offsets[i], show_whitespace=ws))
    st.markdown(f"**After {k} merges** — {len(res.tokens[i])} tokens")
    st.html(token_spans_html(tok, texts[i], merged_ids(res, i), merged_offsets(res, i), show_whitespace=ws,
                             raws=res.tokens[i]))  # fmt: skip


def merges_table(tok: LoadedTokenizer, res: DynamicResult) -> None:
    """The merges in order, with counts."""
    rules = PairRules(tok, "sentence")  # one byte memo for every token shown
    rows = [
        {"k": j + 1, "left": readable_token(tok, s.left, rules), "right": readable_token(tok, s.right, rules),
         "merged": readable_token(tok, s.merged, rules), "merged (raw)": s.merged, "count": s.count,
         "replaced": s.replaced, "avg length after": round(res.merges2seqlen[j + 1], 3)}
        for j, s in enumerate(res.merges)
    ]  # fmt: skip
    st.subheader(f"Merges ({len(rows)})")
    static_table(pd.DataFrame(rows, columns=MERGE_COLUMNS), height=400)


def download(tok: LoadedTokenizer, report: DynamicReport, k: int) -> None:
    """The result as JSON: the document `python -m analysis dynamic … --target T --full-curve --json` prints."""
    st.download_button("Download JSON", json_document(paths.public_document(report.to_json())),
                       file_name=f"dynamic_{tok.name}_{report.result.boundary}_{k}.json", mime="application/json",
                       key="dyn-download", help="with the full curve and, once computed, the embeddings' cost")  # fmt: skip


def page() -> None:
    """Tokenizer, batch, boundary and k → `dynamic.dynamic_tokenize` → numbers, curve, spans, merges."""
    st.title("Dynamic tokenization")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        f"Batch-level dynamic tokenization ({cite('dynamic-tokenization')}): tokenize a batch with the "
        "base tokenizer, then repeatedly merge the most frequent valid adjacent pair across the whole batch. The "
        "merged strings need not be in any vocabulary; a model gets their embeddings from a hypernetwork or FVT."
    )
    tok = pick_tokenizer("Tokenizer", key="dyn-tok", needs=CONCATENATING, feature="Dynamic tokenization")
    if tok is None:
        return
    st.caption(f"{tok.name}: {tok.model_type}, {tok.flavour}, {tok.vocab_size:,} tokens")
    texts = batch()
    if not texts:
        st.warning("Type some text: each non-empty line is one example of the batch.")
        return
    c1, c2, c3 = st.columns([2, 1, 2])
    boundary = c1.selectbox("Merge boundary", BOUNDARIES, index=BOUNDARIES.index(DEFAULT_BOUNDARY), key="dyn-boundary",
                            format_func=lambda b: f"{b} — {BOUNDARY_HELP[b]}",
                            help="the page starts at the paper's word boundary; the command line's default is "
                            "pretokens (the equivalent command states the boundary)")  # fmt: skip
    special = c1.checkbox("Count special tokens", key="dyn-special",
                          help="the BOS/EOS … the tokenizer adds count in the sequence lengths (they never merge)")  # fmt: skip
    target = c2.number_input("Target reduction %", 0.0, 100.0, DEFAULT_TARGET, step=1.0, key="dyn-target")
    full = _run(tok, tuple(texts), FULL_CURVE_MERGES, boundary, special)
    n_max = len(full.merges)
    if n_max == 0:
        st.info("No valid pair to merge in this batch: it is already at the boundary level.")
    need = full.merges_for_reduction(target)
    default_k = min(need if need is not None else 10, n_max)  # the first view shows the target reached
    k = min(c3.slider("Merges", 0, max(n_max, 1), default_k, key="dyn-merges", disabled=n_max == 0), n_max)
    res = _run(tok, tuple(texts), k, boundary, special)
    numbers(res, full)
    curve(full, k, target)
    spans(tok, texts, res, k)
    merges_table(tok, res)
    emb = model_embeddings(tok, res, (tok.content_hash, _digest(texts), k, boundary, special))
    download(tok, DynamicReport(res, float(target), full, emb.report() if emb else None), k)
    command = dynamic_command(tok, batch=batch_source(texts), merges=k, boundary=boundary, special=special,
                              target=float(target), model=st.session_state["dyn-emb"][0][-1] if emb else None)  # fmt: skip
    show_command(command)
    batches_section(tok, texts, boundary, special)


def _digest(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()


def model_embeddings(tok: LoadedTokenizer, res: DynamicResult, key: tuple) -> BatchEmbeddings | None:
    """The FVT rows a chosen model needs for this batch: the sequence-length saving next to the cost (kept for
    this batch and k until either changes; returned for the JSON, also while the box is closed)."""
    stored = st.session_state.get("dyn-emb")
    box = lazy_expander("Embeddings for a model (FVT): the saving next to the cost", "dyn-emb-box",
                        keep=model_picker_keys("dyn-model"))  # fmt: skip
    if box is None:  # closed: the model picker is not part of the first view (Dynamic 2.54 → 2.38 s)
        return stored[1] if stored is not None and stored[0][:-1] == key else None
    with box:
        st.caption(
            "A model cannot look merged tokens up: each gets the mean of its pieces' input-embedding rows (FVT, as "
            f"{cite('dynamic-tokenization')} use for their baseline); unmerged tokens keep their own rows."
        )
        model = pick_model("dyn-model", "Model of this tokenizer")
        if model and st.button("Compute the batch's embeddings", key="dyn-emb-run"):
            with st.spinner("Reading the model's input embeddings and averaging…"):
                st.session_state["dyn-emb"] = stored = ((*key, model), batch_fvt_embeddings(res, tok, model))
        if not model or stored is None or stored[0] != (*key, model):
            return None
        emb = stored[1]
        embeddings_view(tok, emb)
        return emb


def embeddings_view(tok: LoadedTokenizer, emb: BatchEmbeddings) -> None:
    """The saving and the cost as metrics, the FVT rows' pieces and the rows as .safetensors."""
    r = emb.report()
    m = st.columns(5)
    m[0].metric("Tokens saved", f"{r['tokens_saved']:,}", f"-{r['reduction_pct']:.1f}%", delta_color="off")
    m[1].metric("Attention cost (Σ L²)", f"-{r['attention_cost_reduction_pct']:.1f}%")
    m[2].metric("Rows computed (FVT)", f"{r['rows_computed']:,}")
    m[3].metric("Memory of the new rows", f"{r['new_rows_bytes'] / 1024:.1f} KiB")
    m[4].metric(
        "Time", f"{r['fvt_seconds'] * 1e3:.1f} ms", f"read {r['read_seconds']:.1f} s", delta_color="off"
    )
    st.caption(
        f"The batch uses {r['unique_tokens']:,} rows of dimension {r['dim']} "
        f"({r['batch_rows_bytes'] / 1024:.0f} KiB in float32) instead of the model's {r['model_rows']:,}-row "
        f"matrix ({r['model_embedding_bytes'] / 1e6:.0f} MB)."
    )
    rules = PairRules(tok, "sentence")
    rows = [{"token": readable_token(tok, t, rules), "pieces": emb.pieces[t], "raw": t}
            for t, new in zip(emb.tokens, emb.merged) if new]  # fmt: skip
    st.dataframe(pd.DataFrame(rows, columns=["token", "pieces", "raw"]), hide_index=True, key="dyn-emb-table")
    st.download_button("Download the rows (.safetensors)", save({"embeddings": emb.rows}),
                       file_name="dynamic_embeddings.safetensors", key="dyn-emb-dl")  # fmt: skip


def batches_section(tok: LoadedTokenizer, texts: list[str], boundary: str, special: bool) -> None:
    """Split the examples into batches and draw each batch's merge count from U(0, m_max), as in training."""
    with st.expander("Sample the number of merges per batch (as the paper trains)"):
        st.caption(
            "Training with a sampled granularity: per batch, m ~ U(0, m_max), where m_max merges reach the boundary "
            "level (words or pre-tokens)."
        )
        c1, c2 = st.columns(2)
        size = c1.number_input("Batch size", 1, 128, PAGE_BATCH_SIZE, key="dyn-batch-size")
        seed = c2.number_input("Seed", 0, 10**6, DEFAULT_SEED, key="dyn-seed")
        runs = _batches(tok, tuple(texts), int(size), int(seed), boundary, special)
        doc = paths.public_document(runs.to_json())
        static_table(pd.DataFrame(doc["batches"]), height=400)
        show_command(dynamic_command(tok, batch=batch_source(texts), boundary=boundary, special=special,
                                     batch_size=int(size), seed=int(seed)))  # fmt: skip
        json_download("Download the batches (JSON)", json_document(doc), "dynamic_batches.json",
                      key="dyn-batches-download",
                           help="the document `python -m analysis dynamic … --batch-size B --sample-merges "
                           "--json` prints")  # fmt: skip


page()

"""Prune: choose a pruning order and a text mix, see bytes/token and STT-unreachable tokens against N, export."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.express as px
import streamlit as st

from analysis import LoadedTokenizer
from analysis.bpe import merge_tree
from analysis.commands._equivalent import Equivalent, prune_command
from analysis.core import paths
from analysis.core.references import cite, reference
from analysis.measure.robustness import robustness_delta
from analysis.methods import pruning as P
from analysis.methods import undertrained as ut
from analysis.methods.pruning.report import (
    MAX_ZIP_BYTES,
    MODEL_INITS,
    WrittenExport,
    folder_size,
    prune_report,
    pruned_zip,
    write_pruned,
    zip_folder,
)
from analysis.model.source import resolve_model
from analysis.texts.corpora import MAX_UPLOAD_CHARS, shared_corpora, upload_lines
from analysis.texts.flores import available_codes
from analysis.tokenizer.defaults import SAMPLE_TEXT
from ui.caching import cache_resource
from ui.corpus_jobs import Counted, corpus_panel
from ui.errors import try_step
from ui.export_check import export_check_section, speculative_line
from ui.library import add_edited_button
from ui.model_check import model_check_section, model_export_section, recipe_inputs
from ui.pickers import BPE, model_picker_keys, pick_model, pick_tokenizer, server_path_input
from ui.progress import start_now
from ui.robustness import measured, robustness_button
from ui.spans import token_spans_html
from ui.tables import static_table
from ui.trees import merge_tree_text
from ui.workspace import keep

#: The page inputs kept in the workspace.
KEPT = ("prune-tok", *model_picker_keys("prune-model"))

SCRIPTS = ["Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Han", "Hiragana", "Katakana", "Hangul", "Thai",
           "Devanagari", "Georgian", "Armenian"]  # fmt: skip


# ------------------------------------------------------------------------------------------ engine calls (cached)
@cache_resource(
    show_spinner="Computing the pruning order (once per tokenizer, order and text mix; then from the disk cache)…",
    max_entries=8,
)
def _order(tok: LoadedTokenizer, method: str, texts: tuple[str, ...] | None, scripts: tuple[str, ...],
           scores: np.ndarray | None, counts: np.ndarray | None = None) -> P.PruneOrder:  # fmt: skip
    return P.stored_order(
        tok, method, list(texts) if texts else None, counts=counts, allowed_scripts=scripts, scores=scores
    )


@cache_resource(show_spinner="Reading the model's embeddings and computing indicators…", max_entries=4)
def _undertrained(
    model: str, fingerprint: str, tok: LoadedTokenizer
) -> tuple[np.ndarray, ut.UndertrainedResult]:
    """The main under-trained indicator per token id (lower = more under-trained) and the analysis."""
    res = ut.analyze(model, tok)
    return res.main_values[: res.n_tokens].astype("float64"), res


@cache_resource(show_spinner=False, max_entries=32)
def _curve(tok: LoadedTokenizer, spec: tuple, ns: tuple[int, ...], held: dict[str, list[str]], stt: bool):
    return P.prune_curve(tok, _order(tok, *spec), ns, held, stt=stt)


@cache_resource(show_spinner="Pruning…", max_entries=4)
def _pruned(tok: LoadedTokenizer, spec: tuple, n: int) -> P.PruneResult:
    return P.prune_by_order(tok, _order(tok, *spec), n)


# ------------------------------------------------------------------------------------------ inputs
def scores_from_model(tok: LoadedTokenizer) -> np.ndarray | None:
    """The under-trained-first order's scores: a model's main magikarp indicator per id (None until chosen)."""
    model = pick_model("prune-ut", "Model whose embeddings score the tokens")
    if not model:
        st.info("Choose the model that goes with this tokenizer: its embeddings rank the tokens.")
        return None
    scores, res = _undertrained(model, resolve_model(model).fingerprint(), tok)
    for note in res.notes:
        st.info(note)
    st.caption(
        f"Indicator **{res.main}** from {res.model_label} ({res.n_tokens:,} tokens scored; lower = more "
        "under-trained). Only leaves of the merge graph are removed, so no surviving token becomes unreachable; "
        "ids without a score are pruned last."
    )
    return scores


def text_mix(langs: list[str], n_train: int, uploads) -> tuple[tuple[str, ...] | None, dict[str, list[str]]]:
    """The training mix (FLORES training lines + uploads, equal shares: :func:`pruning.flores_mix`) and the
    held-out FLORES lines."""
    extra = []
    for up in uploads or []:  # strict UTF-8, at most MAX_UPLOAD_CHARS characters per upload
        units, cut = upload_lines(up.name, up.getvalue())
        extra.append(units)
        if cut:
            st.caption(f"{up.name}: only the first {MAX_UPLOAD_CHARS:,} characters are used for the mix.")
    texts, held = P.flores_mix(langs, n_train, extra)
    return (tuple(texts) if texts else None), held


def corpus_counts(tok: LoadedTokenizer) -> tuple[bool, Counted | None]:
    """(corpus chosen, its token-id counts once counted): the frequency orders from a corpus counted by a job of
    the queue (the distributed map stage's token-id counts, local executor)."""
    src = st.radio("Token frequencies from", ["the text mix below", "a corpus (background job)"], horizontal=True,
                   key="prune-freq-src")  # fmt: skip
    if src == "the text mix below":
        return False, None
    text_files = {k: v for k, v in shared_corpora().items() if k.startswith("text/")}
    counted = corpus_panel("prune-corpus", tok, "token-ids", text_files, label="Count token ids")
    if counted is not None:
        counts = counted.result
        st.caption(f"Token-id counts of the corpus: {int(counts.sum()):,} tokens, {int((counts > 0).sum()):,} "
                   "distinct ids (special tokens included, as pruning counts).")  # fmt: skip
    return True, counted


# ------------------------------------------------------------------------------------------ results
def curves(tok: LoadedTokenizer, spec: tuple, order: P.PruneOrder, held: dict[str, list[str]]) -> None:
    """Bytes/token per held-out language and STT-unreachable tokens against N (computed on request)."""
    with st.form("prune-curve-form"):
        d1, d2, d3 = st.columns(3)
        max_n = d1.number_input("Largest N on the curve", 1, len(order), min(len(order), max(1, tok.vocab_size // 2)),
                                key=f"prune-maxn-{tok.content_hash}")  # per tokenizer: never another one's N  # fmt: skip
        points = d2.slider("Points", 3, 30, 10, key="prune-points")
        stt = d3.checkbox("STT-unreachable count (1–4 s per point)", value=True, key="prune-stt")
        if st.form_submit_button("Compute curves", type="primary"):
            st.session_state["prune-curve-on"] = True
    if not st.session_state.get("prune-curve-on"):
        return
    if not held:
        st.info("Choose at least one FLORES language for the bytes/token curve.")
        return
    bar = st.progress(0.0, text="Pruning and measuring…")
    pts = _curve(tok, spec, tuple(P.curve_points(int(max_n), int(points))), held, stt)
    bar.empty()
    df = pd.DataFrame([{"N pruned": p.n, "language": lang, "bytes/token": v, "vocab size": p.vocab_size}
                       for p in pts for lang, v in p.bytes_per_token.items()])  # fmt: skip
    g1, g2 = st.columns(2)
    g1.plotly_chart(px.line(df, x="N pruned", y="bytes/token", color="language", markers=True,
                            title="Bytes per token on held-out lines (↑ better)"), key="prune-bpt-chart")  # fmt: skip
    with g1:
        flat_reasons(tok, order, int(max_n), df, held)
    if stt:
        du = pd.DataFrame([{"N pruned": p.n, "unreachable": p.unreachable} for p in pts])
        g2.plotly_chart(px.line(du, x="N pruned", y="unreachable", markers=True, title="STT-unreachable tokens"),
                        key="prune-stt-chart")  # fmt: skip
        if du["unreachable"].nunique() == 1:
            g2.caption(f"Flat: {du['unreachable'].iloc[0]:,} unreachable tokens at every N. No removed token is a "
                       "part of a surviving token's merges, so every token left can still be built"
                       + (" (the order removes leaves only)." if spec[0] in P.STRUCTURE_SAFE_ORDERS else "."))  # fmt: skip
    with st.expander("Curve table"):
        st.dataframe(df.pivot_table(index="N pruned", columns="language", values="bytes/token"),
                     key="prune-curve-table")  # fmt: skip


@cache_resource(show_spinner=False, max_entries=16)
def _occurrences(tok: LoadedTokenizer, lines: tuple[str, ...], ids: tuple[int, ...]) -> tuple[int, int]:
    """How often the given ids occur when the tokenizer encodes the lines, and the lines' token count."""
    wanted = set(ids)
    enc = tok.tokenizer.encode_batch_fast(list(lines), add_special_tokens=False)
    return sum(1 for e in enc for i in e.ids if i in wanted), sum(len(e.ids) for e in enc)


def flat_reasons(
    tok: LoadedTokenizer, order: P.PruneOrder, max_n: int, df: pd.DataFrame, held: dict[str, list[str]]
) -> None:
    """One line per language whose bytes/token curve is flat: the removed tokens (almost) never occur there."""
    for lang, part in df.groupby("language", sort=False):
        if part["bytes/token"].max() - part["bytes/token"].min() >= 5e-4:
            continue
        used, total = _occurrences(tok, tuple(held[lang]), tuple(order.ids[:max_n]))
        if used == 0:
            st.caption(f"{lang} is flat: none of the {max_n:,} tokens this order removes first occurs when "
                       f"{tok.name} encodes its held-out lines, so removing them changes nothing there.")  # fmt: skip
        else:
            st.caption(f"{lang} is flat: the {max_n:,} tokens this order removes first make up only {used:,} of "
                       f"the {total:,} tokens of its held-out lines.")  # fmt: skip


def next_tokens(tok: LoadedTokenizer, order: P.PruneOrder, n: int) -> None:
    """The 25 tokens the order removes after the first N, and the merge tree of one of them."""
    nxt = list(order.ids[n : n + 25])
    if not nxt:
        return
    st.markdown(
        "**Next tokens to be removed** (after these N; *order key*: the value the order sorts by, e.g. a "
        "frequency or a score):"
    )
    static_table(pd.DataFrame([{"id": i, "token": tok.readable(tok.id_to_token[i]), "raw": tok.id_to_token[i],
                                "order key": order.keys.get(i)} for i in nxt]))  # fmt: skip
    pick = st.selectbox("Merge tree of", nxt, format_func=lambda i: f"{tok.readable(tok.id_to_token[i])!r} [{i}]",
                        key="prune-tree-pick")  # fmt: skip
    if not trees_now(tok):
        return
    tree = try_step(merge_tree, tok, tok.id_to_token[pick])  # the export below stays usable
    if tree is not None:
        st.code(merge_tree_text(tok, tree), language=None)


def trees_now(tok: LoadedTokenizer) -> bool:
    """Whether to draw merge trees now (on a button above 100k tokens: the first tree replays every merge of the
    tokenizer, seconds on 150k tokens)."""
    return start_now(tok, "prune-tree-go", "Show its merge tree", "the first merge tree replays every merge")


def own_text(tok: LoadedTokenizer, new: LoadedTokenizer, held: dict[str, list[str]]) -> None:
    """A text (the user's own, first a held-out line) tokenized before and after pruning."""
    default = next(iter(held.values()))[0] if held and next(iter(held.values())) else SAMPLE_TEXT
    text = st.text_area("Before and after on your own text", default, key="prune-own-text", height=80)
    if not text:
        return
    c1, c2 = st.columns(2)
    for col, t, label in ((c1, tok, "Before"), (c2, new, "After pruning")):
        enc = t.tokenizer.encode(text, add_special_tokens=False)
        col.markdown(f"**{label}** ({len(enc.ids)} tokens)")
        col.html(token_spans_html(t, text, enc.ids, enc.offsets, show_whitespace=True))


def export(tok: LoadedTokenizer, method: str, res: P.PruneResult, held: dict[str, list[str]], n: int,
           command: Equivalent) -> None:  # fmt: skip
    """Sizes, the equivalent command, the zip (tokenizer + prune_report.json), adding to the library, and writing a
    folder (+ model)."""
    new = res.tokenizer
    m1, m2, m3 = st.columns(3)
    m1.metric("Vocabulary", f"{new.vocab_size:,}", delta=f"-{len(res.removed):,}", delta_color="off")
    m2.metric("Merges", f"{len(new.merges):,}", delta=f"-{res.merges_removed:,}", delta_color="off")
    if held:
        lang, lines = next(iter(held.items()))
        after = P.bytes_per_token(new, lines)
        change = round(after - P.bytes_per_token(tok, lines), 3)
        if change == 0:  # no "−0.000" in red: the pruned tokens do not occur in these lines
            m3.metric(f"bytes/token ({lang})", f"{after:.3f}", delta="no change", delta_color="off", delta_arrow="off",
                      help=f"none of the removed tokens occurs when the original tokenizer encodes the {lang} lines")  # fmt: skip
        else:
            m3.metric(f"bytes/token ({lang})", f"{after:.3f}", delta=f"{change:+.3f}")
    speculative_line(new, tok, "The pruned tokenizer")
    ident = (tok.content_hash, new.content_hash, tuple(held))
    robustness_button("prune-rob", ident, lambda cb: robustness_delta(tok, new, held, progress=cb).to_json())
    command = command if measured("prune-rob", ident) else command.plus("--no-robustness")
    st.caption(command.caption())
    st.code(command.text(), language="bash", wrap_lines=True)
    own_text(tok, new, held)
    report = prune_report(tok, method, res)
    e1, e2, e3 = st.columns(3)
    e1.download_button("Download tokenizer (.zip)", data=lambda: pruned_zip(res, report, "tokenizer"),  # on click
                       file_name=f"{tok.name}-pruned{n}.zip", mime="application/zip", key="prune-dl")  # fmt: skip
    add_edited_button(new, f"{tok.name} -{n} ({method})", "prune-add", container=e2)
    if st.session_state.pop("prune-out-reset", False):  # the folder just written: start a fresh name
        st.session_state["prune-out"] = ""
    out_dir = server_path_input("…or write a new folder on the server", "prune-out", write=True, container=e3,
                                placeholder="/path/to/new-folder")  # fmt: skip
    if out_dir is not None:
        write_folder_ui(tok, method, res, out_dir)
    zip_written(st.session_state.get("prune-written"))
    workspace_model_ui(tok, method, res, n)
    export_check_section("prune-check", tok, res.tokenizer)

    def recipe() -> dict:  # the check runs in a worker: the edit travels as workspace items
        return {
            "op": "prune",
            "init": "fvt",
            **recipe_inputs(tok, new, prune_report(tok, method, res).to_json()),
        }

    model_check_section("prune-mc", f"{tok.name} -{n} ({method})", recipe, bakeoff=False, keep_model=False)


def write_folder_ui(tok: LoadedTokenizer, method: str, res: P.PruneResult, out_dir: Path) -> None:
    """Write the pruned tokenizer (and, optionally, a model following it) to a new server folder."""
    model = pick_model("prune-model", "Model whose embeddings and LM head should follow", optional=True)
    init = st.radio("Init of new rows", MODEL_INITS, horizontal=True, key="prune-init")
    if st.button("Write folder" + (" with model" if model else ""), key="prune-write"):
        with st.spinner("Writing" + (" and remapping the model's embeddings…" if model else "…")):
            report = prune_report(tok, method, res, stt=True, out=out_dir)
            st.session_state["prune-written"] = write_pruned(tok, res, out_dir, report, model=model or None,
                                                             init=init)  # fmt: skip
        st.session_state["prune-out-reset"] = True
        st.rerun()


def workspace_model_ui(tok: LoadedTokenizer, method: str, res: P.PruneResult, n: int) -> None:
    """Write the pruned tokenizer with a model following it into this workspace, as downloads (the Hugging Face
    folder as a zip, optionally a .gguf): the way out of the browser when server paths are off."""
    st.markdown("**With a model, as downloads** (its embeddings and LM head follow the pruned ids)")
    model = pick_model("prune-ws-model", "Model of this tokenizer", optional=True)
    if not model:
        return
    c1, c2 = st.columns(2)
    init = c1.radio("Init of new rows", MODEL_INITS, horizontal=True, key="prune-ws-init")
    gguf = c2.checkbox("Also write a .gguf for llama.cpp", key="prune-ws-gguf")
    name = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{tok.name}-pruned{n}-{method}-{init}").strip("_")

    def recipe() -> dict:  # the export runs in a worker: the edit travels as workspace items
        report = prune_report(tok, method, res, stt=True).to_json()
        return {"op": "prune", "init": init, **recipe_inputs(tok, res.tokenizer, report)}

    model_export_section("prune-ws", recipe, model, name, gguf)


def zip_written(written: WrittenExport | None) -> None:
    """Say what the last write produced and offer it as one zip: only the files the export wrote."""
    if written is None or not written.folder.is_dir():
        return
    rows = f" (model {written.remap.old_rows:,} → {written.remap.new_rows:,} rows)" if written.remap else ""
    st.success(f"Wrote {len(written.files)} files to {written.folder}{rows}.")
    total = folder_size(written.folder, written.files)
    if total <= MAX_ZIP_BYTES and st.button(
        f"Zip {written.folder} for download ({total / 1e6:.0f} MB)", key="prune-zip"
    ):
        st.download_button("Download model + tokenizer (.zip)", lambda: zip_folder(written.folder, written.files),
                           file_name=f"{written.folder.name}.zip", mime="application/zip", key="prune-dl-model")  # fmt: skip


def prune_now(tok: LoadedTokenizer, n: int) -> bool:
    """Whether to prune and show the export now (on the "Prune" button above 100k tokens: seconds on 150k)."""
    return start_now(tok, "prune-go", f"Prune {n:,} tokens", "pruning takes a few seconds", primary=True)


def page() -> None:
    """Tokenizer, order, text mix → `pruning.compute_order` → curves, next tokens, export."""
    st.title("Prune a tokenizer without breaking it")
    keep(*KEPT)  # restored from the workspace after a reload or a restart
    st.caption(
        f"Leaf-based pruning ({cite('continued-bpe')}, §3.2) only removes tokens that no surviving merge needs, "
        "so it never creates unreachable tokens; naive orders (by id, by frequency) can. The under-trained-first "
        f"order follows {reference('sa-bpe').short}. One order is computed once; any N prunes its first N tokens. "
        "Curves: bytes/token on held-out FLORES lines and tokens the merges can no longer build (STT-unreachable)."
    )
    tok = pick_tokenizer("Tokenizer", key="prune-tok", needs=BPE, feature="Pruning")
    if tok is None:
        return
    c1, c2 = st.columns([1, 2])
    method = c1.selectbox("Pruning order", P.ORDERS, index=P.ORDERS.index(P.FIRST_VIEW_ORDER), key="prune-order",
                          format_func=P.ORDER_LABELS.__getitem__)  # fmt: skip
    scores = scores_from_model(tok) if method == "score" else None
    if method == "score" and scores is None:
        return
    langs_all = available_codes()
    langs = c2.multiselect(
        "Text mix: FLORES-200 languages (equal byte shares) — also the languages of the bytes/token curve",
        langs_all, default=[c for c in P.FIRST_VIEW_LANGUAGES if c in langs_all], key="prune-langs",
    )  # fmt: skip
    c3, c4, c5 = st.columns(3)
    n_train = int(c3.number_input("FLORES lines per language for frequencies (rest = held out)", 50, 1000,
                                  P.FIRST_VIEW_TRAIN_LINES, 50, key="prune-ntrain"))  # fmt: skip
    uploads = c4.file_uploader("Extra texts for the mix (.txt, .gz, .jsonl, .zip)", accept_multiple_files=True,
                               key="prune-upload", max_upload_size=paths.upload_widget_mb())  # fmt: skip
    scripts = tuple(c5.multiselect("Scripts to keep (script order)", SCRIPTS, default=list(P.FIRST_VIEW_SCRIPTS), key="prune-scripts",
                                   disabled=method != "script"))  # fmt: skip
    from_corpus, counted = corpus_counts(tok) if method in ("frequency", "leaf-frequency") else (False, None)
    if from_corpus and counted is None:
        return
    counts = counted.result if counted is not None else None
    texts, held = text_mix(langs, n_train, uploads)
    needs_text = method in P.CORPUS_ORDERS and not from_corpus
    if needs_text and not texts:
        st.warning(f"The {method} order needs a text mix: choose at least one language or upload a text.")
        return
    spec = (method, texts if needs_text else None, scripts, scores, counts)
    order = _order(tok, *spec)
    if len(order) == 0:
        st.info("This order has nothing to prune for this tokenizer.")
        return
    st.markdown(f"**{tok.name}**: {tok.vocab_size:,} tokens; the **{method}** order can prune up to **{len(order):,}** "
                "(protected: added/special tokens and the byte alphabet).")  # fmt: skip
    curves(tok, spec, order, held)
    st.subheader("Prune N tokens")
    n = int(st.number_input("N", 0, len(order), min(len(order), 1000), step=100, key="prune-n"))
    next_tokens(tok, order, n)
    st.subheader("Export")
    if n == 0:
        st.info("Set N > 0 to export a pruned tokenizer.")
        return
    if not prune_now(tok, n):
        return
    command = prune_command(tok, order=method, n=n, flores=langs if needs_text else (), flores_lines=n_train,
                            mix_uploads=[u.name for u in uploads or []] if needs_text else (),
                            scripts=scripts if method == "script" else None,
                            corpus_files=counted.ident.inputs if counted is not None else ())  # fmt: skip
    export(tok, method, _pruned(tok, spec, n), held, n, command)


page()

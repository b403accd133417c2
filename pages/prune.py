"""Prune: choose a pruning order and a text mix, see bytes/token and STT-unreachable tokens against N, export."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis import AnalysisError
from analysis import pruning as P
from analysis.bpe import iter_tree, merge_tree
from analysis.corpora import iter_bytes
from analysis.flores import available_codes
from analysis.flores import lines as flores_lines
from ui import state

MAX_ZIP_BYTES = 1_000_000_000
UI_ORDERS = list(P.ORDERS)
UI_LABELS = {
    "score": "under-trained first — lowest magikarp indicator of a model's embeddings first, leaves only"
}
SCRIPTS = ["Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Han", "Hiragana", "Katakana", "Hangul", "Thai",
           "Devanagari", "Georgian", "Armenian"]  # fmt: skip


@st.cache_resource(
    show_spinner="Computing the pruning order (once per tokenizer, order and text mix)…", max_entries=8
)
def _order(
    key: str, _tok, method: str, _texts: tuple[str, ...] | None, scripts: tuple[str, ...], _scores=None
) -> P.PruneOrder:
    return P.compute_order(
        _tok, method, list(_texts) if _texts else None, allowed_scripts=scripts, scores=_scores
    )


@st.cache_resource(show_spinner="Reading the model's embeddings and computing indicators…", max_entries=4)
def _undertrained(model: str, fingerprint: str, tok_key: str, _tok):
    """The main under-trained indicator per token id (lower = more under-trained) and the analysis."""
    from analysis import undertrained as ut

    res = ut.analyze(model, _tok)
    return res.main_values[: res.n_tokens].astype("float64"), res


@st.cache_resource(show_spinner=False, max_entries=32)
def _curve(key: str, _tok, _order_obj, ns: tuple[int, ...], _held: dict, stt: bool) -> list[P.CurvePoint]:
    return P.prune_curve(_tok, _order_obj, ns, _held, stt=stt)


@st.cache_resource(show_spinner="Pruning…", max_entries=4)
def _pruned(key: str, _tok, _order_obj, n: int) -> P.PruneResult:
    return P.prune_by_order(_tok, _order_obj, n)


def _hash(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def tree_text(tok, node: dict) -> str:
    """An indented text rendering of a merge tree."""
    lines = []
    for n, depth in iter_tree(node):
        label = tok.readable(n["token"]) if n.get("token") is not None else "?"
        rank = f"  (merge #{n['rank']})" if n.get("rank") is not None else ""
        lines.append("    " * depth + f"{label!r} [{n.get('id')}]" + rank)
    return "\n".join(lines)


def page() -> None:
    """The whole page."""
    st.title("Prune a tokenizer without breaking it")
    st.caption(
        "Paper 000 §3.2: leaf-based orders only remove tokens that no surviving merge needs, so pruning never "
        "creates unreachable tokens; naive orders (by id, by frequency) can. One order is computed once; any N "
        "prunes its first N tokens. Curves: bytes/token on held-out FLORES lines and STT-unreachable tokens."
    )
    tok = state.pick_tokenizer("Tokenizer", key="prune-tok")
    try:
        P.check_prunable(tok)
    except AnalysisError as e:
        state.show_error(e)
        return

    c1, c2 = st.columns([1, 2])
    method = c1.selectbox(
        "Pruning order", UI_ORDERS, index=UI_ORDERS.index("leaf-frequency"), key="prune-order",
        format_func=lambda m: UI_LABELS.get(m) or f"{m} — {P.ORDER_DESCRIPTIONS[m]}",
    )  # fmt: skip
    scores, scores_key = None, None
    if method == "score":
        model = state.pick_model("prune-ut", "Model whose embeddings score the tokens")
        if not model:
            st.info("Choose the model that goes with this tokenizer: its embeddings rank the tokens.")
            return
        try:
            from analysis.weights import resolve_model

            fp = resolve_model(model).fingerprint()
            scores, ut_res = _undertrained(model, fp, tok.content_hash, tok)
        except AnalysisError as e:
            state.show_error(e)
            return
        scores_key = (fp, ut_res.main)
        for note in ut_res.notes:
            st.info(note)
        st.caption(
            f"Indicator **{ut_res.main}** from {ut_res.model_label} ({ut_res.n_tokens:,} tokens scored; lower = "
            "more under-trained). Only leaves of the merge graph are removed, so no surviving token becomes "
            "unreachable; ids without a score are pruned last."
        )
    langs_all = available_codes()
    default_langs = [c for c in ("est_Latn", "eng_Latn") if c in langs_all]
    langs = c2.multiselect(
        "Text mix: FLORES-200 languages (equal byte shares) — also the languages of the bytes/token curve",
        langs_all, default=default_langs, key="prune-langs",
    )  # fmt: skip
    c3, c4, c5 = st.columns(3)
    n_train = c3.number_input(
        "FLORES lines per language for frequencies (rest = held out)", 50, 1000, 800, 50, key="prune-ntrain"
    )
    uploads = c4.file_uploader(
        "Extra texts for the mix (.txt, .gz, .jsonl, .zip)", accept_multiple_files=True, key="prune-upload"
    )
    scripts = tuple(
        c5.multiselect(
            "Scripts to keep (script order)",
            SCRIPTS,
            default=["Latin"],
            key="prune-scripts",
            disabled=method != "script",
        )  # fmt: skip
    )

    parts, held = [], {}
    for lang in langs:
        lines = flores_lines(lang)
        parts.append(lines[: int(n_train)])
        held[lang] = lines[int(n_train) :] or lines[-50:]
    for up in uploads or []:
        try:
            parts.append([u for u in iter_bytes(up.name, up.getvalue()) if u.strip()])
        except AnalysisError as e:
            state.show_error(e)
            return
    needs_text = method in P.CORPUS_ORDERS
    try:
        texts = tuple(P.mix_texts(parts, by="bytes" if uploads else "lines")) if parts else None
    except AnalysisError as e:
        state.show_error(e)
        return
    if needs_text and not texts:
        st.warning(f"The {method} order needs a text mix: choose at least one language or upload a text.")
        return

    key = _hash(tok.content_hash, method, texts if needs_text else None, scripts, scores_key)
    try:
        order = _order(key, tok, method, texts if needs_text else None, scripts, scores)
    except AnalysisError as e:
        state.show_error(e)
        return
    if len(order) == 0:
        st.info("This order has nothing to prune for this tokenizer.")
        return
    st.markdown(
        f"**{tok.name}**: {tok.vocab_size:,} tokens; the **{method}** order can prune up to **{len(order):,}** "
        f"(protected: added/special tokens and the byte alphabet)."
    )

    # ------------------------------------------------------------------------------- curves
    with st.form("prune-curve-form"):
        d1, d2, d3 = st.columns(3)
        max_n = d1.number_input(
            "Largest N on the curve",
            1,
            len(order),
            min(len(order), max(1, tok.vocab_size // 2)),
            key="prune-maxn",
        )
        points = d2.slider("Points", 3, 30, 10, key="prune-points")
        stt = d3.checkbox("STT-unreachable count (1–4 s per point)", value=True, key="prune-stt")
        go_curve = st.form_submit_button("Compute curves", type="primary")
    if go_curve:
        st.session_state["prune-curve-on"] = True
    if st.session_state.get("prune-curve-on") and held:
        ns = tuple(P.curve_points(int(max_n), int(points)))
        bar = st.progress(0.0, text="Pruning and measuring…")
        try:
            pts = _curve(_hash(key, ns, sorted(held), int(n_train), stt), tok, order, ns, held, stt)
        except AnalysisError as e:
            bar.empty()
            state.show_error(e)
            return
        bar.empty()
        rows = [{"N pruned": p.n, "language": lang, "bytes/token": v, "vocab size": p.vocab_size}
                for p in pts for lang, v in p.bytes_per_token.items()]  # fmt: skip
        df = pd.DataFrame(rows)
        g1, g2 = st.columns(2)
        fig = px.line(df, x="N pruned", y="bytes/token", color="language", markers=True,
                      title="Bytes per token on held-out lines (↑ better)")  # fmt: skip
        g1.plotly_chart(fig, key="prune-bpt-chart")
        if stt:
            du = pd.DataFrame([{"N pruned": p.n, "unreachable": p.unreachable} for p in pts])
            fig2 = px.line(du, x="N pruned", y="unreachable", markers=True, title="STT-unreachable tokens")
            g2.plotly_chart(fig2, key="prune-stt-chart")
        with st.expander("Curve table"):
            st.dataframe(df.pivot_table(index="N pruned", columns="language", values="bytes/token"),
                         key="prune-curve-table")  # fmt: skip
    elif st.session_state.get("prune-curve-on"):
        st.info("Choose at least one FLORES language for the bytes/token curve.")

    # ------------------------------------------------------------------------------- N, next tokens
    st.subheader("Prune N tokens")
    n = st.number_input("N", 0, len(order), min(len(order), 1000), step=100, key="prune-n")
    nxt = list(order.ids[int(n) : int(n) + 25])
    if nxt:
        st.markdown("**Next tokens to be removed** (after these N):")
        table = pd.DataFrame(
            [
                {
                    "id": i,
                    "token": tok.readable(tok.id_to_token[i]),
                    "raw": tok.id_to_token[i],
                    "key": order.keys.get(i),
                }
                for i in nxt
            ]  # fmt: skip
        )
        st.dataframe(table, hide_index=True, key="prune-next-table")
        pick = st.selectbox(
            "Merge tree of", nxt, format_func=lambda i: f"{tok.readable(tok.id_to_token[i])!r} [{i}]",
            key="prune-tree-pick",
        )  # fmt: skip
        try:
            st.code(tree_text(tok, merge_tree(tok, tok.id_to_token[pick])), language=None)
        except AnalysisError as e:
            state.show_error(e)

    # ------------------------------------------------------------------------------- export
    st.subheader("Export")
    if int(n) == 0:
        st.info("Set N > 0 to export a pruned tokenizer.")
        return
    try:
        res = _pruned(_hash(key, int(n)), tok, order, int(n))
    except AnalysisError as e:
        state.show_error(e)
        return
    new = res.tokenizer
    m1, m2, m3 = st.columns(3)
    m1.metric("Vocabulary", f"{new.vocab_size:,}", delta=f"-{len(res.removed):,}")
    m2.metric("Merges", f"{len(new.merges):,}", delta=f"-{res.merges_removed:,}")
    if held:
        first = next(iter(held))
        m3.metric(f"bytes/token ({first})", f"{P.bytes_per_token(new, held[first]):.3f}",
                  delta=f"{P.bytes_per_token(new, held[first]) - P.bytes_per_token(tok, held[first]):+.3f}")  # fmt: skip
    from analysis.export import write_folder, zip_bytes

    report = {"tokenizer": tok.name, "order": method, "removed": len(res.removed), "vocab_size": new.vocab_size,
              "merges_removed": res.merges_removed, "id_map": {str(k): v for k, v in res.id_map.items()}}  # fmt: skip
    e1, e2, e3 = st.columns(3)
    e1.download_button(
        "Download tokenizer (.zip)", data=zip_bytes(new, report, report_name="prune_report.json"),
        file_name=f"{tok.name}-pruned{int(n)}.zip", mime="application/zip", key="prune-dl",
    )  # fmt: skip
    if e2.button("Add to library", key="prune-add"):
        name = state.add_to_library(
            new.with_source(name=f"{tok.name} -{int(n)} ({method})", source="edited:")
        )
        st.success(f"Added {name!r} to the library.")
    out_dir = e3.text_input("…or write a folder", key="prune-out", placeholder="/path/to/folder")
    model_src = st.text_input(
        "Model (folder, weight file or hub id) whose embeddings and LM head should follow — optional",
        key="prune-model",
    )
    init = st.radio("Init of new rows", ["fvt", "mean", "random"], horizontal=True, key="prune-init")
    if st.button(
        "Write folder" + (" with model" if model_src else ""), key="prune-write", disabled=not out_dir
    ):
        try:
            write_folder(new, out_dir, report, base_config=new.config, report_name="prune_report.json")
            if model_src:
                from analysis.embeddings import remap_model

                with st.spinner("Loading the model and remapping its embeddings…"):
                    rep = remap_model(model_src, tok, new, res.id_map, out_dir, init=init, report=report)
                st.success(
                    f"Wrote tokenizer and model ({rep.old_rows:,} → {rep.new_rows:,} rows) to {out_dir}."
                )
                st.session_state["prune-written"] = out_dir
            else:
                st.success(f"Wrote the tokenizer folder to {out_dir}.")
        except (AnalysisError, OSError) as e:
            state.show_error(e)
    written = st.session_state.get("prune-written")
    if written and Path(written).is_dir():
        files = [f for f in Path(written).rglob("*") if f.is_file()]
        total = sum(f.stat().st_size for f in files)
        if total <= MAX_ZIP_BYTES and st.button(
            f"Zip {written} for download ({total / 1e6:.0f} MB)", key="prune-zip"
        ):
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for f in files:
                    zf.write(f, f"{Path(written).name}/{f.relative_to(written)}")
            st.download_button("Download model + tokenizer (.zip)", buf.getvalue(), file_name=f"{Path(written).name}.zip",
                               mime="application/zip", key="prune-dl-model")  # fmt: skip


page()

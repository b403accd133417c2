"""Load & inspect: load a tokenizer from any source and look inside it (summary, vocabulary, pipeline)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis import AnalysisError, LoadedTokenizer
from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.tokenizer.converters import TIKTOKEN_PATTERNS
from analysis.tokenizer.defaults import DEFAULT_NAME, SAMPLE_TEXT
from analysis.tokenizer.document import describe_component
from analysis.tokenizer.vocab_table import vocab_table
from analysis.views.playground import pre_tokens
from analysis.views.runtime import switched_off_note
from analysis.views.vocab_views import (
    VOCAB_PAGE_ROWS,
    VOCAB_SORTS,
    filter_vocab,
    page_count,
    sort_vocab,
    vocab_page,
)
from ui import links
from ui.charts import interactive_toggle, show_svg
from ui.errors import try_step
from ui.export_check import export_check_section
from ui.library import (
    add_to_library,
    library,
    rename_in_library,
    shown_source,
    take_selection,
    upload_to_library,
)
from ui.loaders import example_tokenizers, load_hub_cached, load_path_cached
from ui.pickers import server_path_input
from ui.svg import bar_chart
from ui.tables import static_table

FLAGS = [
    "ignore_merges",
    "byte_fallback",
    "dropout",
    "continuing_subword_prefix",
    "end_of_word_suffix",
    "unk_token",
]
PIPELINE = [("Normalizer", "normalizer"), ("Pre-tokenizer", "pre_tokenizer"), ("Post-processor", "post_processor"),
            ("Decoder", "decoder")]  # fmt: skip


def _loaded(name: str) -> None:
    """Show the tokenizer just added and rerun."""
    st.session_state["inspect-pick"] = name
    st.rerun()


def load_examples() -> None:
    """One-click example tokenizers."""
    ex = example_tokenizers()
    if not ex:
        st.info("No example folders found (set TOKLAB_TOKENIZER_DIRS to folders of tokenizer folders).")
        return
    names = st.multiselect("Example tokenizers", list(ex), key="inspect-examples")
    if st.button("Load examples", key="inspect-load-examples", disabled=not names):
        toks = {n: try_step(load_path_cached, ex[n]) for n in names}  # one bad folder must not stop the rest
        loaded = [add_to_library(t.with_source(name=n)) for n, t in toks.items() if t is not None]
        if loaded and len(loaded) == len(names):
            _loaded(loaded[-1])
        elif loaded:  # the errors above stay visible until the next action
            st.session_state["inspect-pick"] = loaded[-1]


def load_path() -> None:
    """A folder or tokenizer file on the server (only when the operator allows server-side paths)."""
    path = server_path_input(
        "Folder or tokenizer.json path on the server", "inspect-path", placeholder="/models/llama/"
    )
    if path is not None and st.button("Load from path", key="inspect-load-path"):
        _loaded(add_to_library(load_path_cached(path)))


def load_hub() -> None:
    """A Hugging Face hub repository (tokenizer files only)."""
    c1, c2 = st.columns([3, 1])
    repo = c1.text_input("Hub id", key="inspect-hub", placeholder="meta-llama/Llama-3.1-8B")
    rev = c2.text_input("Revision", key="inspect-rev", placeholder="main")
    hf_token = st.text_input("Access token (gated or private repos)", type="password", key="inspect-token")
    st.caption("Only the tokenizer files are downloaded, never the weights.")
    if st.button("Load from hub", key="inspect-load-hub", disabled=not repo):
        with st.spinner(f"Fetching {repo}…"):
            tok = load_hub_cached(repo, rev or None, hf_token or None)
        _loaded(add_to_library(tok))


def load_upload() -> None:
    """An uploaded tokenizer file (kept in this session only)."""
    up = st.file_uploader(
        "tokenizer.json, a .zip of a tokenizer folder, a SentencePiece .model or a tiktoken ranks file",
        type=["json", "zip", "model", "tiktoken", "bpe", "txt"],
        key="inspect-upload",
        max_upload_size=paths.upload_widget_mb(),
    )
    c1, c2 = st.columns(2)
    pattern = c1.selectbox(
        "Split regex for tiktoken files", ["guess from size"] + list(TIKTOKEN_PATTERNS), key="inspect-tikpat"
    )
    label = c2.text_input("Name in the library", key="inspect-upload-name", max_chars=80,
                          placeholder="the file's name (a zip: the folder's)",
                          help="A tokenizer.json or spiece.model says nothing about whose it is: such an upload is "
                               "named with its model type and size unless you name it here (rename it later "
                               "under the picker below).")  # fmt: skip
    if up is not None and st.button("Add upload to library", key="inspect-add-upload"):
        with st.spinner(f"Converting {up.name}…"):
            name = upload_to_library(
                up.name, up.getvalue(), None if pattern == "guess from size" else pattern, name=label
            )
        _loaded(name)


def _rename(old: str, key: str) -> None:
    """The rename button's callback (runs before the page is drawn, so every picker shows the new name)."""
    try:
        rename_in_library(old, st.session_state.get(key, ""))
    except AnalysisError as e:
        st.session_state["inspect-rename-error"] = str(e)


def rename_box(name: str) -> None:
    """Rename the chosen library entry (not the embedded default)."""
    error = st.session_state.pop("inspect-rename-error", None)
    if error:
        st.error(error, icon=":material/error:")
    if name == DEFAULT_NAME:
        return
    with st.popover("Rename", icon=":material/edit:"):
        key = f"inspect-new-name-{name}"
        st.text_input("New name", value=name, key=key, max_chars=80)
        st.button("Rename", key="inspect-rename", on_click=_rename, args=(name, key))


def summary(tok: LoadedTokenizer) -> None:
    """Model, sizes, flags and the normalizer → pre-tokenizer → post-processor → decoder pipeline, and the
    summary as JSON (`LoadedTokenizer.inspect`, the document `python -m analysis inspect --json` prints)."""
    s = tok.inspect()
    c = st.columns(5)
    c[0].metric("Model", s.model_type)
    c[1].metric("Vocabulary (incl. added)", f"{s.vocab_size:,}")
    c[2].metric("Merges", f"{s.merges:,}")
    c[3].metric("Added tokens", f"{s.added_tokens:,}")
    c[4].metric("Encoding", s.flavour)
    left, right = st.columns(2)
    with left:
        st.markdown("**Flags**")
        flags = pd.DataFrame({"flag": FLAGS, "value": [str(getattr(s, k)) for k in FLAGS]})
        static_table(flags)
        st.caption(f"Source: `{shown_source(tok)}` · content hash `{s.content_hash}`")
        note = switched_off_note(tok)
        if note:
            st.info(note, icon=":material/content_cut:")
        st.download_button("Download the summary (JSON)", json_document(paths.public_document(s.to_json())), file_name="summary.json",
                           mime="application/json", key="inspect-summary-json")  # fmt: skip
    with right:
        st.markdown("**Pipeline**")
        for label, key in PIPELINE:
            st.markdown(f"*{label}:* " + (" → ".join(f"`{x}`" for x in getattr(s, key)) or "—"))
        specials = s.special_tokens
        more = f" … (+{len(specials) - 24})" if len(specials) > 24 else ""
        st.markdown(
            f"*Special tokens ({len(specials)}):* "
            + (", ".join(f"`{x}`" for x in specials[:24]) + more or "—")
        )


def vocabulary(name: str, tok: LoadedTokenizer) -> None:
    """The searchable vocabulary table, a page of rows at a time (a selected BPE row opens its merge tree), and
    the tokens per script."""
    st.subheader("Vocabulary")
    with st.spinner("Building the vocabulary table…"):
        df = vocab_table(tok)
    f1, f2, f3, f4 = st.columns([3, 2, 2, 1])
    query = f1.text_input("Search (readable or raw form; regex allowed)", key="inspect-q")
    scripts = f2.multiselect("Scripts", sorted(df["script"].unique()), key="inspect-scripts")
    order = f3.selectbox("Sort by", list(VOCAB_SORTS), key="inspect-sort")
    only_special = f4.checkbox("Added/special only", key="inspect-special")
    view = sort_vocab(filter_vocab(df, query, scripts, only_special), order)
    n_pages = page_count(len(view))
    if n_pages > 1:
        if st.session_state.get("inspect-page", 1) > n_pages:  # a narrower search than the page kept
            st.session_state["inspect-page"] = 1
        number = st.number_input(f"Page (of {n_pages:,})", 1, n_pages, key="inspect-page")
    else:
        number = 1
    shown, _ = vocab_page(view, number)
    first = (number - 1) * VOCAB_PAGE_ROWS
    st.caption(
        f"{len(view):,} of {len(df):,} tokens"
        + (f"; rows {first + 1:,}–{first + len(shown):,} shown" if n_pages > 1 else "")
    )
    picked = st.dataframe(shown, hide_index=True, width="stretch", height=420, on_select="rerun",
                          selection_mode="single-row", key="inspect-vocab")  # fmt: skip
    rows = picked.selection.rows if picked is not None else []
    if tok.model_type == "BPE" and rows and rows[0] < len(shown):
        row = shown.iloc[rows[0]]
        if st.button(f"Open the merge tree of {row['readable']!r} (id {row['id']})", key="inspect-open-tree"):
            links.open_merge_tree(name, int(row["id"]))
    elif tok.model_type == "BPE":
        st.caption("Select a row to open its merge tree.")
    by_script = (
        df.groupby("script", observed=True).size().sort_values(ascending=False).reset_index(name="tokens")
    )
    if interactive_toggle("inspect-plotly"):
        st.plotly_chart(
            px.bar(by_script, x="script", y="tokens", title="Vocabulary by script", log_y=True),
            width="stretch",
        )
    else:  # static first: no chart module to load (ui/charts.py)
        svg = bar_chart([str(s) for s in by_script["script"]], [("tokens", by_script["tokens"].tolist())], {},
                        title="Vocabulary by script", y_label="tokens", log_y=True)  # fmt: skip
        show_svg(svg, heading="Vocabulary by script")


def pipeline_demo(tok: LoadedTokenizer) -> None:
    """The normalizer and the pre-tokenizer applied to a sample text."""
    st.subheader("Normalizer and pre-tokenizer on a sample")
    sample = st.text_area("Sample text", SAMPLE_TEXT, key="inspect-sample", height=100)
    normalized, pieces = pre_tokens(tok, sample)
    st.markdown(f"**Normalizer** ({' → '.join(describe_component(tok.normalizer)) or 'none'}):")
    # monospace, as typed: st.code would load a 1.6 MB syntax highlighter into the first view for a plain string
    st.text(normalized)
    st.markdown(f"**Pre-tokens** ({len(pieces)}):")
    table = pd.DataFrame({"pre-token": [p for p, _ in pieces], "readable": [tok.readable(p) for p, _ in pieces],
                          "offsets": [f"{a}–{b}" for _, (a, b) in pieces]})  # fmt: skip
    static_table(table, height=400)


def page() -> None:
    """Load → pick → summary, vocabulary, pipeline."""
    st.title("Load & inspect")
    with st.expander("Load a tokenizer", expanded=len(library()) <= 1):
        tabs = st.tabs(["Examples", "Local folder or file", "Hugging Face hub", "Upload"])
        for tab, loader in zip(tabs, (load_examples, load_path, load_hub, load_upload)):
            with tab:  # a failed load shows its error here; the current tokenizer stays on the page
                try_step(loader)
    lib = library()
    names = list(lib)
    added = take_selection()
    if added:  # just added from the sidebar
        st.session_state["inspect-pick"] = added
    if st.session_state.get("inspect-pick") not in names:
        st.session_state["inspect-pick"] = names[-1]
    c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
    name = c1.selectbox("Tokenizer", names, key="inspect-pick")
    with c2:
        rename_box(name)
    tok = lib[name]
    summary(tok)
    vocabulary(name, tok)
    pipeline_demo(tok)
    export_check_section("inspect-check", None, tok)


page()

"""Load & inspect: load a tokenizer from any source and look inside it."""

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis.sources import TIKTOKEN_PATTERNS
from analysis.tokenizer import describe_component
from analysis.vocab_table import vocab_table
from ui import state

st.title("Load & inspect")

# ------------------------------------------------------------------------------------------ loading
with st.expander("Load a tokenizer", expanded=len(state.library()) <= 1):
    t_ex, t_path, t_hub, t_up = st.tabs(["Examples", "Local folder or file", "Hugging Face hub", "Upload"])
    with t_ex:
        ex = state.example_tokenizers()
        if not ex:
            st.info("No example folders found (set TOKLAB_TOKENIZER_DIRS to folders of tokenizer folders).")
        else:
            names = st.multiselect("Example tokenizers", list(ex), key="inspect-examples")
            if st.button("Load examples", key="inspect-load-examples", disabled=not names):
                for n in names:
                    tok = state.guarded(state.load_path_cached, ex[n])
                    if tok is not None:
                        state.add_to_library(tok.with_source(name=n))
                st.session_state["inspect-pick"] = names[-1]
                st.rerun()
    with t_path:
        path = st.text_input(
            "Folder or tokenizer.json path", key="inspect-path", placeholder="/models/llama/"
        )
        if st.button("Load from path", key="inspect-load-path", disabled=not path):
            tok = state.guarded(state.load_path_cached, path)
            if tok is not None:
                st.session_state["inspect-pick"] = state.add_to_library(tok)
                st.rerun()
    with t_hub:
        c1, c2 = st.columns([3, 1])
        repo = c1.text_input("Hub id", key="inspect-hub", placeholder="meta-llama/Llama-3.1-8B")
        rev = c2.text_input("Revision", key="inspect-rev", placeholder="main")
        hf_token = st.text_input(
            "Access token (gated or private repos)", type="password", key="inspect-token"
        )
        st.caption("Only the tokenizer files are downloaded, never the weights.")
        if st.button("Load from hub", key="inspect-load-hub", disabled=not repo):
            with st.spinner(f"Fetching {repo}…"):
                tok = state.guarded(state.load_hub_cached, repo, rev or None, hf_token or None)
            if tok is not None:
                st.session_state["inspect-pick"] = state.add_to_library(tok)
                st.rerun()
    with t_up:
        up = st.file_uploader(
            "tokenizer.json, a .zip of a tokenizer folder, a SentencePiece .model or a tiktoken ranks file",
            type=["json", "zip", "model", "tiktoken", "bpe", "txt"],
            key="inspect-upload",
        )
        pattern = st.selectbox(
            "Split regex for tiktoken files",
            ["guess from size"] + list(TIKTOKEN_PATTERNS),
            key="inspect-tikpat",
        )
        if up is not None and st.button("Add upload to library", key="inspect-add-upload"):
            with st.spinner(f"Converting {up.name}…"):
                name = state.upload_to_library(
                    up.name, up.getvalue(), None if pattern == "guess from size" else pattern
                )
            if name:
                st.session_state["inspect-pick"] = name
                st.rerun()

# ------------------------------------------------------------------------------------------ summary
lib = state.library()
names = list(lib)
if st.session_state.get("inspect-pick") not in names:
    st.session_state["inspect-pick"] = names[-1]
name = st.selectbox("Tokenizer", names, key="inspect-pick")
tok = lib[name]
s = tok.summary()

c = st.columns(5)
c[0].metric("Model", s["model_type"])
c[1].metric("Vocabulary (incl. added)", f"{s['vocab_size']:,}")
c[2].metric("Merges", f"{s['merges']:,}")
c[3].metric("Added tokens", f"{s['added_tokens']:,}")
c[4].metric("Encoding", s["flavour"])

left, right = st.columns(2)
with left:
    st.markdown("**Flags**")
    st.dataframe(
        pd.DataFrame(
            {
                "flag": [
                    "ignore_merges",
                    "byte_fallback",
                    "dropout",
                    "continuing_subword_prefix",
                    "end_of_word_suffix",
                    "unk_token",
                ],
                "value": [
                    str(s[k])
                    for k in (
                        "ignore_merges",
                        "byte_fallback",
                        "dropout",
                        "continuing_subword_prefix",
                        "end_of_word_suffix",
                        "unk_token",
                    )
                ],
            }
        ),
        hide_index=True,
        width="stretch",
    )
    st.caption(f"Source: `{tok.source}` · content hash `{tok.content_hash}`")
with right:
    st.markdown("**Pipeline**")
    for label, key in (
        ("Normalizer", "normalizer"),
        ("Pre-tokenizer", "pre_tokenizer"),
        ("Post-processor", "post_processor"),
        ("Decoder", "decoder"),
    ):
        st.markdown(f"*{label}:* " + (" → ".join(f"`{x}`" for x in s[key]) or "—"))
    specials = s["special_tokens"]
    shown = ", ".join(f"`{x}`" for x in specials[:24]) + (
        f" … (+{len(specials) - 24})" if len(specials) > 24 else ""
    )
    st.markdown(f"*Special tokens ({len(specials)}):* " + (shown or "—"))

# ------------------------------------------------------------------------------------------ vocabulary
st.subheader("Vocabulary")


@st.cache_data(show_spinner="Building the vocabulary table…", max_entries=8)
def _table(content_hash: str, _tok) -> pd.DataFrame:
    return vocab_table(_tok)


df = _table(tok.content_hash, tok)
f1, f2, f3 = st.columns([3, 2, 1])
query = f1.text_input("Search (readable or raw form; regex allowed)", key="inspect-q")
scripts = f2.multiselect("Scripts", sorted(df["script"].unique()), key="inspect-scripts")
only_special = f3.checkbox("Added/special only", key="inspect-special")
view = df
if query:
    try:
        mask = view["readable"].str.contains(query, regex=True, na=False) | view["token"].str.contains(
            query, regex=True, na=False
        )
    except Exception:  # invalid regex: fall back to a literal search
        mask = view["readable"].str.contains(query, regex=False) | view["token"].str.contains(
            query, regex=False
        )
    view = view[mask]
if scripts:
    view = view[view["script"].isin(scripts)]
if only_special:
    view = view[view["added"] | view["special"]]
st.caption(f"{len(view):,} of {len(df):,} tokens")
picked = st.dataframe(
    view,
    hide_index=True,
    width="stretch",
    height=420,
    on_select="rerun",
    selection_mode="single-row",
    key="inspect-vocab",
)
rows = picked.selection.rows if picked is not None else []
if rows and tok.model_type == "BPE":
    row = view.iloc[rows[0]]
    if st.button(f"Open the merge tree of {row['readable']!r} (id {row['id']})", key="inspect-open-tree"):
        state.open_merge_tree(name, int(row["id"]))
elif tok.model_type == "BPE":
    st.caption("Select a row to open its merge tree.")

by_script = df.groupby("script").size().sort_values(ascending=False).reset_index(name="tokens")
fig = px.bar(by_script, x="script", y="tokens", title="Vocabulary by script", log_y=True)
st.plotly_chart(fig, width="stretch")

# ------------------------------------------------------------------------------------------ pipeline demo
st.subheader("Normalizer and pre-tokenizer on a sample")
sample = st.text_area("Sample text", state.sample_text(), key="inspect-sample", height=100)
rust = tok.tokenizer
normalized = rust.normalizer.normalize_str(sample) if rust.normalizer is not None else sample
if rust.pre_tokenizer is not None:
    pieces = rust.pre_tokenizer.pre_tokenize_str(normalized)
else:
    pieces = [(normalized, (0, len(normalized)))]
st.markdown(f"**Normalizer** ({' → '.join(describe_component(tok.normalizer)) or 'none'}):")
st.code(normalized, language=None)
st.markdown(f"**Pre-tokens** ({len(pieces)}):")
st.dataframe(
    pd.DataFrame(
        {
            "pre-token": [p for p, _ in pieces],
            "readable": [tok.readable(p) for p, _ in pieces],
            "offsets": [f"{a}–{b}" for _, (a, b) in pieces],
        }
    ),
    hide_index=True,
    width="stretch",
)

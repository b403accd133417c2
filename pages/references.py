"""References: the papers Tokenizer Lab implements or measures with, from `analysis.core.references` (the README's
References section is built from the same list)."""

from __future__ import annotations

import streamlit as st

from analysis.core.references import REFERENCES, Reference, bibtex_all

#: Where each paper is used: reference key → (page file, page title).
USED_ON: dict[str, list[tuple[str, str]]] = {
    "continued-bpe": [
        ("pages/extend.py", "Extend"),
        ("pages/prune.py", "Prune"),
        ("pages/token_health.py", "Token health"),
        ("pages/merge_trees.py", "Merge trees"),
        ("pages/compression.py", "Compression"),
    ],
    "r-bpe": [("pages/reuse.py", "Token reuse (R-BPE)")],
    "extension-thesis": [("pages/extend.py", "Extend")],
    "sa-bpe": [
        ("pages/sabpe.py", "Source-attributed BPE"),
        ("pages/undertrained.py", "Under-trained tokens"),
        ("pages/prune.py", "Prune"),
    ],
    "dynamic-tokenization": [("pages/dynamic.py", "Dynamic tokenization")],
    "magikarp": [("pages/undertrained.py", "Under-trained tokens"), ("pages/prune.py", "Prune")],
    "fvt": [("pages/prune.py", "Prune"), ("pages/dynamic.py", "Dynamic tokenization")],
    "parity": [("pages/compression.py", "Compression"), ("pages/reuse.py", "Token reuse (R-BPE)")],
    "renyi": [("pages/compression.py", "Compression")],
    "continued-words": [("pages/compression.py", "Compression"), ("pages/reuse.py", "Token reuse (R-BPE)")],
    "parity-aware-bpe": [("pages/compression.py", "Compression")],
    "flores": [("pages/compression.py", "Compression"), ("pages/extend.py", "Extend")],
}


def entry(r: Reference) -> None:
    """One paper: full citation, link, what the app uses it for and the pages that do."""
    with st.container(border=True):
        st.markdown(f"**{r.title}**  \n{r.authors}  \n*{r.venue}*, {r.year}")
        st.markdown(f"**Used for:** {r.used_for}.")
        if r.url:
            st.markdown(f"[{r.url}]({r.url})")
        pages = USED_ON.get(r.key, [])
        if pages:
            cols = st.columns(len(pages))
            for col, (path, title) in zip(cols, pages):
                col.page_link(path, label=title, icon=":material/arrow_forward:")
        st.caption(f"In the app: {r.short}")


def page() -> None:
    """Every reference, then a BibTeX download."""
    st.title("References")
    st.markdown(
        "The methods in Tokenizer Lab are re-implemented from these papers (no code copied from their "
        "repositories). Pages cite them by authors and year; each entry says what the app takes from the paper "
        "and where."
    )
    for r in REFERENCES:
        entry(r)
    st.download_button(
        "Download BibTeX",
        bibtex_all().encode("utf-8"),
        "tokenizer-lab-references.bib",
        "application/x-bibtex",
        key="refs-bibtex",
    )


page()

"""Tokenizers as a job's input: a library zip stored in the workspace under a name made of the tokenizers' names
and identities (content hash and settings) — not of the zip's bytes, which also hold each tokenizer's source — so
that the same tokenizers make the same params (and so the same job) in every session of the workspace, also after a
reload restored the library."""

from __future__ import annotations

import hashlib

import streamlit as st

from analysis.tokenizer.export import library_zip
from analysis.tokenizer.tokenizer import LoadedTokenizer
from ui.workspace import current, store


def stored_tokenizers(toks: dict[str, LoadedTokenizer], what: str) -> str:
    """The artifact name of `toks` as a library zip in this workspace (stored once, zipped once per session)."""
    key = "\n".join(f"{n}\t{t.identity}" for n, t in toks.items())
    name = f"job-inputs/tokenizers-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:24]}.zip"
    made = st.session_state.setdefault("toklab-job-tokenizers", set())
    if name not in made:
        ws = current()
        if store().get(ws, "artifact", name) is None:
            store().put(ws, "artifact", name, {"what": what}, library_zip(toks))
        made.add(name)
    return name

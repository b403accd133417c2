"""Expanders whose content runs only when open.

Streamlit runs and sends a closed expander's content with the page, and a new browser loads the front-end code of
every widget in it before the page is drawn: the library's save/restore box in the sidebar (a file uploader) cost
every first view 0.08–0.17 s on two cores (Home 1.69 → 1.61 s and 1.86 → 1.69 s, Merge trees 1.77 → 1.68 s; with
Token health's corpus box as well, Token health 2.64 → 2.57 s; Dynamic tokenization's model box, 2.54 → 2.38 s;
medians of 7 visits in new browser profiles, one server, 2026-11-29). A lazy expander keeps its open state in
Session State under its key and reruns the page when the user opens or closes it, so a closed one sends only its
label.

Streamlit forgets the value of a widget that a run does not draw, so a closed box would forget what was typed
or picked inside it; the keys named in ``keep`` are saved again as plain Session State values on every run while
the box is closed (Streamlit's own way to keep a widget's state across runs that do not draw it), and the widgets
find them when the box opens again. File uploaders and buttons cannot be set that way and are not kept."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
from streamlit.delta_generator import DeltaGenerator


def lazy_expander(label: str, key: str, keep: Sequence[str] = ()) -> DeltaGenerator | None:
    """A closed expander, where the code runs, that draws nothing inside until the user opens it; returns the open
    expander to draw into, or None while it is closed (`st.session_state[key] = True` opens it). The values of
    the widgets keyed ``keep`` inside it survive while it is closed."""
    box = st.expander(label, key=key, on_change="rerun")
    if box.open:
        return box
    for k in keep:
        if k in st.session_state:
            st.session_state[k] = st.session_state[k]
    return None

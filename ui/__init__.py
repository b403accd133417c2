"""The Streamlit layer's shared parts; the pages live in pages/, the work in analysis/.

Modules: `errors` (the error boundary app.py runs every page in), `library` (this session's tokenizers and the
sidebar), `loaders` (shared cached loads), `pickers` (tokenizer and model pickers that know what a page needs),
`links` (URLs between pages, the allow-listed `?t=` reader), `caching` (cache wrappers keyed by content),
`spans` (token spans), `trees` (merge-tree chart and text), `progress` (the engine's progress protocol as a bar),
`warmup` (the embedded default's whole-vocabulary analyses, computed in the background as the server starts).

Importing this package also leaves Streamlit's legacy "pages/ folder" mode — the one workaround for keeping the
folder named `pages/` (see `_leave_legacy_pages_mode`).
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def _leave_legacy_pages_mode() -> None:
    """Make a fresh server's first deep link run inside the app.py frame.

    Streamlit 1.67 has no public switch for this (`client.showSidebarNavigation` only hides the menu, and
    `st.navigation` turns the mode off only once it has run). A server whose entry script has a `pages/` sibling
    starts with the class attribute `PagesManager.uses_pages_directory = True`; until `st.navigation` first runs,
    a request for `/playground` executes `pages/playground.py` on its own (no frame, no sidebar library, no error
    boundary). Every page imports `ui`, so the first such run lands here: we clear the flag, as `st.navigation`
    itself does, and rerun; the rerun goes through app.py, whose page URL equals the file name (a test checks
    that), so the user stays on the page they asked for. Once cleared, the flag stays cleared for the process.

    tests/app/test_app_pages.py fails loudly if a Streamlit upgrade removes the attribute or changes this hand-over.
    """
    if getattr(PagesManager, "uses_pages_directory", None):
        PagesManager.uses_pages_directory = False
        st.rerun()


_leave_legacy_pages_mode()

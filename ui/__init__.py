"""Shared Streamlit helpers for the pages (session library, rendering).

Importing this package also keeps Streamlit from falling back to its legacy "pages/ folder" mode: on a fresh
server, a first request for a deep link such as `/playground` would otherwise run the page file without the
`app.py` frame (Streamlit flags any app with a `pages/` folder as legacy until `st.navigation` first runs).
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

if PagesManager.uses_pages_directory:
    PagesManager.uses_pages_directory = False
    st.rerun()

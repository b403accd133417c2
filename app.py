"""Tokenizer Lab: the router and frame. Pages live in pages/, the work in analysis/."""

import streamlit as st

from ui import state

st.set_page_config(page_title="Tokenizer Lab", page_icon=":material/biotech:", layout="wide")

PAGES = [
    st.Page(
        "pages/inspect.py", title="Load & inspect", icon=":material/search:", url_path="inspect", default=True
    ),
    st.Page("pages/playground.py", title="Playground", icon=":material/compare:", url_path="playground"),
    st.Page("pages/compression.py", title="Compression", icon=":material/compress:", url_path="compression"),
    st.Page("pages/extend.py", title="Extend", icon=":material/add_circle:", url_path="extend"),
    st.Page("pages/merge_trees.py", title="Merge trees", icon=":material/account_tree:", url_path="merge-trees"),
    st.Page("pages/token_health.py", title="Token health", icon=":material/health_and_safety:", url_path="token-health"),
    st.Page("pages/undertrained.py", title="Under-trained tokens", icon=":material/set_meal:", url_path="undertrained"),
    st.Page("pages/prune.py", title="Prune", icon=":material/content_cut:", url_path="prune"),
]

nav = st.navigation(PAGES)
library_box = st.sidebar.container()  # filled after the page ran, so it shows what the page loaded
nav.run()
with library_box:
    state.sidebar_library()

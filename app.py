"""Tokenizer Lab: the router and frame. Pages live in pages/, shared widgets in ui/, the work in analysis/.

The page groups sit in the top bar, so that the sidebar holds the tokenizer library alone and the library is
reachable without scrolling on a small screen. Every page runs inside the one error boundary
(`ui.errors.boundary`); the sidebar library is drawn after the page, also when the page failed or returned early,
so it shows what the page loaded. Each tab works in a workspace (`ui.workspace`): opened from `?ws=` before the
page, its inputs written after it.
"""

import streamlit as st

from ui import errors, links, privacy, workspace
from ui.gallery import start_build
from ui.library import sidebar_library
from ui.reconnect import reconnect_note
from ui.sessions import start_reaper
from ui.workspace_panel import workspace_panel

privacy.install()  # download links only their session knows (once per process)
start_reaper()  # closed tabs give their memory back (once per process; ui/sessions.py)

st.set_page_config(page_title="Tokenizer Lab", page_icon=":material/biotech:", layout="wide")


def _page(path: str, title: str, icon: str, url: str, **kw) -> st.Page:
    return st.Page(path, title=title, icon=f":material/{icon}:", url_path=url, **kw)


#: The page groups: what each one answers is on the home page (`pages/home.py`, GROUPS).
PAGES = {
    "": [
        _page("pages/home.py", "Home", "home", "", default=True),
        # Home also at /home (the default page's own address is /): a typed or bookmarked /home found nothing
        _page("pages/home.py", "Home", "home", "home", visibility="hidden"),
        _page("pages/gallery.py", "Example gallery", "photo_library", "gallery"),
        _page("pages/references.py", "References", "menu_book", "references"),
    ],
    "Look inside": [
        _page("pages/inspect.py", "Load & inspect", "search", "inspect"),
        _page("pages/playground.py", "Playground", "compare", "playground"),
        _page("pages/merge_trees.py", "Merge trees", "account_tree", "merge_trees"),
        _page("pages/vocab_diff.py", "Vocabulary diff", "join_inner", "vocab_diff"),
        _page("pages/drift.py", "Drift", "difference", "drift"),
        _page("pages/chat_template.py", "Chat template", "forum", "chat_template"),
    ],
    "Diagnose": [
        _page("pages/token_health.py", "Token health", "health_and_safety", "token_health"),
        _page("pages/undertrained.py", "Under-trained tokens", "set_meal", "undertrained"),
    ],
    "Measure": [
        _page("pages/compression.py", "Compression", "compress", "compression"),
    ],
    "Change": [
        _page("pages/extend.py", "Extend", "add_circle", "extend"),
        _page("pages/prune.py", "Prune", "content_cut", "prune"),
        _page("pages/reuse.py", "Token reuse (R-BPE)", "recycling", "reuse"),
        _page("pages/dynamic.py", "Dynamic tokenization", "bolt", "dynamic"),
        _page("pages/sabpe.py", "Source-attributed BPE", "source", "sabpe"),
        _page("pages/transplant.py", "Transplant", "swap_horiz", "transplant"),
    ],
}

#: Streamlit leaves about 6rem above a page's first element; with the page groups in the top bar (3.75rem high), 4.25rem is enough,
#: so that at 1280×800 a page's results start above the fold (a style-only st.html takes no space).
TIGHT_TOP = "<style>.stMainBlockContainer{padding-top:4.25rem !important}</style>"

nav = st.navigation(PAGES, position="top")
st.html(TIGHT_TOP)
start_build()  # once per server: the example gallery's missing entries, computed in the background
links.enter(nav.url_path)
workspace.enter()  # this tab's workspace: opened from ?ws= on the session's first run, kept in the URL
library_box = st.sidebar.container()
try:
    with errors.boundary():
        nav.run()
finally:  # pages never call st.stop(): it would drop everything after it, this library included
    with library_box, errors.boundary():
        sidebar_library()
        workspace_panel()
        workspace.save_inputs()
    with st.sidebar:
        reconnect_note()  # Streamlit's connection-error dialog in this app's words (ui/reconnect.py)

"""Links between pages go through the URL: `st.switch_page(page, query_params=…)` or a link column, never another
page's session-state keys. A page reads its query parameters when it is opened (a link, the menu, a new
session), not on its own reruns, through an allow-list: `?t=` names a tokenizer only as a shareable source
(`example:NAME`, `hub:owner/name[@rev]`, `embedded:`) or as a tokenizer already in this session's library —
never an arbitrary local path.
"""

from __future__ import annotations

from urllib.parse import quote

import pandas as pd
import streamlit as st

from analysis import AnalysisError
from analysis.core.paths import public_text
from ui.library import MARKDOWN_SPECIAL, ensure_from_source, library, source_of

#: Tokenizer sources a link may name (never arbitrary local paths).
URL_SOURCES = ("example:", "hub:", "embedded:")
MERGE_TREES = "pages/merge_trees.py"
_PAGE_KEY = "toklab-page"
_OPENED_KEY = "toklab-opened"


def enter(url_path: str) -> None:
    """Called by app.py before a page runs: remember whether this run opens the page."""
    st.session_state[_OPENED_KEY] = st.session_state.get(_PAGE_KEY) != url_path
    st.session_state[_PAGE_KEY] = url_path


def current_page() -> str:
    """The URL path of the page this run shows ("" before app.py has called :func:`enter`)."""
    return str(st.session_state.get(_PAGE_KEY) or "")


def opened() -> bool:
    """True on the run that opens a page (follow its link parameters), False on the page's own reruns."""
    return bool(st.session_state.get(_OPENED_KEY, True))


def name_from_link(value: str) -> str | None:
    """The library name for a `?t=` value: a shareable source (loaded if needed) or an already loaded name."""
    if value.startswith(URL_SOURCES):
        try:
            return ensure_from_source(value)
        except AnalysisError as e:
            st.warning(public_text(f"Could not restore {value!r} from the link: {e}"))
            return None
    if value in library():
        return value
    st.warning(
        f"The link names {_plain(repr(value[:80]))}, a tokenizer that lived only in the browser session that made the link "
        "(an upload or an edited tokenizer): this session does not have it, so it is left out. Upload it again "
        "on *Load & inspect*, or restore a saved library from the sidebar, and open the link again.",
        icon=":material/link_off:",
    )
    return None


def _plain(text: str) -> str:
    """Text from a URL shown in Markdown as written (its Markdown characters backslash-escaped: no link, no
    emphasis)."""
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in text)


def tokenizer_ref(name: str) -> str:
    """What a link carries for a library tokenizer: its shareable source, else its name (same session only)."""
    return source_of(name) or name


def open_merge_tree(name: str, token_id: int) -> None:
    """Switch to the Merge trees page on one token of a library tokenizer."""
    st.switch_page(MERGE_TREES, query_params={"t": tokenizer_ref(name), "token": f"#{token_id}"})


def merge_tree_links(name: str, tokens: pd.Series) -> pd.Series | None:
    """Links to the Merge trees page, one per raw token in `tokens` of library tokenizer `name`; None when `name` has
    no source a link may name (an upload, an edit, a server path): a link opens a new browser session, which would
    not hold it — and would show the token in another tokenizer. The pages' buttons (:func:`open_merge_tree`) keep
    the session."""
    src = source_of(name)
    if src is None or not src.startswith(URL_SOURCES):
        return None
    return f"./merge_trees?t={quote(src, safe='')}&token=" + tokens.map(lambda s: quote(s, safe=""))

"""Texts too long for a URL, kept on the server for a share link the user asked for.

A share link carries a random id (:meth:`analysis.core.workspace.WorkspaceStore.share`), never a hash of the text:
the id says nothing about the text, and nobody can test whether a given text was shared. The text belongs to the
workspace that shared it (charged to its quota) and goes when that workspace is deleted or expires. Nothing is
stored unless a share link is asked for: the Playground keeps a long text in its own workspace only.
"""

from __future__ import annotations

import shutil

from analysis.core.cache import store_dir
from analysis.core.workspace import default_store
from analysis.errors import DataError

#: The longest text a link carries in the URL itself; longer texts travel as a share id.
URL_TEXT_MAX = 2000
#: The longest text kept on the server for a link (the Playground's own limit).
STORE_TEXT_MAX = 1_000_000
#: Where earlier versions kept every long Playground text under its hash, asked for or not (removed at start).
LEGACY_NAMESPACE = "shared-texts"


def share_text(ws_id: str, text: str) -> str:
    """Keep `text` for a share link made by workspace `ws_id`; the link's random id (DataError when the text is
    too long, the workspace is gone or full)."""
    if len(text) > STORE_TEXT_MAX:
        raise DataError(
            f"the text has {len(text):,} characters: a share link holds at most {STORE_TEXT_MAX:,}"
        )
    return default_store().share(ws_id, text.encode("utf-8", "surrogatepass"))


def load_text(share_id: str) -> str | None:
    """The text of a share link, or None (a malformed or unknown id, or its workspace is gone)."""
    data = default_store().read_share(share_id or "")
    return data.decode("utf-8", "surrogatepass") if data is not None else None


def remove_legacy_texts() -> bool:
    """Remove the texts earlier versions kept in the disk cache under a hash of the text (every Playground text
    over 2,000 characters, whether or not a link was asked for); whether there were any."""
    folder = store_dir() / LEGACY_NAMESPACE
    if not folder.is_dir() or folder.is_symlink():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True

"""Texts too long for a URL, kept on the server under a short content key so a shared link can carry the key.

The key is the first 16 hex digits of the text's SHA-256: the same text always gets the same key, and a key
reveals nothing but itself. Texts live in the size-capped disk store (`analysis.core.cache.DiskCache`), so they
survive a server restart until the cap evicts them.
"""

from __future__ import annotations

import hashlib
import re

from analysis.core.cache import DiskCache

#: The longest text a link carries in the URL itself; longer texts travel as a key.
URL_TEXT_MAX = 2000
#: The longest text kept on the server for a link (the Playground's own limit).
STORE_TEXT_MAX = 1_000_000
_STORE = DiskCache("shared-texts", 1)
_KEY = re.compile(r"[0-9a-f]{16}")


def text_key(text: str) -> str:
    """The short content key of a text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def store_text(text: str) -> str | None:
    """Keep `text` on the server; its key, or None when it is too long or the store cannot be written."""
    if len(text) > STORE_TEXT_MAX:
        return None
    key = text_key(text)
    return key if _STORE.put(key, text) else None


def load_text(key: str) -> str | None:
    """The text stored under `key`, or None (a malformed key, or a text no longer on this server)."""
    if not _KEY.fullmatch(key or ""):
        return None
    text = _STORE.get(key)
    return text if isinstance(text, str) and text_key(text) == key else None

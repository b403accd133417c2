"""Download links that only their session can know.

Streamlit serves every download button's bytes at `/media/<id>` to whoever asks, without a session, and names them
by a hash of their content: anyone who can guess a file (a report of a known tokenizer, a typed text) could test
whether it is on the server, and a link copied from one browser fetches the file in another. :func:`install` keys
the ids with a random secret of this server process and the id of the session that made the file (an HMAC), so an
id is unguessable, says nothing about the content, and differs between sessions holding the same bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable

from streamlit.runtime import memory_media_file_storage
from streamlit.runtime.scriptrunner import get_script_run_ctx

#: The secret of this server process (a restart makes new ids; Streamlit's media files do not survive it anyway).
_SECRET = secrets.token_bytes(32)
_MARK = "_toklab_private"


def private_file_id(content_id: Callable[..., str]) -> Callable[..., str]:
    """Wrap Streamlit's content-hash file id into a keyed one (same length: 32 hex digits)."""

    def file_id(data: bytes, mimetype: str, filename: str | None = None) -> str:
        ctx = get_script_run_ctx(suppress_warning=True)
        session = ctx.session_id if ctx is not None else ""
        msg = session.encode() + b"\0" + content_id(data, mimetype, filename).encode()
        return hmac.new(_SECRET, msg, hashlib.sha256).hexdigest()[:32]

    setattr(file_id, _MARK, True)
    return file_id


def install() -> None:
    """Make Streamlit's media file ids private (once per process; later calls do nothing)."""
    current = memory_media_file_storage._calculate_file_id
    if not getattr(current, _MARK, False):
        memory_media_file_storage._calculate_file_id = private_file_id(current)

"""Download links for workspace files: a token that names one item of one workspace until a given time, signed
with a secret of the data folder, so the server's file route (`ui/file_route.py`) can stream the file from disk
without a session.

A token is ``<payload>.<signature>``: the payload is the URL-safe base64 of a small JSON list ``[workspace key, kind,
name, expiry]`` and the signature the HMAC-SHA256 of the payload under :func:`secret` (32 random bytes kept in
``<data>/download-secret``, mode 0600, created once). The workspace *key* is the SHA-256 of its id (what the store
keeps), never the id itself, so a link does not open the workspace; only a session that holds the id can mint a
link (:func:`make_token`), and a link stops working at its expiry, when the item is removed, or when the secret
file is deleted (every link at once). :func:`check_token` answers None for any token it does not accept — malformed,
forged, expired — without saying which.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import time
from pathlib import Path

from analysis.core import paths

#: The file under the data folder that holds the signing secret.
SECRET_NAME = "download-secret"
#: Bytes of the signing secret.
SECRET_BYTES = 32
#: Expiries are rounded up to a multiple of this (seconds), so a page that redraws keeps the same link for a while.
ROUND_S = 600
#: Longest token accepted (characters): item names are at most 300 characters.
MAX_TOKEN_CHARS = 2048
_TOKEN = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


def link_hours() -> float:
    """How long a download link works (``$TOKLAB_DOWNLOAD_LINK_HOURS``, default 12 hours; at least 10 minutes)."""
    try:
        hours = float(os.environ.get("TOKLAB_DOWNLOAD_LINK_HOURS", "") or 12)
    except ValueError:
        hours = 12.0
    return hours if math.isfinite(hours) and hours > 0 else 12.0


def secret(root: str | os.PathLike | None = None) -> bytes:
    """The signing secret of data folder `root` (default :func:`analysis.core.paths.data_dir`): read, or created
    once (written to a private temporary file, then linked into place, so two processes starting together agree on
    one secret and none reads a half-written one)."""
    folder = Path(root) if root is not None else paths.data_dir()
    target = folder / SECRET_NAME
    try:
        data = target.read_bytes()
        if len(data) == SECRET_BYTES:
            return data
    except FileNotFoundError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{SECRET_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(SECRET_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:  # another process made it first (or a damaged one is there: replace that)
            if len(target.read_bytes()) != SECRET_BYTES:
                os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target.read_bytes()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest())


def make_token(
    ws_id: str, kind: str, name: str, *, root: str | os.PathLike | None = None, hours: float | None = None,
    now: float | None = None,
) -> str:  # fmt: skip
    """A download token for item (`kind`, `name`) of workspace `ws_id`, valid for `hours` (default
    :func:`link_hours`) from `now`, its expiry rounded up to :data:`ROUND_S`."""
    ws_key = hashlib.sha256(ws_id.encode("ascii")).hexdigest()
    t = time.time() if now is None else now
    expiry = int(math.ceil((t + 3600 * (link_hours() if hours is None else hours)) / ROUND_S) * ROUND_S)
    payload = _b64(json.dumps([ws_key, kind, name, expiry], separators=(",", ":")).encode("utf-8"))
    return f"{payload}.{_sign(secret(root), payload)}"


def check_token(
    token: str, *, root: str | os.PathLike | None = None, now: float | None = None
) -> tuple[str, str, str] | None:
    """The (workspace key, kind, name) a token names, or None when it is malformed, forged or expired."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not _TOKEN.fullmatch(token):
        return None
    payload, signature = token.split(".")
    if not hmac.compare_digest(_sign(secret(root), payload), signature):
        return None
    try:
        ws_key, kind, name, expiry = json.loads(_unb64(payload))
    except (ValueError, TypeError, binascii.Error):
        return None
    if not (
        isinstance(ws_key, str)
        and isinstance(kind, str)
        and isinstance(name, str)
        and isinstance(expiry, int)
    ):
        return None
    if expiry <= (time.time() if now is None else now):
        return None
    return ws_key, kind, name

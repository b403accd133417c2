"""The server's file route: ``GET /toklab/file/<token>`` streams one workspace file from disk (Starlette's
`FileResponse`, 64 KiB at a time, so a model of several hundred MB never sits in the server's memory).

The token (:mod:`analysis.core.download_links`) names a workspace key, an item kind and name, and an expiry, signed
with the data folder's secret; :func:`routes` is what `toklab_server.py` gives Streamlit's `st.App` as its extra
routes. Every refusal — no token, a forged, altered or expired one, an item removed since, an item of another
workspace — is the same bare 404.
"""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath

from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from streamlit import config

from analysis.core.download_links import check_token
from analysis.core.workspace import default_store

#: The path every download link starts with (outside Streamlit's reserved `/_stcore/`, `/media/`, … prefixes),
#: after the server's `server.baseUrlPath` when one is set (:func:`prefix`).
PREFIX = "/toklab/file/"
#: Sent with every answer of the route: never cached by a shared cache, never sniffed, no referrer leaves.
HEADERS = {
    "Cache-Control": "private, no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def prefix() -> str:
    """The route's path prefix on this server: :data:`PREFIX` under `server.baseUrlPath`."""
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}{PREFIX}" if base else PREFIX


def not_found() -> Response:
    """The one answer to anything the route will not serve."""
    return PlainTextResponse("Not found", status_code=404, headers=HEADERS)


def download_name(name: str) -> str:
    """The file name a browser saves an item as: the last part of its name."""
    return PurePosixPath(name.replace("\\", "/")).name or "download"


async def no_token(_request: Request) -> Response:
    """The route without a token."""
    return not_found()


async def serve_file(request: Request) -> Response:
    """Stream the file a valid token names, as an attachment under its item's name; 404 otherwise."""
    named = check_token(request.path_params.get("token", ""))
    if named is None:
        return not_found()
    found = default_store().file_by_key(*named)
    if found is None:
        return not_found()
    path, item = found
    filename = download_name(item.name)
    media = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    # "identity": Streamlit's gzip middleware passes the file through as it is (a model zip or a GGUF does not
    # compress, and gzip would spend the server's CPU on every byte)
    headers = {**HEADERS, "Content-Encoding": "identity"}
    return FileResponse(path, media_type=media, filename=filename, headers=headers)


def routes() -> list[BaseRoute]:
    """The extra routes the app's server serves (`toklab_server.py`)."""
    return [
        Route(prefix() + "{token}", serve_file, methods=["GET", "HEAD"]),
        Route(
            prefix(), no_token, methods=["GET", "HEAD"]
        ),  # not the app's page, which the server serves else
        Route(prefix().rstrip("/"), no_token, methods=["GET", "HEAD"]),
    ]

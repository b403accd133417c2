"""Download links (`analysis.core.download_links`): a token names one item of one workspace until its expiry and
nothing else; forged, altered, expired or malformed tokens are refused alike; the signing secret is private and
made once per data folder."""

from __future__ import annotations

import stat
import time

from analysis.core import download_links as dl
from analysis.core.workspace import _key, new_id


def test_a_token_names_its_workspace_item_until_it_expires(tmp_path):
    ws = new_id()
    tok = dl.make_token(ws, "artifact", "model.zip", root=tmp_path, hours=1)
    assert ws not in tok  # the link carries the workspace's key, never its id
    assert dl.check_token(tok, root=tmp_path) == (_key(ws), "artifact", "model.zip")
    assert dl.check_token(tok, root=tmp_path, now=time.time() + 2 * 3600) is None  # expired


def test_forged_altered_and_malformed_tokens_are_refused(tmp_path):
    ws, other = new_id(), new_id()
    tok = dl.make_token(ws, "artifact", "model.zip", root=tmp_path)
    payload, signature = tok.split(".")
    theirs = dl.make_token(other, "artifact", "model.zip", root=tmp_path).split(".")[0]
    for bad in (
        "",
        "abc",
        f"{theirs}.{signature}",  # another workspace's payload under this signature
        f"{payload}.{signature[:-2]}AA",
        f"{payload}x.{signature}",
        f"{payload}.{signature}.x",
        "é." + signature,
        "a" * 5000 + "." + signature,
    ):
        assert dl.check_token(bad, root=tmp_path) is None, bad
    assert dl.check_token(tok, root=tmp_path / "elsewhere") is None  # another data folder's secret


def test_the_secret_is_private_and_made_once(tmp_path):
    first = dl.secret(tmp_path)
    assert len(first) == dl.SECRET_BYTES and dl.secret(tmp_path) == first
    assert stat.S_IMODE((tmp_path / dl.SECRET_NAME).stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [dl.SECRET_NAME]  # no temporary file left


def test_a_page_that_redraws_keeps_the_same_link_for_a_while(tmp_path):
    ws, t = new_id(), 1_800_000_100.0
    assert dl.make_token(ws, "artifact", "a", root=tmp_path, now=t) == dl.make_token(
        ws, "artifact", "a", root=tmp_path, now=t + 1
    )

"""bench/_st_protocol.py, the benchmarks' protocol-level user, against the browser tests' server: a new session, a
page switch, a typed Playground text drawn, and the light journey of `bench_users.py` without an error (an error
on the page or a wait that runs out is a counted error, never a silent pass)."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import bench_users  # noqa: E402
from _st_protocol import ProtocolError, ProtocolUser  # noqa: E402


def _run(coro):
    """`asyncio.run(coro)` on a thread of its own (Playwright's sync API holds this thread's event loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=600)


def test_a_protocol_user_opens_switches_and_types(app_url):
    async def go() -> tuple[str, bool]:
        u = ProtocolUser(app_url, timeout_s=120)
        try:
            await u.open()
            assert u.query.startswith("ws=") and "playground" in u.pages  # its own workspace, the page list
            await u.switch("playground")
            seen = await u.set_text("pg-text", "Protocolword7q tere", marker="Protocolword7q")
            with pytest.raises(ProtocolError, match="did not draw"):
                await u.set_text("pg-text", "something else", marker="Protocolword7q")
            with pytest.raises(ProtocolError, match="no widget"):
                await u.set_text("no-such-key", "x")
            return u.query, seen.has("tere")
        finally:
            await u.close()

    query, drawn = _run(go())
    assert drawn


def test_the_benchs_light_journey_runs_without_an_error(app_url):
    tally = bench_users.Tally()

    async def go() -> bool:
        u = bench_users.ProtoUser("p0", app_url, 120)
        try:
            return await bench_users.run_proto_steps(u, bench_users.proto_light_journey(2), tally)
        finally:
            await u.close()

    assert _run(go()), tally.errors
    rows = {r["step"]: r["n"] for r in tally.rows()}
    assert rows == {"proto:home": 1, "proto:playground_switch": 2, "proto:playground_redraw": 2,
                    "proto:inspect_switch": 1, "proto:compression_switch": 1}  # fmt: skip
    assert len(tally.light()) == 7 and not tally.errors

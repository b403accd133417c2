"""The STT report in the disk store: read back by a later process it is the report the test computes (rows,
pieces, counts, the reachability mask under it), without running the test; a malformed file is computed again."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import load_shared

from analysis.bpe import stt
from analysis.core.cache import clear_memory


def _recomputed(*args, **kwargs):
    raise AssertionError("recomputed although the disk store holds the report")


def _rows(rep: stt.STTReport) -> list[tuple]:
    return [(r.id, r.token, r.readable, r.category, r.pieces, r.script) for r in rep.rows]


def test_stored_stt_report_equals_the_computed_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    clear_memory()
    tok = load_shared("llama-2")
    seen: list[float] = []
    computed = stt.stt_report(tok, progress=lambda done, total, msg="": seen.append(done / total))
    assert seen and seen == sorted(seen) and seen[-1] <= 1.0
    mask, pieces = bytes(stt.stt_result(tok).mask), dict(stt.stt_result(tok).pieces)

    clear_memory()
    with monkeypatch.context() as m:
        m.setattr(stt, "_run_stt", _recomputed)
        m.setattr(stt, "_categorise", _recomputed)
        stored = stt.stt_report(tok)
        assert _rows(stored) == _rows(computed)
        assert stored.summary() == computed.summary()
        assert bytes(stt.stt_result(tok).mask) == mask and stt.stt_result(tok).pieces == pieces

    (tmp_path / "store" / "stt-report" / f"{tok.content_hash}.json").write_text(
        '{"version": "1", "data": {"mask": "!!", "ids": []}}'
    )
    clear_memory()
    assert _rows(stt.stt_report(tok)) == _rows(computed)

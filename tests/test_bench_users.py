"""bench/bench_users.py's statistics and printing (the browser journey itself is the bench's own run: a journey of
one user takes minutes on two cores, far over a test's budget): percentiles, the per-step table with its ratios to
the baseline, errors grouped by message, and the targets judged only at the size they name."""

from __future__ import annotations

import argparse
import sys

import pytest
from support import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import bench_users  # noqa: E402


def test_percentiles_interpolate_between_ranks():
    assert bench_users.percentile([], 50) is None
    assert bench_users.percentile([4.0], 95) == 4.0
    assert bench_users.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert bench_users.percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert bench_users.percentile(list(map(float, range(1, 21))), 95) == pytest.approx(19.05)
    assert bench_users.ratio(3.0, 1.5) == 2.0 and bench_users.ratio(1.0, 0) is None
    assert bench_users.ratio(None, 1.0) is None


def test_tally_rows_errors_and_light_steps():
    t = bench_users.Tally()
    for x in (1.0, 2.0, 3.0):
        t.add("home", x)
    t.add("inspect_switch", 5.0)
    t.add("compression", 40.0)
    t.error("upload", "u1", "TimeoutError: waited\n  for the   button")
    t.error("upload", "u2", "TimeoutError: waited for the button")
    t.skip(["compression", "inspect"])
    rows = {r["step"]: r for r in t.rows()}
    assert rows["home"] == {"step": "home", "n": 3, "p50_s": 2.0, "p95_s": 2.9, "max_s": 3.0, "errors": 0}
    assert rows["upload"]["n"] == 0 and rows["upload"]["errors"] == 2 and rows["upload"]["p95_s"] is None
    assert t.skipped == {"compression": 1, "inspect": 1}
    assert sorted(t.light()) == [1.0, 2.0, 3.0, 5.0]  # Home and page switches, not Compute
    # one message per line, grouped: the two timeouts are the same error
    assert bench_users.error_summary(t.errors) == [
        {"step": "upload", "count": 2, "message": "TimeoutError: waited for the button"}
    ]


def test_the_table_prints_each_p95_against_the_baseline(capsys):
    rows = [{"step": "home", "n": 4, "p50_s": 1.0, "p95_s": 3.0, "max_s": 3.5, "errors": 1},
            {"step": "upload", "n": 0, "p50_s": None, "p95_s": None, "max_s": None, "errors": 4}]  # fmt: skip
    bench_users.print_table("N = 4, journey", rows, {"home": 1.5})
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "N = 4, journey"
    assert out[3].split() == ["home", "4", "1.00", "3.00", "3.50", "1", "2.00x"]
    assert out[4].split() == ["upload", "0", "—", "—", "—", "4", "—"]


def _phase(kind: str, users: int, heavy: int = 0, errors: int = 0, light: float | None = None) -> dict:
    return {"phase": kind, "users": users, "heavy": heavy, "errors": errors, "light_p95_s": light}


def test_targets_are_judged_only_at_the_size_they_name(capsys):
    small = [_phase("journey", 1), _phase("journey", 2, errors=1), _phase("mixed", 2, heavy=2, light=1.5)]
    soak = {"users": 4, "minutes": 1, "growth": 0.05}
    v = bench_users.verdicts(small, soak)
    assert v["errors_at_20_users"] == {"value": 1, "target": 0, "measured_at": 2, "ratio": None, "met": None}
    assert v["light_p95_at_8_users_4_heavy_s"]["ratio"] == 0.5
    assert v["light_p95_at_8_users_4_heavy_s"]["met"] is None  # 2 users, not 8
    assert v["soak_rss_growth"]["ratio"] == 0.5 and v["soak_rss_growth"]["met"] is None  # 1 minute, not 10
    full = [_phase("journey", 20, errors=0), _phase("mixed", 8, heavy=4, light=4.5)]
    v = bench_users.verdicts(full, {"users": 4, "minutes": 10, "growth": 0.2})
    assert v["errors_at_20_users"]["met"] is True
    assert v["light_p95_at_8_users_4_heavy_s"] == {"value": 4.5, "target": 3.0, "measured_at": "8 users, 4 heavy",
                                                   "ratio": 1.5, "met": False}  # fmt: skip
    assert v["soak_rss_growth"]["met"] is False and v["soak_rss_growth"]["ratio"] == 2.0
    bench_users.print_verdicts(v)
    out = capsys.readouterr().out
    assert "MISSED" in out and "ratio  1.50" in out


def test_user_counts_are_checked():
    assert bench_users.sizes_of("1, 4,8") == [1, 4, 8]
    for bad in ("", "0,2", "two"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench_users.sizes_of(bad)
    args = bench_users.parser().parse_args([])
    assert args.users == [1, 4, 8, 16, 20] and args.soak == 10 and args.heavy == 4
    assert set(bench_users.MODEL_STEPS) == {"extend-check", "none"}

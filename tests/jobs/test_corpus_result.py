"""The corpus-stats summary's most frequent entries (`analysis.jobs.result._top`)."""

from __future__ import annotations

import random

from analysis.jobs import result


def test_top_entries_are_those_of_a_full_sort_ties_included():
    """Sorting only the entries at or above the n-th largest count gives the full sort's first n, ties broken by
    the entry's text, for word tuples and strings, with many ties at the cut."""
    rng = random.Random(7)
    words = {
        tuple(rng.choice("abcde") for _ in range(rng.randint(1, 4))): rng.randint(1, 6) for _ in range(3000)
    }
    strings = {f"w{k}": rng.choice([1, 1, 2, 3, 50]) for k in range(5000)}
    for counts in (words, strings, {"x": 2, "y": 2}, {}):
        full = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
        for n in (0, 1, 3, 10, 57, len(counts), len(counts) + 5):
            want = [[list(k) if isinstance(k, tuple) else k, c] for k, c in full[:n]]
            assert result._top(counts, n) == want, (n, len(counts))

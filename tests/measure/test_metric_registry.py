"""One metric registry (analysis.measure.metrics.METRICS: name, label, direction, formula): the in-process path,
the corpus-job path, the rows the CLI prints and the Compression page all read it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import flores_lines, load_shared

from analysis.jobs import ExecutorConfig, compute
from analysis.measure import corpus_counts, grid
from analysis.measure import metrics as mx


def test_every_metric_is_in_the_rows_and_every_formula_in_the_stats():
    tok = load_shared("llama-2")
    stats = mx.corpus_stats(tok, flores_lines("est_Latn")[:50])
    with_formula = [n for n, m in mx.METRICS.items() if m.formula is not None]
    assert [k for k in stats if k in with_formula] == with_formula  # registry order
    assert set(mx.METRICS) - set(stats) == {"parity", "parity_corpus"}  # across languages: compression_table
    assert set(mx.METRICS) <= set(grid.ROW_COLUMNS)
    assert (
        set(mx.METRIC_LABELS)
        == set(mx.HIGHER_IS_BETTER)
        == {n for n, m in mx.METRICS.items() if m.selectable}
    )
    assert "spaceless" in mx.METRICS and "spaceless" not in mx.METRIC_LABELS  # a flag, not a metric to chart
    assert mx.METRICS["bytes_per_token"].higher_is_better and not mx.METRICS["fertility"].higher_is_better


def test_totals_are_counted_in_one_place():
    tok = load_shared("llama-2")
    lines = flores_lines("deu_Latn")[:20]
    flat, lens = corpus_counts.encode_ids(tok, lines)
    totals = corpus_counts.chunk_totals(
        corpus_counts.token_facts(tok), flat, lens, corpus_counts.text_counts(lines)
    )
    assert tuple(totals) == corpus_counts.TOTALS
    assert totals["sentences"] == 20 and totals["tokens"] == flat.size


def test_a_registered_metric_reaches_the_in_process_and_the_job_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Adding a metric is one registry entry: both paths compute it with the same formula."""
    extra = mx.Metric("bytes_per_sentence", "bytes / sentence", True, lambda s: s.bytes / s.sentences)
    monkeypatch.setitem(mx.METRICS, extra.name, extra)
    tok = load_shared("llama-2")
    lines = flores_lines("fra_Latn")[:40]
    here = mx.corpus_stats(tok, lines)
    assert here["bytes_per_sentence"] == pytest.approx(sum(len(x.encode()) for x in lines) / 40)
    corpus = tmp_path / "fra.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = compute(
        tok,
        "compression",
        [str(corpus)],
        options={"group_by": "all"},
        executor=ExecutorConfig(kind="inprocess"),
    )
    (job,) = run.result.values()
    assert job["bytes_per_sentence"] == pytest.approx(here["bytes_per_sentence"])
    assert all(np.isclose(job[k], here[k], equal_nan=True) for k in mx.METRICS if k in here)

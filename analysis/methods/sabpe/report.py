"""One run of the SA-BPE comparison (CLI `sabpe`, the SA-BPE page): plain BPE, SA-BPE and optionally parity-aware
BPE side by side, and its one JSON document (:class:`SabpeComparison`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analysis.core.progress import Progress
from analysis.measure.robustness import robustness_delta
from analysis.texts.code import CodeRecord
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .measures import PAPER_LANGUAGE_GINI, evaluate, tokenizer_metrics
from .sabpe import SABPEResult, SourceWords

# --------------------------------------------------------------------------------------------------
# One run of the comparison (CLI `sabpe`, the SA-BPE page)
# --------------------------------------------------------------------------------------------------
#: Labels of the compared tokenizers, in display order.
RUN_LABELS = {"bpe": "BPE", "sabpe": "SA-BPE", "parity": "Parity-aware BPE"}


@dataclass
class SabpeComparison:
    """Plain BPE, SA-BPE and, optionally, the parity-aware baseline trained on the same code, measured on held-out
    repositories. :meth:`to_json` is the one document of the run: `python -m analysis sabpe --json` prints it,
    `--out` writes it as ``sabpe_report.json``, and the SA-BPE page offers it for download."""

    corpus: list[str]
    words: SourceWords
    runs: dict[str, SABPEResult]
    heldout: list[CodeRecord] = field(default_factory=list)
    parity: LoadedTokenizer | None = None
    parity_info: dict[str, Any] = field(default_factory=dict)
    counting: dict[str, Any] | None = None
    out: str | None = None
    #: plain BPE → SA-BPE robustness per held-out language (:meth:`measure_robustness`), when measured
    robustness: dict[str, Any] | None = None
    _metrics: dict[str, dict[str, Any]] | None = field(default=None, repr=False)

    def tokenizers(self) -> dict[str, LoadedTokenizer]:
        """Key (`bpe`, `sabpe`, `parity`) → tokenizer, in display order."""
        out = {k: r.tokenizer for k, r in self.runs.items()}
        if self.parity is not None:
            out["parity"] = self.parity
        return {k: out[k] for k in RUN_LABELS if k in out}

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Held-out measures per run (empty without held-out records); computed once."""
        if self._metrics is None:
            m: dict[str, dict[str, Any]] = {}
            if self.heldout:
                for k, res in self.runs.items():
                    m[k] = evaluate(res, self.heldout)
                if self.parity is not None:
                    m["parity"] = tokenizer_metrics(self.parity, self.heldout)
            self._metrics = {k: m[k] for k in RUN_LABELS if k in m}
        return self._metrics

    def measure_robustness(self, *, progress: Progress | None = None) -> dict[str, Any] | None:
        """Fill :attr:`robustness`: plain BPE (before) → SA-BPE (after) on the held-out files of each language
        (:func:`analysis.measure.robustness.robustness_delta`); None without a baseline or held-out files."""
        if "bpe" not in self.runs or not self.heldout:
            return None
        held: dict[str, list[str]] = {}
        for r in self.heldout:
            held.setdefault(r.language, []).append(r.text)
        before, after = self.runs["bpe"].tokenizer, self.runs["sabpe"].tokenizer
        self.robustness = robustness_delta(
            before, after, dict(sorted(held.items())), progress=progress
        ).to_json()
        return self.robustness

    def language_rows(self) -> list[dict[str, Any]]:
        """Per held-out language: files, bytes and, per run, compression (bytes/token) and coverage."""
        m = self.metrics()
        langs = sorted({g for v in m.values() for g in v.get("languages", {})})
        rows = []
        for g in langs:
            first = next(v["languages"][g] for v in m.values() if g in v.get("languages", {}))
            row: dict[str, Any] = {"language": g, "files": first["files"], "bytes": first["bytes"]}
            for k, v in m.items():
                per = v.get("languages", {}).get(g)
                row[f"{k}_bytes_per_token"] = per["bytes_per_token"] if per else None
                row[f"{k}_coverage"] = per["coverage"] if per else None
            rows.append(row)
        return rows

    def to_json(self) -> dict[str, Any]:
        """The report: corpus, per run its training summary and held-out measures, the per-language compression
        table with each run's Gini over it next to the paper's, and the parity-aware baseline when trained."""
        sw = self.words
        out: dict[str, Any] = {
            "corpus": list(self.corpus),
            "records": sw.n_records,
            "repos": len(sw.repos),
            "languages": list(sw.languages),
            "bytes": sw.n_bytes,
            "word_types": len(sw.words),
            "heldout_records": len(self.heldout),
        }
        if self.counting is not None:
            out["counting"] = self.counting
        metrics = self.metrics()
        for k, res in self.runs.items():
            out[k] = res.summary()
            if k in metrics:
                out[k]["metrics"] = metrics[k]
            out[k]["most_concentrated"] = [r["token"] for r in res.concentrated(10)]
        if self.parity is not None:
            out["parity"] = {"vocab_size": self.parity.vocab_size, **self.parity_info}
            if "parity" in metrics:
                out["parity"]["metrics"] = metrics["parity"]
        rows = self.language_rows()
        if rows:
            out["language_compression"] = {
                "rows": rows,
                "gini": {k: v.get("language_compression_gini") for k, v in metrics.items()},
                "token_frequency_gini": {k: v["token_frequency_gini"] for k, v in metrics.items()},
                "paper": list(PAPER_LANGUAGE_GINI),
            }
        if self.robustness is not None:
            out["robustness"] = self.robustness
        if self.out is not None:
            out["out"] = self.out
        return out

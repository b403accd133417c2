"""The one typed result of a transplant (:class:`TransplantResult`) and its JSON document (``transplant --json``,
``transplant_report.json`` in the output folder, the page's download)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .plan import TransplantPlan

#: The report file inside a transplanted model's folder (the model check finds the id map in it).
REPORT_NAME = "transplant_report.json"
#: The report's `kind`: how the model check recognises a transplant folder.
KIND = "transplant"


@dataclass
class TransplantResult:
    """What a transplant did: the plan (where each row came from), the init, the files, time and memory."""

    model: str
    tokenizer: str
    plan: TransplantPlan
    init: str
    k: int | None
    tied: bool
    a_rows: int
    config_ids: dict[str, Any]
    chat_template: bool
    seconds: float
    seconds_init: float
    peak_rss_bytes: int
    out: str | None = None
    gguf: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    omp: dict[str, Any] | None = None

    def to_json(self, *, with_map: bool = False) -> dict[str, Any]:
        """The JSON document; `with_map` adds ``source_ids`` (B id → A id, −1 initialised): the report file
        carries it so that the model check reads the edited ids through the same map."""
        counts = self.plan.counts()
        doc: dict[str, Any] = {
            "kind": KIND,
            "model": self.model,
            "tokenizer": self.tokenizer,
            "init": self.init,
            "k": self.k,
            "rows_original": self.a_rows,
            "rows": self.plan.rows,
            "copied": self.plan.rows - counts["initialised"],
            "initialised": counts["initialised"],
            "by": counts,
            "shared_tokens": len(self.plan.shared_a_ids),
            "tied": self.tied,
            "roles": [r.to_json() for r in self.plan.roles],
            "config_ids": self.config_ids,
            "chat_template": self.chat_template,
            "notes": list(self.plan.notes),
            "warnings": list(self.warnings),
            "seconds": self.seconds,
            "seconds_init": self.seconds_init,
            "peak_rss_bytes": self.peak_rss_bytes,
        }
        if self.omp:
            doc["omp"] = self.omp
        if self.out:
            doc["out"] = self.out
        if self.gguf:
            doc["gguf"] = self.gguf
        if with_map:
            doc["source_ids"] = [int(x) for x in self.plan.src]
            doc["source_how"] = [int(x) for x in self.plan.how]
        return doc

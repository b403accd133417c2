"""Corpus statistics beyond one process: one map / hash-bucket / reduce design on HF datatrove.

Every corpus statistic the app uses (pre-token counts, continued-training words, token-id counts, produced ids,
compression metrics per file or folder, SA-BPE per-source word counts; see :mod:`.stats`) runs as

1. **map** — each task reads its shards (files; :mod:`.inputs`) and runs the project's existing per-text
   function on them, writing its counts into K hash buckets under the workdir (:mod:`.job`);
2. **reduce** — task k sums bucket k over all map tasks (keys are disjoint across buckets, so the result is the
   single-process sum, and memory is bounded by one bucket) and, for training, segments the words;
3. **finalize** — the reduced buckets are summed into the input of the unchanged single-machine consumer
   (the BPE trainer, a pruning order, a metric).

The same pipeline runs in this process (``inprocess``, no datatrove), on this machine's cores, on Slurm or on
Ray (:mod:`.executors`); runs are resumable through datatrove's completion markers.

Entry points: :func:`compute` (blocking, with progress), :func:`start` (a background process group, with
:class:`BackgroundJob` ``progress()`` / ``result()`` / ``cancel()``; the app's ``corpus-stats`` job kind,
:mod:`.corpus_job`, runs it in a job worker), :func:`add_executor_arguments` /
:func:`executor_from_args` (the CLI flags), :func:`confine_inputs` (browser-named corpus paths), and the
consumers :func:`train_from_words`, :func:`never_produced_from_counts` (re-exported from :mod:`analysis.bpe`).
"""

from __future__ import annotations

from analysis.bpe import never_produced_from_counts
from analysis.texts.shards import confine_inputs

from .executors import EXECUTORS, ExecutorConfig, add_executor_arguments, executor_from_args
from .run import BackgroundJob, CorpusRun, compute, plan, start
from .stats import STATS, PretokenCounts, TrainingWords, train_from_words

__all__ = [
    "EXECUTORS",
    "STATS",
    "BackgroundJob",
    "CorpusRun",
    "ExecutorConfig",
    "PretokenCounts",
    "TrainingWords",
    "add_executor_arguments",
    "compute",
    "confine_inputs",
    "executor_from_args",
    "never_produced_from_counts",
    "plan",
    "start",
    "train_from_words",
]

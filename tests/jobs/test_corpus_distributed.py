"""Corpus statistics on datatrove (analysis.jobs): every executor gives the single-process result.

The local executor (1 and 2 workers, several task counts) must give the counts — and the merges learned from
them — of the in-process path and of the project's own single-process functions; shard order does not
matter; deleting one completion marker redoes only that task; a corrupt shard stops the job with a message
naming it. Slurm and Ray are tested by their configuration (the sbatch script, with a stand-in `sbatch`;
the Ray call, with a stand-in `ray` module), `hf://` paths through a stand-in fsspec filesystem.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from support import ROOT, TOKENIZERS, flores_lines, load_shared

from analysis import bpe
from analysis.bpe import training
from analysis.errors import AnalysisError, DataError
from analysis.jobs import (
    ExecutorConfig,
    add_executor_arguments,
    compute,
    executor_from_args,
    never_produced_from_counts,
    plan,
    start,
    train_from_words,
)
from analysis.jobs import executors as dx
from analysis.jobs.counts_io import read_counts, write_counts
from analysis.jobs.job import CountStep, Workdir, merged_totals
from analysis.measure import metrics
from analysis.methods import pruning, sabpe
from analysis.texts import code, corpora
from analysis.texts.shards import resolve

LANGS = ("est_Latn", "fin_Latn", "swh_Latn", "kor_Hang", "hin_Deva", "deu_Latn")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Path]:
    """Six small FLORES shards in every text format: .devtest, .txt.gz, .jsonl, .jsonl.gz."""
    d = tmp_path_factory.mktemp("corpus")
    files = []
    for i, lang in enumerate(LANGS):
        lines = flores_lines(lang, 150)
        if i % 4 == 0:
            p = d / f"{lang}.devtest"
            p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        elif i % 4 == 1:
            p = d / f"{lang}.txt.gz"
            p.write_bytes(gzip.compress(("\n".join(lines) + "\n\n").encode()))
        elif i % 4 == 2:
            p = d / f"{lang}.jsonl"
            p.write_text("".join(json.dumps({"text": ln, "id": k}) + "\n" for k, ln in enumerate(lines)))
        else:
            p = d / f"{lang}.jsonl.gz"
            p.write_bytes(gzip.compress("".join(json.dumps({"text": ln}) + "\n" for ln in lines).encode()))
        files.append(p)
    return files


def _local(tmp_path: Path, workers: int, tasks: int, name: str = "wd", **kw) -> ExecutorConfig:
    return ExecutorConfig(kind="local", workers=workers, tasks=tasks, workdir=str(tmp_path / name), **kw)


def _inprocess() -> ExecutorConfig:
    return ExecutorConfig(kind="inprocess")


def _reference_words(tok, files) -> Counter:
    pre, _, _ = training.count_pretokens(tok, corpora.from_paths(files))
    return training.segment_words(tok, pre)


# --------------------------------------------------------------------------------------------------
# Identity with the single-process path
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("workers", "tasks"),
    [(1, 1), (2, 3), pytest.param(1, 4, marks=pytest.mark.slow), pytest.param(2, 6, marks=pytest.mark.slow)],
)
def test_local_words_and_merges_equal_in_process(corpus, tmp_path, workers, tasks):
    tok = load_shared("gpt2")
    ref = _reference_words(tok, corpus)
    inproc = compute(tok, "words", [str(p) for p in corpus], executor=_inprocess())
    assert inproc.executor == "inprocess" and inproc.result.words == ref
    run = compute(tok, "words", [str(p) for p in corpus], executor=_local(tmp_path, workers, tasks))
    assert run.executor == "local" and run.info.map_run == list(range(tasks))
    assert run.result.words == ref
    assert (run.result.units, run.result.chars) == (inproc.result.units, inproc.result.chars)
    expected = training.continue_training(tok, corpora.from_paths(corpus), 120)
    got = train_from_words(tok, run.result, 120)
    assert got.steps == expected.steps and got.n_new == 120


def test_pretoken_counts_with_spills_equal_count_pretokens(corpus, tmp_path):
    tok = load_shared("llama-3.1")
    ref, n_units, n_chars = training.count_pretokens(tok, corpora.from_paths(corpus))
    opts = {"max_keys": 500, "chunk_units": 100}  # force many spill parts per task
    run = compute(
        tok, "pretokens", [str(p) for p in corpus], options=opts, executor=_local(tmp_path, 2, 2, buckets=3)
    )
    assert run.result.counts == ref and (run.result.units, run.result.chars) == (n_units, n_chars)
    parts = list((Path(run.workdir) / "parts").glob("b*/t00000-p*.npz"))
    assert len({p.name for p in parts}) > 1  # task 0 spilled more than once


def test_shard_order_and_task_count_do_not_matter(corpus, tmp_path):
    tok = load_shared("gpt2")
    paths = [str(p) for p in corpus]
    shuffled = paths[:]
    random.Random(7).shuffle(shuffled)
    assert shuffled != paths
    a = compute(tok, "words", paths, executor=_local(tmp_path, 1, 2, "a"))
    b = compute(tok, "words", shuffled[::-1], executor=_local(tmp_path, 1, 5, "b", buckets=5))
    assert a.result.words == b.result.words
    assert train_from_words(tok, a.result, 80).merges() == train_from_words(tok, b.result, 80).merges()


@pytest.mark.slow
def test_sentencepiece_words_equal_continue_training(tmp_path):
    tok = load_shared("llama-2")
    d = tmp_path / "sp"
    d.mkdir()
    for lang, n in (("fin_Latn", 120), ("est_Latn", 120), ("hin_Deva", 10)):
        (d / f"{lang}.txt").write_text("\n".join(flores_lines(lang, n)), encoding="utf-8")
    files = sorted(d.iterdir())
    ref = training.continue_training(tok, corpora.from_paths(files), 60)
    assert ref.char_steps and len(ref.char_steps) < 60  # both coverage characters and merges
    run = compute(tok, "words", [str(d / "*.txt")], options={"n_new": 60}, executor=_local(tmp_path, 2, 3))
    assert [c for c, _ in run.result.characters] == [s.token for s in ref.char_steps]
    assert train_from_words(tok, run.result, 60).steps == ref.steps


@pytest.mark.slow
def test_token_id_counts_equal_pruning_and_reachability(corpus, tmp_path):
    tok = load_shared("gpt2")
    units = list(corpora.from_paths(corpus))
    run = compute(tok, "token-ids", [str(p) for p in corpus], executor=_local(tmp_path, 2, 2, "t"))
    assert np.array_equal(run.result, pruning.token_counts(tok, units))
    run = compute(tok, "produced-ids", [str(p) for p in corpus], executor=_local(tmp_path, 1, 3, "p"))
    assert run.result == bpe.corpus_token_counts(tok, units)
    assert never_produced_from_counts(tok, run.result) == bpe.never_produced(tok, units)


@pytest.mark.slow
def test_merge_counts_equal_the_replay(corpus, tmp_path):
    tok = load_shared("gpt2")
    units = list(corpora.from_paths(corpus[:3]))
    run = compute(tok, "merge-counts", [str(p) for p in corpus[:3]], executor=_local(tmp_path, 2, 3))
    assert run.result == pruning.merge_counts(tok, units)
    order = pruning.merge_based_order(tok, counts=run.result)
    assert order.ids == pruning.merge_based_order(tok, units).ids


def test_compression_per_file_equals_corpus_stats(corpus, tmp_path):
    tok = load_shared("mistral-7b-v0.3")
    run = compute(tok, "compression", [str(p) for p in corpus], executor=_local(tmp_path, 2, 3))
    assert sorted(run.result) == sorted(LANGS)
    for f in corpus:
        ref = metrics.corpus_stats(tok, list(corpora.iter_file(f)))
        got = run.result[f.name.split(".")[0]]
        assert got.keys() == ref.keys()
        for k, v in ref.items():
            assert v == got[k] or (isinstance(v, float) and math.isnan(v) and math.isnan(got[k])), k
    whole = compute(
        tok, "compression", [str(p) for p in corpus[:2]], options={"group_by": "all"}, executor=_inprocess()
    )
    ref = metrics.corpus_stats(tok, list(corpora.from_paths(corpus[:2])))
    assert whole.result["all"]["tokens"] == ref["tokens"]
    assert whole.result["all"]["renyi_efficiency"] == ref["renyi_efficiency"]


def _code_corpus(d: Path) -> list[Path]:
    rng = random.Random(3)
    words = [
        "def",
        "return",
        "self",
        "import",
        "value",
        "count",
        "for",
        "in",
        "range",
        "print",
        "(",
        ")",
        ":",
    ]
    out = []
    for lang in ("python", "rust", "go"):
        recs = []
        for r in range(6):
            for f in range(4):
                text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
                recs.append({"repo": f"org/{lang}-{r}", "language": lang, "path": f"f{f}", "text": text})
        recs.append({"text": "fallback repo and language " * 3})  # repo/language default to the file stem
        p = d / f"{lang}.jsonl.gz"
        p.write_bytes(gzip.compress("".join(json.dumps(x) + "\n" for x in recs).encode()))
        out.append(p)
    return out


def test_source_word_counts_equal_collect_words(tmp_path):
    tok = load_shared("gpt2")
    d = tmp_path / "code"
    d.mkdir()
    files = _code_corpus(d)
    caps = {"max_files_per_repo": 3, "max_bytes_per_repo": 400}
    ref = sabpe.collect_words(tok, code.read_code(d, **caps))
    run = compute(tok, "source-words", [str(d)], options=caps, executor=_local(tmp_path, 2, 3))
    got = run.result
    assert (got.words, got.freqs, got.repos, got.languages) == (
        ref.words,
        ref.freqs,
        ref.repos,
        ref.languages,
    )
    assert (got.n_records, got.n_bytes) == (ref.n_records, ref.n_bytes)

    def per_source(sw):
        return [(dict(zip(*r)), dict(zip(*g))) for r, g in zip(sw.repo_dist, sw.lang_dist)]

    assert per_source(got) == per_source(ref)
    a = sabpe.train(tok, ref, 300, priority="F*log(R)*L")
    b = sabpe.train(tok, got, 300, priority="F*log(R)*L")
    assert a.merges == b.merges and a.token_sources == b.token_sources
    only = compute(
        tok, "source-words", [str(p) for p in files], options={"languages": ["go"]}, executor=_inprocess()
    )
    assert only.result.languages == ["go"]


# --------------------------------------------------------------------------------------------------
# Resumability
# --------------------------------------------------------------------------------------------------
def test_deleting_one_completion_marker_redoes_only_that_task(corpus, tmp_path, monkeypatch):
    tok = load_shared("gpt2")
    ran: list[int] = []
    original = CountStep.run

    def counting(self, data=None, rank=0, world_size=1):
        ran.append(rank)
        return original(self, data, rank, world_size)

    monkeypatch.setattr(CountStep, "run", counting)  # workers=1 runs the tasks in this process
    cfg = _local(tmp_path, 1, 4)
    first = compute(tok, "words", [str(p) for p in corpus], executor=cfg)
    assert sorted(ran) == [0, 1, 2, 3]
    wd = Workdir(first.workdir)
    assert wd.completed("map") == {0, 1, 2, 3} and wd.completed("reduce") == set(
        range(first.info and len(first.info.reduce_run))
    )

    ran.clear()
    again = compute(tok, "words", [str(p) for p in corpus], executor=cfg)
    assert ran == [] and again.info.map_skipped == 4 and again.info.reduce_run == []
    assert again.result.words == first.result.words

    stamps = {p: p.stat().st_mtime_ns for p in (wd.root / "parts").rglob("t0000[013]-*.npz")}
    (wd.root / "map" / "completions" / "00002").unlink()
    stale = wd.part(0, 2, 7)  # a spill an earlier, killed attempt of task 2 left: the rerun removes it
    write_counts(stale, ["Ġstale"], [10**6])
    third = compute(tok, "words", [str(p) for p in corpus], executor=cfg)
    assert ran == [2] and third.info.map_run == [2] and third.info.map_skipped == 3
    assert not stale.exists()
    assert third.info.reduce_run == list(range(len(first.info.reduce_run)))  # the reduce is redone
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # other tasks' counts untouched
    assert third.result.words == first.result.words


def test_workdir_holding_another_job_is_refused(corpus, tmp_path):
    cfg = _local(tmp_path, 1, 2)
    compute(load_shared("gpt2"), "pretokens", [str(corpus[0])], executor=cfg)
    with pytest.raises(DataError, match="holds another corpus job"):
        compute(load_shared("qwen3"), "pretokens", [str(corpus[0])], executor=cfg)
    cfg.restart = True
    run = compute(load_shared("qwen3"), "pretokens", [str(corpus[0])], executor=cfg)
    assert run.info.map_run == [0, 1]


def test_a_running_job_is_not_started_twice(corpus, tmp_path):
    tok = load_shared("gpt2")
    cfg = _local(tmp_path, 1, 2)
    wd, _ = plan(tok, "pretokens", [str(corpus[0])], executor=cfg)
    with wd.lock():
        assert wd.running()
        with pytest.raises(DataError, match="already running"):
            compute(tok, "pretokens", [str(corpus[0])], executor=cfg)
        watcher = start(tok, "pretokens", [str(corpus[0])], executor=cfg)
        assert watcher.attached and not watcher.done()
    assert not wd.running() and watcher.done()
    assert compute(tok, "pretokens", [str(corpus[0])], executor=cfg).info.map_run == [0, 1]


def test_map_progress_counts_running_tasks_and_skips_foreign_files(corpus, tmp_path):
    tok = load_shared("gpt2")
    wd, _ = plan(tok, "pretokens", [str(p) for p in corpus], executor=_local(tmp_path, 1, 2))
    m = wd.manifest()
    (wd.root / "progress").mkdir(parents=True, exist_ok=True)
    wd.progress_file(0).write_text(json.dumps({"bytes": 10**12}))  # capped at the task's bytes
    wd.progress_file(1).write_text("[1, 2]")  # not a progress record: skipped, no TypeError
    (wd.root / "progress" / "t00009.json").write_text("{")  # broken, and no such task
    assert wd.map_progress(m) == (m.task_bytes(0), m.total_bytes, 0)


def test_tampered_manifest_and_totals_are_data_errors(corpus, tmp_path):
    tok = load_shared("gpt2")
    cfg = _local(tmp_path, 1, 2)
    run = compute(tok, "pretokens", [str(corpus[0])], executor=cfg)
    wd = Workdir(run.workdir)
    wd.totals(1).write_text('["not", "totals"]')
    with pytest.raises(DataError, match="unreadable totals"):
        merged_totals(wd, wd.manifest())
    wd.totals(1).write_text('{"units": "many"}')
    with pytest.raises(DataError, match="unreadable totals"):
        merged_totals(wd, wd.manifest())
    manifest = json.loads((wd.root / "manifest.json").read_text())
    (wd.root / "manifest.json").write_text(json.dumps({**manifest, "shards": ["not a shard"]}))
    with pytest.raises(DataError, match="unreadable manifest"):
        wd.manifest()
    (wd.root / "manifest.json").write_text("[]")
    with pytest.raises(DataError, match="unreadable manifest"):
        wd.manifest()
    with pytest.raises(DataError, match="holds another corpus job"):
        compute(tok, "pretokens", [str(corpus[0])], executor=cfg)


def test_reduce_holds_one_bucket(corpus, tmp_path):
    tok = load_shared("gpt2")
    run = compute(tok, "pretokens", [str(p) for p in corpus], executor=_local(tmp_path, 2, 3, buckets=8))
    metas = [json.loads(p.read_text()) for p in sorted((Path(run.workdir) / "reduced").glob("*.meta.json"))]
    assert len(metas) == 8
    assert sum(m["keys_in"] for m in metas) == len(run.result.counts)  # keys are disjoint across buckets
    assert max(m["keys_in"] for m in metas) < len(run.result.counts) / 4


# --------------------------------------------------------------------------------------------------
# Corrupt shards
# --------------------------------------------------------------------------------------------------
CORRUPT = {
    "bad.txt.gz": b"this is not gzip at all\n",
    "truncated.txt.gz": gzip.compress("".join(f"line {i * 7919 % 10007}\n" for i in range(5000)).encode())[
        :2000
    ],
    "broken.jsonl": b'{"text": "fine"}\n{"text": "no closing brace"\n',
    "latin1.txt": "caf\u00e9 ok\n".encode() + b"na\xefve\n",
    "table.parquet": b"PAR1 this is no parquet file PAR1",
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_shard_gives_data_error_naming_it(corpus, tmp_path, name):
    bad = tmp_path / name
    bad.write_bytes(CORRUPT[name])
    tok = load_shared("gpt2")
    with pytest.raises(DataError, match=rf"corrupt shard .*{name}"):
        compute(tok, "pretokens", [str(corpus[0]), str(bad)], executor=_inprocess())


def test_corrupt_shard_in_a_worker_process(corpus, tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_bytes(CORRUPT["broken.jsonl"])
    with pytest.raises(DataError, match=r"corrupt shard .*broken\.jsonl \(line 2\): not valid JSON"):
        compute(
            load_shared("gpt2"),
            "words",
            [str(p) for p in corpus] + [str(bad)],
            executor=_local(tmp_path, 2, 3),
        )


def test_cli_corrupt_shard_is_an_error_line_not_a_traceback(tmp_path):
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(CORRUPT["bad.txt.gz"])
    proc = _cli("--tokenizer", str(_tok_dir("gpt2")), "--text", str(bad), "--executor", "local", "--workers", "1",
                "--workdir", str(tmp_path / "wd"))  # fmt: skip
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("error: map task 0: corrupt shard")
        and "bad.txt.gz (line 1): not a valid gzip" in last
    )
    assert "Traceback" not in proc.stderr


def test_missing_input_and_empty_glob(tmp_path):
    with pytest.raises(DataError, match="not found"):
        resolve([str(tmp_path / "nope.txt")])
    with pytest.raises(DataError, match="no files match"):
        resolve([str(tmp_path / "*.devtest")])


# --------------------------------------------------------------------------------------------------
# hf:// through fsspec (a stand-in filesystem: the hub is unreachable here)
# --------------------------------------------------------------------------------------------------
class FakeHubFS(MemoryFileSystem):
    """An in-memory filesystem answering `hf://` URLs."""

    protocol = ("hf",)
    store: dict = {}
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, str) and path.startswith("hf://"):
            path = path[len("hf://") :]
        return super()._strip_protocol(path)


def test_hf_paths_resolve_through_fsspec(tmp_path, monkeypatch):
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    monkeypatch.setitem(sys.modules["fsspec.registry"]._registry, "hf", FakeHubFS)
    fs = FakeHubFS()
    texts = {}
    for i, lang in enumerate(("est_Latn", "fin_Latn", "swh_Latn")):
        rows = flores_lines(lang, 80)
        texts[lang] = rows
        buf = pa.BufferOutputStream()
        pq.write_table(pa.table({"text": rows, "id": list(range(len(rows)))}), buf)
        fs.pipe(f"/datasets/org/toy/data/train-{i:05d}-{lang}.parquet", buf.getvalue().to_pybytes())
    fs.pipe("/datasets/org/toy/README.md", b"# toy")

    shards = resolve(["hf://datasets/org/toy/data/*.parquet"])
    assert [s.url.startswith("hf://") for s in shards] == [True] * 3 and {s.fmt for s in shards} == {
        "parquet"
    }
    tok = load_shared("gpt2")
    ref, _, _ = training.count_pretokens(tok, [ln for rows in texts.values() for ln in rows])
    a = compute(tok, "pretokens", ["hf://datasets/org/toy/data/*.parquet"], executor=_inprocess())
    b = compute(tok, "pretokens", ["hf://datasets/org/toy/data"], executor=_local(tmp_path, 1, 2))
    assert a.result.counts == ref and b.result.counts == ref and b.shards == 3  # README.md is no shard


# --------------------------------------------------------------------------------------------------
# Slurm and Ray: configuration
# --------------------------------------------------------------------------------------------------
def _slurm_cfg(tmp_path: Path, **kw) -> ExecutorConfig:
    return ExecutorConfig(
        kind="slurm",
        tasks=4,
        workdir=str(tmp_path / "wd"),
        partition="cpu-long",
        time="02:30:00",
        cpus_per_task=3,
        mem_per_cpu_gb=4,
        sbatch_args={"account": "tokproj"},
        **kw,
    )


def test_slurm_script_has_partition_time_cpus_and_command(corpus, tmp_path):
    tok = load_shared("gpt2")
    cfg = _slurm_cfg(tmp_path)
    wd, m = plan(tok, "words", [str(p) for p in corpus], executor=cfg)
    mk, rd = dx.slurm_executors(wd, m, cfg)
    script = dx.slurm_script(mk)
    for line in ("#SBATCH --partition=cpu-long", "#SBATCH --time=02:30:00", "#SBATCH --cpus-per-task=3",
                 "#SBATCH --mem-per-cpu=4G", "#SBATCH --account=tokproj", "#SBATCH --array=0-3",
                 f"launch_pickled_pipeline {wd.root}/map/executor.pik", f"export PYTHONPATH={ROOT}"):  # fmt: skip
        assert line in script, line
    assert "--qos" not in script
    cfg.mem_per_cpu_gb = 1.5
    assert "#SBATCH --mem-per-cpu=1536M" in dx.slurm_script(dx.slurm_executors(wd, m, cfg)[0])
    reduce_script = dx.slurm_script(rd)
    assert (
        f"#SBATCH --array=0-{m.buckets - 1}" in reduce_script
        and f"{wd.root}/reduce/executor.pik" in reduce_script
    )


def test_slurm_submission_with_a_stand_in_sbatch(corpus, tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "sbatch.log"
    (bindir / "sbatch").write_text(
        "#!/bin/sh\n"
        f"n=$(( $(ls {tmp_path}/job-* 2>/dev/null | wc -l) + 101 ))\n"
        f'for a in "$@"; do last="$a"; done\n'
        f'cp "$last" {tmp_path}/job-$n\n'
        f'echo "$n $*" >> {log}\n'
        'echo "Submitted batch job $n"\n'
    )
    (bindir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    tok = load_shared("gpt2")
    run = compute(tok, "words", [str(p) for p in corpus], executor=_slurm_cfg(tmp_path, wait=False))
    assert run.result is None and run.info.submitted
    calls = log.read_text().splitlines()
    scripts = {int(p.name[4:]): p.read_text() for p in tmp_path.glob("job-*")}
    map_id = next(i for i, s in scripts.items() if "map/executor.pik" in s)
    red_id = next(i for i, s in scripts.items() if "reduce/executor.pik" in s)
    assert "#SBATCH --partition=cpu-long" in scripts[map_id] and "#SBATCH --array=0-3" in scripts[map_id]
    assert any(c.startswith(f"{red_id} ") and f"--dependency=afterok:{map_id}" in c for c in calls)
    assert (Path(run.workdir) / "map" / "executor.pik").is_file()


@pytest.mark.slow
def test_slurm_tasks_run_from_the_pickled_executor_and_a_rerun_collects(corpus, tmp_path, monkeypatch):
    """Submit (stand-in sbatch), run each array task as Slurm would (launch_pickled_pipeline), then collect."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sbatch").write_text('#!/bin/sh\necho "Submitted batch job 7"\n')
    (bindir / "scontrol").write_text("#!/bin/sh\necho node001\n")  # `scontrol show hostnames`
    for f in bindir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    tok = load_shared("gpt2")
    cfg = _slurm_cfg(tmp_path, wait=False)
    cfg.tasks, cfg.buckets = 2, 2
    run = compute(tok, "words", [str(p) for p in corpus], executor=cfg)
    assert run.result is None
    launcher = Path(sys.executable).parent / "launch_pickled_pipeline"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLURM_NODELIST": "node001", "RUN_OFFSET": "0"}
    for stage in ("map", "reduce"):
        for i in range(2):
            pik = Path(run.workdir) / stage / "executor.pik"
            proc = subprocess.run([str(launcher), str(pik)], env={**env, "SLURM_ARRAY_TASK_ID": str(i)},
                                  capture_output=True, text=True)  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-2000:]
    cfg.wait = True
    again = compute(tok, "words", [str(p) for p in corpus], executor=cfg)
    assert not again.info.submitted and again.info.map_run == [] and again.info.reduce_run == []
    assert again.result.words == _reference_words(tok, corpus)


def test_ray_call_is_built_with_address_and_cpus(corpus, tmp_path, monkeypatch):
    calls = {}
    fake = types.ModuleType("ray")
    fake.is_initialized = lambda: False
    fake.init = lambda **kw: calls.setdefault("init", kw)
    monkeypatch.setitem(sys.modules, "ray", fake)
    from datatrove.executor.ray import RayPipelineExecutor  # noqa: PLC0415

    def run_here(self):  # stands in for the cluster: datatrove's own per-rank code, in this process
        calls.setdefault("executors", []).append((self.tasks, self.cpus_per_task, self.mem_per_cpu_gb))
        for r in self.get_incomplete_ranks():
            self._run_for_rank(r)

    monkeypatch.setattr(RayPipelineExecutor, "run", run_here)
    cfg = ExecutorConfig(kind="ray", tasks=3, workdir=str(tmp_path / "wd"), cpus_per_task=2, mem_per_cpu_gb=3,
                         ray_address="ray://head:10001")  # fmt: skip
    tok = load_shared("gpt2")
    run = compute(tok, "words", [str(p) for p in corpus], executor=cfg)
    assert calls["init"]["address"] == "ray://head:10001"
    assert str(ROOT) in calls["init"]["runtime_env"]["env_vars"]["PYTHONPATH"]
    assert calls["executors"][0] == (3, 2, 3) and calls["executors"][1][1:] == (2, 3)
    assert run.result.words == _reference_words(tok, corpus)


def test_ray_missing_gives_a_clear_error(corpus, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    cfg = ExecutorConfig(kind="ray", workdir=str(tmp_path / "wd"))
    with pytest.raises(AnalysisError, match="needs the 'ray' package"):
        compute(load_shared("gpt2"), "pretokens", [str(corpus[0])], executor=cfg)


# --------------------------------------------------------------------------------------------------
# CLI arguments, the demo command, background jobs
# --------------------------------------------------------------------------------------------------
def test_executor_arguments_round_trip():

    p = argparse.ArgumentParser()
    add_executor_arguments(p)
    args = p.parse_args(
        [
            "--executor",
            "slurm",
            "--tasks",
            "64",
            "--workers",
            "8",
            "--workdir",
            "/tmp/x",
            "--partition",
            "p",
            "--time",
            "1:00:00",
            "--cpus-per-task",
            "2",
            "--sbatch",
            "account=a",
            "--sbatch",
            "constraint=avx2",
            "--no-wait",
            "--ray-address",
            "auto",
        ]  # fmt: skip
    )
    cfg = executor_from_args(args)
    assert (cfg.kind, cfg.tasks, cfg.workers, cfg.workdir, cfg.partition, cfg.time) == (
        "slurm", 64, 8, "/tmp/x", "p", "1:00:00")  # fmt: skip
    assert (
        cfg.cpus_per_task == 2 and cfg.sbatch_args == {"account": "a", "constraint": "avx2"} and not cfg.wait
    )
    with pytest.raises(DataError, match="needs --partition"):
        executor_from_args(p.parse_args(["--executor", "slurm"]))
    auto = executor_from_args(p.parse_args([]))
    assert auto.resolved_kind(10_000) == "inprocess" and auto.resolved_kind(dx.AUTO_LOCAL_BYTES) == "local"


def _tok_dir(name: str) -> Path:

    return TOKENIZERS / name


def _cli(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "analysis", "corpus-stats", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.slow
def test_cli_local_merges_equal_in_process(corpus, tmp_path):
    glob = str(corpus[0].parent / "*")
    common = ["--tokenizer", str(_tok_dir("gpt2")), "--text", glob, "--stat", "words", "--n", "60", "--quiet"]
    a = _cli(*common, "--out", str(tmp_path / "a.json"))
    b = _cli(*common, "--out", str(tmp_path / "b.json"), "--executor", "local", "--tasks", "4", "--workers", "2",
             "--workdir", str(tmp_path / "wd"), "--json")  # fmt: skip
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    summary = json.loads(b.stdout)
    assert summary["executor"] == "local" and summary["map_tasks_run"] == 4 and summary["new_tokens"] == 60


@pytest.mark.slow
def test_background_job_resumes_after_cancel(corpus, tmp_path):
    tok = load_shared("gpt2")
    cfg = _local(tmp_path, 1, 3)
    job = start(tok, "words", [str(p) for p in corpus], executor=cfg)
    job.cancel()
    assert job.done()
    job = start(tok, "words", [str(p) for p in corpus], executor=cfg)
    words = job.result(timeout=120)
    assert words.words == _reference_words(tok, corpus)
    frac, msg = job.progress()
    assert frac == 1.0 and "reducing" in msg


def test_counts_files_round_trip_every_kind(tmp_path):
    cases = [
        ["a", "b\x00c", "", "\ud800x"],  # strings; one holds the first separator, one a lone surrogate
        [("a", "b"), ("",), ("x\x00", "\x01y")],  # tuples of strings
        [(1, 2, 3), (4,), (2**40, 1)],  # tuples of ids (int64)
        [("g", 1), ("h", 2)],  # mixed tuples: JSON
        [(1, 2), (3, "x")],  # ids, then a string: JSON
        [(1, 2), (2, 2.5)],  # a float among ids: JSON
        [(1, True)],  # a bool among ids reads back as 1: an equal key with the same hash
        [(1, 2**70)],  # an id past int64: JSON
        [1, 2, 3],
        [],
    ]
    for keys in cases:
        counts = list(range(1, len(keys) + 1))
        write_counts(tmp_path / "c.npz", keys, counts)
        assert read_counts(tmp_path / "c.npz") == Counter(dict(zip(keys, counts)))
    symbols = np.array(["A", "B", "C"], dtype=object)
    write_counts(tmp_path / "w.npz", [(1, 2), (0,)], [3, 4])
    into = Counter({("B", "C"): 10, ("Z",): 1})
    read_counts(tmp_path / "w.npz", into, symbols=symbols)  # ids read as the symbols' strings, added up
    assert into == Counter({("B", "C"): 13, ("A",): 4, ("Z",): 1})
    # an id whose slot holds no model token (an added token's): not read as a None symbol
    with pytest.raises(DataError, match="an id with no symbol"):
        read_counts(tmp_path / "w.npz", symbols=np.array(["A", "B", None], dtype=object))
    with pytest.raises(DataError, match="an id outside the symbol table"):
        read_counts(tmp_path / "w.npz", symbols=np.array(["A", "B"], dtype=object))
    write_counts(tmp_path / "d.npz", ["a", "b", "a"], [1, 2, 3])  # a key twice in one file: added up
    assert read_counts(tmp_path / "d.npz") == Counter({"a": 4, "b": 2})
    assert read_counts(tmp_path / "d.npz", Counter({"b": 1, "z": 5})) == Counter({"a": 4, "b": 3, "z": 5})

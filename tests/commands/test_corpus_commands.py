"""prune / stt / compress on corpora through analysis.jobs (issue 14 "Done when"): the local executor with
2 workers and several task counts writes exactly what the in-process run writes; runs resume and report progress;
inputs are several files, folders and globs; compress groups per file or per language folder; a corrupt shard is
an `error: ...` naming it (exit 2); the CLI's JSON is the result's to_json; browser-named paths are confined to the
operator's roots."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from support import FLORES, SMOLLM, TOKENIZERS, flores_lines, load_shared, need_smollm

from analysis import bpe, load
from analysis.bpe import NeverProduced, STTRun, stt_report
from analysis.cli import build_parser, main
from analysis.commands import compress as compress_command
from analysis.commands import stt as stt_command
from analysis.commands._common import load_from_args
from analysis.core.paths import ServerPathError
from analysis.errors import DataError, TokenizerLoadError
from analysis.jobs import ExecutorConfig, compute, confine_inputs
from analysis.measure import corpus_counts, grid, metrics, renyi
from analysis.methods import pruning
from analysis.texts.flores import open_flores

GPT2 = str(TOKENIZERS / "gpt2")
#: 13 FLORES devtest files (3 MB): enough files for 8 map tasks, small enough for the fast lane
GLOB = str(FLORES / "devtest" / "b*.devtest")
B_LANGS = sorted(p.name.split(".")[0] for p in (FLORES / "devtest").glob("b*.devtest"))


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _local(tmp_path: Path, tasks: int, name: str) -> list[str]:
    return ["--executor", "local", "--tasks", str(tasks), "--workers", "2", "--workdir", str(tmp_path / name)]


def _folder(out: Path) -> dict[str, object]:
    """The written folder: every tokenizer file as JSON (the Rust serializer writes the vocabulary in hash
    order, which differs between two runs of the same command), the report without where and how it was
    counted."""
    files = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in out.iterdir() if p.suffix == ".json"}
    rep = files.pop("prune_report.json")
    return {"files": files, "report": {k: v for k, v in rep.items() if k not in ("out", "corpus")}}


# --------------------------------------------------------------------------------------------------
# prune: the order and the pruned tokenizer do not depend on the executor
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("order", "task_counts"),
    [("frequency", (8, 3)), ("leaf-frequency", ())],
    ids=["frequency", "leaf-frequency"],
)
def test_prune_local_executor_writes_exactly_the_in_process_tokenizer(capsys, tmp_path, order, task_counts):
    """The in-process CLI writes the tokenizer of `pruning.compute_order` over the same texts; the local executor
    (8 and 3 map tasks over the 13 shards) writes exactly the in-process folder. Both orders read one corpus
    statistic (`token-ids`), so the executors are compared once, on `frequency`: the map and reduce that
    leaf-frequency would run are the same code on the same counts."""
    # the claim above: if leaf-frequency ever reads a statistic of its own, compare its executors too
    assert task_counts or pruning.ORDER_REGISTRY[order].corpus == pruning.ORDER_REGISTRY["frequency"].corpus
    common = [
        "prune",
        "--tokenizer",
        GPT2,
        "--order",
        order,
        "--text",
        GLOB,
        "--n",
        "3000",
        "--no-stt",
        "--no-robustness",  # its worst-case encode times differ from run to run; the folders must be identical
        "--json",
    ]
    rc, out, err = _run(capsys, *common, "--out", tmp_path / "a")
    assert rc == 0, err
    ref = json.loads(out)
    assert ref["corpus"]["executor"] == "inprocess" and ref["corpus"]["shards"] == len(B_LANGS)
    assert "prune: token ids: 100%" in err  # progress on stderr
    for tasks in task_counts:
        rc, out, err = _run(
            capsys, *common, "--out", tmp_path / f"l{tasks}", *_local(tmp_path, tasks, f"w{tasks}")
        )
        assert rc == 0, err
        got = json.loads(out)
        assert got["corpus"]["executor"] == "local" and got["corpus"]["map_tasks_run"] == tasks
        assert _folder(tmp_path / f"l{tasks}") == _folder(tmp_path / "a")
    # the same order as pruning.compute_order over the texts read in one process
    tok = load_shared("gpt2")
    texts = [ln for lang in B_LANGS for ln in flores_lines(lang) if ln.strip()]
    expected = pruning.prune_by_order(tok, pruning.compute_order(tok, order, texts), 3000)
    assert ref["removed_sample"] == [tok.readable(tok.id_to_token[i]) for i in expected.removed[:20]]
    assert (
        json.loads((tmp_path / "a" / "tokenizer.json").read_text())["model"]["vocab"]
        == (json.loads(expected.tokenizer.to_json())["model"]["vocab"])
    )


@pytest.mark.slow
def test_prune_rerun_resumes_and_stdout_is_the_report(capsys, tmp_path):
    argv = ["prune", "--tokenizer", GPT2, "--order", "frequency", "--text", GLOB, "--n", "500", "--no-stt", "--no-robustness",
            "--json", *_local(tmp_path, 4, "wd")]  # fmt: skip
    rc, out, err = _run(capsys, *argv, "--out", tmp_path / "a")
    assert rc == 0, err
    first = json.loads(out)
    assert first == json.loads((tmp_path / "a" / "prune_report.json").read_text(encoding="utf-8"))
    rc, out, err = _run(capsys, *argv, "--out", tmp_path / "b")
    assert rc == 0, err
    again = json.loads(out)
    assert again["corpus"]["map_tasks_skipped"] == 4 and again["corpus"]["map_tasks_run"] == 0
    assert _folder(tmp_path / "a") == _folder(tmp_path / "b")


def test_merge_based_order_from_merge_counts(tmp_path):
    tok = load_shared("gpt2")
    files = [str(FLORES / "devtest" / f"{lang}.devtest") for lang in B_LANGS[:3]]
    run = compute(tok, "merge-counts", files, executor=ExecutorConfig(kind="inprocess"))
    lines = [ln for lang in B_LANGS[:3] for ln in flores_lines(lang) if ln.strip()]
    a = pruning.compute_order(tok, "merge-based", merges=run.result)
    assert a.ids == pruning.compute_order(tok, "merge-based", lines).ids


@pytest.mark.slow
def test_prune_merge_based_local_equals_in_process(capsys, tmp_path):
    files = [str(FLORES / "devtest" / f"{lang}.devtest") for lang in B_LANGS[:4]]
    common = [
        "prune",
        "--tokenizer",
        GPT2,
        "--order",
        "merge-based",
        "--n",
        "1000",
        "--no-stt",
        "--no-robustness",
        "--quiet",
    ]
    common += [x for f in files for x in ("--text", f)]
    assert _run(capsys, *common, "--out", tmp_path / "a")[0] == 0
    assert _run(capsys, *common, "--out", tmp_path / "b", *_local(tmp_path, 4, "wd"))[0] == 0
    assert _folder(tmp_path / "a") == _folder(tmp_path / "b")


def test_prune_corpus_order_without_text_is_a_clear_error(capsys, tmp_path):
    rc, _, err = _run(
        capsys, "prune", "--tokenizer", GPT2, "--order", "frequency", "--n", "1", "--out", tmp_path / "o"
    )
    assert rc == 2 and "needs at least one --text" in err


# --------------------------------------------------------------------------------------------------
# stt --corpus: never produced, the same on every executor
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_stt_corpus_local_equals_in_process(capsys, tmp_path):
    rc, out, err = _run(capsys, "stt", GPT2, "--corpus", GLOB, "--json")
    assert rc == 0, err
    ref = json.loads(out)
    tok = load_shared("gpt2")
    lines = [ln for lang in B_LANGS for ln in flores_lines(lang) if ln.strip()]
    assert ref["never_produced_ids"] == bpe.never_produced(tok, lines)
    assert ref["corpus_lines"] == len(lines) and ref["never_produced"] == len(ref["never_produced_ids"])
    for tasks in (8, 5):
        rc, out, err = _run(
            capsys, "stt", GPT2, "--corpus", GLOB, "--json", *_local(tmp_path, tasks, f"w{tasks}")
        )
        assert rc == 0, err
        got = json.loads(out)
        assert got.pop("corpus")["executor"] == "local"
        assert got == {k: v for k, v in ref.items() if k != "corpus"}
    assert "stt: produced ids" in err


def test_stt_corpus_reads_lines_not_splitlines(capsys, tmp_path):
    """U+2028 inside a line is text, not a line break: both paths see one unit per '\\n' line."""
    f = tmp_path / "t.txt"
    f.write_text("a\u2028b\nc\r\nd\n\n", encoding="utf-8")
    rc, out, _ = _run(capsys, "stt", GPT2, "--corpus", f, "--json")
    assert rc == 0 and json.loads(out)["corpus_lines"] == 3


# --------------------------------------------------------------------------------------------------
# compress --corpus: rows shaped like the FLORES rows, the same formulas
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_compress_corpus_rows_equal_flores_rows(capsys, tmp_path):
    files = [str(FLORES / "devtest" / f"{c}.devtest") for c in ("eng_Latn", "est_Latn", "zho_Hans")]
    argv = [
        "compress",
        "-t",
        GPT2,
        *[x for f in files for x in ("--corpus", f)],
        "--json",
        "--csv",
        tmp_path / "c.csv",
    ]
    rc, out, err = _run(capsys, *argv)
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["corpus"] for r in rows] == ["eng_Latn", "est_Latn", "zho_Hans"]
    assert list(rows[0]) == grid.CORPUS_ROW_COLUMNS
    data = open_flores(None)
    flores = {
        r["lang"]: r
        for r in grid.compression_table([load_shared("gpt2")], data, ["eng_Latn", "est_Latn", "zho_Hans"])
    }
    for r in rows:
        ref = flores[r["corpus"]]
        for k in grid.CORPUS_ROW_COLUMNS[2:]:
            if k == "spaceless":  # FLORES rows also apply the language's own flag
                continue
            assert r[k] == ref[k], (r["corpus"], k)
    assert rows[0]["parity_corpus"] == 1.0  # eng_Latn is a group: the default reference
    assert (tmp_path / "c.csv").read_text().splitlines()[0].startswith("tokenizer,corpus,")
    rc, out, err = _run(capsys, *argv[:-3], "--json", "--group-by", "all", *_local(tmp_path, 3, "w"))
    assert rc == 0, err
    (whole,) = json.loads(out)
    assert whole["corpus"] == "all" and whole["tokens"] == sum(r["tokens"] for r in rows)


@pytest.mark.slow
def test_compress_code_corpus_per_language(capsys, tmp_path):
    code = Path(os.environ["TOKLAB_ASSETS"]) / "corpora" / "code"
    rc, out, err = _run(capsys, "compress", "-t", GPT2, "--corpus", code / "go.jsonl.gz", "--corpus",
                        code / "lua.jsonl.gz", "--json", "--reference", "go")  # fmt: skip
    assert rc == 0, err
    rows = {r["corpus"]: r for r in json.loads(out)}
    assert set(rows) == {"go", "lua"} and rows["go"]["bytes_per_token"] > 2
    rc, _, err = _run(capsys, "compress", "-t", GPT2, "--corpus", code / "go.jsonl.gz", "--reference", "xx")
    assert rc == 2 and "not a group of the corpus" in err


# --------------------------------------------------------------------------------------------------
# inputs: zip shards, NUL bytes, server paths
# --------------------------------------------------------------------------------------------------
def test_zip_of_text_files_and_binary_text(tmp_path):
    tok = load_shared("gpt2")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a.txt", "hello world\nsecond line\n")
        zf.writestr("b/c.txt.gz", gzip.compress(b"third\n"))
    (tmp_path / "u.zip").write_bytes(buf.getvalue())
    run = compute(tok, "produced-ids", [str(tmp_path / "u.zip")], executor=ExecutorConfig(kind="inprocess"))
    assert run.totals["units"] == 3
    (tmp_path / "bin.txt").write_bytes(b"ab\x00cd\n")
    with pytest.raises(DataError, match="NUL byte"):
        compute(tok, "produced-ids", [str(tmp_path / "bin.txt")], executor=ExecutorConfig(kind="inprocess"))


def test_confine_inputs(tmp_path, monkeypatch):
    root, other = tmp_path / "root", tmp_path / "other"
    (root / "sub").mkdir(parents=True)
    other.mkdir()
    (root / "sub" / "a.txt").write_text("x\n")
    (other / "secret.txt").write_text("y\n")
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    with pytest.raises(ServerPathError, match="switched off"):
        confine_inputs([str(root / "sub")])
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(root))
    assert confine_inputs([str(root / "sub" / "*.txt")]) == [str((root / "sub").resolve()) + "/*.txt"]
    assert confine_inputs(["sub/*.txt"]) == [str((root / "sub").resolve()) + "/*.txt"]  # relative to the root
    for bad in (str(other / "*.txt"), str(root / ".." / "other" / "*.txt"), "hf://datasets/x/y/*.parquet"):
        with pytest.raises(ServerPathError):
            confine_inputs([bad])
    (root / "sub" / "link.txt").symlink_to(other / "secret.txt")
    with pytest.raises(ServerPathError, match="outside"):
        confine_inputs([str(root / "sub" / "*.txt")])


# --------------------------------------------------------------------------------------------------
# the tokenizer argument: --model gives the model's own tokenizer
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
@need_smollm
def test_tokenizer_argument_defaults_to_the_models_own():
    ns = argparse.Namespace(tokenizer=None, revision=None, token=None, model=str(SMOLLM))
    assert load_from_args(ns).to_json() == load(SMOLLM).to_json()  # the tokenizer inside the GGUF
    with pytest.raises(TokenizerLoadError, match="or --model"):
        load_from_args(argparse.Namespace(tokenizer=None, revision=None, token=None, model=None))
    with pytest.raises(TokenizerLoadError, match="no tokenizer given"):
        load_from_args(argparse.Namespace(tokenizer=None, revision=None, token=None))


@pytest.mark.slow
@need_smollm
def test_prune_with_only_a_model_prunes_the_models_tokenizer(capsys, tmp_path):
    rc, out, err = _run(capsys, "prune", "--model", SMOLLM, "--order", "leaf-last-n", "--n", "100", "--no-stt", "--no-robustness",
                        "--out", tmp_path / "o", "--json")  # fmt: skip
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["tokenizer"] == SMOLLM.stem and rep["vocab_size"] == 49152 - 100
    assert rep["model"]["new_rows"] == 49152 - 100


def test_stt_without_tokenizer_is_a_clear_error(capsys):
    rc, _, err = _run(capsys, "stt", "--json")
    assert rc == 2 and "no tokenizer given" in err


def test_stats_from_counts_is_the_metric_of_a_partition():
    """Counts and totals added over two halves give corpus_stats of the whole (the distributed path's formula)."""
    tok = load_shared("llama-3.1")
    lines = flores_lines("est_Latn", 200)
    whole = metrics.corpus_stats(tok, lines)
    counts = np.zeros(tok.vocab_size, dtype=np.int64)
    totals = dict.fromkeys(corpus_counts.TOTALS, 0)
    facts = corpus_counts.token_facts(tok)
    for part in (lines[:77], lines[77:]):
        flat, lens = corpus_counts.encode_ids(tok, part)
        counts += np.bincount(flat, minlength=tok.vocab_size)
        tc = corpus_counts.text_counts(part)
        facts.ensure(np.unique(flat))
        words_tok, cont = corpus_counts.continued_words(facts, flat, lens)
        for k, v in (("sentences", lens.size), ("tokens", flat.size), ("bytes", tc["bytes"].sum()),
                     ("chars", tc["chars"].sum()), ("words", tc["words"].sum()), ("words_tok", words_tok),
                     ("continued", cont)):  # fmt: skip
            totals[k] += int(v)
    got = metrics.stats_from_counts(tok, counts, totals, renyi.DEFAULT_POWER)
    assert got.keys() == whole.keys()
    for k, v in whole.items():
        assert got[k] == v or (isinstance(v, float) and math.isnan(v) and math.isnan(got[k])), k


# --------------------------------------------------------------------------------------------------
# compress per language folder, several inputs and globs, corrupt shards, JSON = result.to_json()
# --------------------------------------------------------------------------------------------------
_CODE = {
    "python/a.py": "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n",
    "python/b.py": "import os\nfor name in os.listdir('.'):\n    print(name.upper())\n",
    "rust/main.rs": 'fn main() {\n    let v: Vec<u32> = (0..10).collect();\n    println!("{:?}", v);\n}\n',
    "c/m.c": '#include <stdio.h>\nint main(void) {\n    printf("%d\\n", 42);\n    return 0;\n}\n',
    "go/hello.go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n}\n',
    "java/App.java": 'class App {\n    public static void main(String[] a) { System.out.println("hi"); }\n}\n',
}


def _code_folder(root: Path) -> Path:
    for rel, text in _CODE.items():
        (root / "code" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "code" / rel).write_text(text, encoding="utf-8")
    return root / "code"


def _no_seconds(obj: object) -> object:
    """A JSON value without its wall-clock timings (the only part two runs of one command may differ in)."""
    if isinstance(obj, dict):
        return {k: _no_seconds(v) for k, v in obj.items() if k != "seconds"}
    if isinstance(obj, list):
        return [_no_seconds(v) for v in obj]
    return obj


def test_compress_corpus_per_language_folder(capsys, tmp_path):
    code = _code_folder(tmp_path)
    argv = ["compress", "-t", GPT2, "--corpus", code, "--json"]
    rc, out, err = _run(capsys, *argv, "--group-by", "folder")
    assert rc == 0, err
    rows = {r["corpus"]: r for r in json.loads(out)}
    assert set(rows) == {"python", "rust", "c", "go", "java"}  # every common source suffix is read
    rc, out, err = _run(capsys, *argv, "--group-by", "file")
    assert rc == 0, err
    files = {r["corpus"]: r for r in json.loads(out)}
    assert set(files) == {"a", "b", "main", "m", "hello", "App"}
    for k in ("tokens", "bytes", "chars"):  # a folder's row sums its files' rows
        assert rows["python"][k] == files["a"][k] + files["b"][k], k
        assert rows["rust"][k] == files["main"][k] and rows["c"][k] == files["m"][k], k
    tok = load_shared("gpt2")
    lines = [ln for f in ("a.py", "b.py") for ln in _CODE[f"python/{f}"].split("\n") if ln.strip()]
    assert rows["python"]["bytes"] == sum(len(ln.encode()) for ln in lines)
    assert rows["python"]["tokens"] == sum(len(e.ids) for e in tok.tokenizer.encode_batch(lines))
    rc, out, err = _run(capsys, *argv, "--group-by", "folder", *_local(tmp_path, 3, "w"))
    assert rc == 0, err
    assert {r["corpus"]: r for r in json.loads(out)} == rows  # the local executor: the same rows


@pytest.mark.slow
def test_several_inputs_and_globs_are_one_deduplicated_corpus(capsys, tmp_path):
    glob = str(FLORES / "devtest" / "y*.devtest")
    yor = str(FLORES / "devtest" / "yor_Latn.devtest")
    rc, out, err = _run(capsys, "stt", GPT2, "--corpus", glob, "--json")
    assert rc == 0, err
    ref = json.loads(out)
    y_langs = sorted(p.name.split(".")[0] for p in (FLORES / "devtest").glob("y*.devtest"))
    lines = [ln for lang in y_langs for ln in flores_lines(lang) if ln.strip()]
    assert ref["corpus"]["shards"] == len(y_langs) and ref["corpus_lines"] == len(lines)
    # a file named twice (directly and through the glob) is read once
    rc, out, err = _run(capsys, "stt", GPT2, "--corpus", yor, "--corpus", glob, "--json")
    assert rc == 0, err
    assert _no_seconds({k: v for k, v in json.loads(out).items() if k != "corpus"}) == _no_seconds(
        {k: v for k, v in ref.items() if k != "corpus"}
    )
    # two inputs: their union
    rc, out, err = _run(capsys, "stt", GPT2, "--corpus", yor, "--corpus", FLORES / "devtest" / "yue_Hant.devtest",
                        "--json")  # fmt: skip
    assert rc == 0, err
    two = json.loads(out)
    both = [ln for lang in ("yor_Latn", "yue_Hant") for ln in flores_lines(lang) if ln.strip()]
    assert two["corpus_lines"] == len(both) and two["never_produced_ids"] == bpe.never_produced(
        load_shared("gpt2"), both
    )
    rc, _, err = _run(capsys, "stt", GPT2, "--corpus", FLORES / "devtest" / "qqq*.devtest", "--json")
    assert rc == 2 and err.startswith("error: no files match")


@pytest.mark.slow
@pytest.mark.parametrize("executor", [[], ["--executor", "local", "--tasks", "2", "--workers", "2"]])
def test_corrupt_shard_is_an_error_naming_the_shard(capsys, tmp_path, executor):
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "good.txt").write_text("hello world\nmore text\n", encoding="utf-8")
    (d / "bad.txt.gz").write_bytes(gzip.compress(b"fine\n")[:-12] + b"garbage!!")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    prune = [
        "prune",
        "--tokenizer",
        GPT2,
        "--order",
        "frequency",
        "--n",
        "10",
        "--no-stt",
        "--no-robustness",
        "--out",
        tmp_path / "o",
    ]
    for argv, shard in (
        (["stt", GPT2, "--corpus", d, "--json"], "bad.txt.gz"),
        (["compress", "-t", GPT2, "--corpus", d, "--json"], "bad.txt.gz"),
        ([*prune, "--text", tmp_path / "latin1.txt"], "latin1.txt"),
    ):
        wd = ["--workdir", str(tmp_path / f"wd-{argv[0]}")] if executor else []  # one job per workdir
        rc, out, err = _run(capsys, *argv, *executor, *wd)
        last = err.strip().splitlines()[-1]  # after the progress lines
        assert rc == 2 and out == "" and "Traceback" not in err, err
        assert last.startswith("error: ") and "corrupt shard " in last and shard in last, err
    assert not (tmp_path / "o").exists()  # nothing written for a failed run


def test_cli_json_is_the_result_to_json(capsys, tmp_path):
    code = _code_folder(tmp_path)
    parser = build_parser()
    argv = ["compress", "-t", GPT2, "--corpus", str(code), "--group-by", "folder", "--json"]
    rc, out, err = _run(capsys, *argv)
    assert rc == 0, err
    args = parser.parse_args(argv)
    tok = load_shared("gpt2")
    result = compress_command.corpus_result([tok], args)
    assert isinstance(result, grid.CompressionResult)
    assert json.loads(out) == result.to_json()
    argv = ["stt", GPT2, "--corpus", str(code), "--json"]
    rc, out, err = _run(capsys, *argv)
    assert rc == 0, err
    run = STTRun(stt_report(tok))
    run.never = stt_command.never_produced_on(tok, parser.parse_args(argv))
    assert isinstance(run.never, NeverProduced)
    assert _no_seconds(json.loads(out)) == _no_seconds(run.to_json())


def test_extend_holds_out_the_end_of_the_users_text_by_default(tmp_path, capsys):
    """`extend --text FILE` alone: the last 10 % of the units are not trained on and are measured (issue 54)."""
    text = tmp_path / "est.txt"
    text.write_text("\n".join(flores_lines("est_Latn", 60)) + "\n", encoding="utf-8")
    args = ["extend", "--tokenizer", str(TOKENIZERS / "gpt2"), "--text", str(text), "--n", "30"]
    assert main([*args, "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["heldout_split"] | {"source": None} == {"source": None, "units": 60, "first": 55, "last": 60,
                                                       "held_out": 6, "share": 0.1}  # fmt: skip
    assert list(doc["heldout"]) == ["your text, units 55–60 of 60 (held out)"]
    assert main([*args, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (
        "units 55–60 of 60 (held out): bytes/token" in out and "held out of training: the last 6 of 60" in out
    )
    assert main([*args, "--no-heldout", "--json", "--quiet"]) == 0
    assert "heldout_split" not in json.loads(capsys.readouterr().out)

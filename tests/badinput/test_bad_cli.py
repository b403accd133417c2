"""Bad inputs through every CLI command: each gives exit status 2 and one `error:` line (or, where the input is
merely large, a bounded run), never a traceback, a hang, a Rust panic or a silently wrong number.

Classes (issue 12): resource limits before allocation, clear errors, no silently wrong results, atomic outputs.
Fixtures are generated in `tmp_path`; the large ones are sparse files or compressed bombs of a few hundred kB.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from bad_files import (
    bad_crc,
    deep_json,
    duplicate_ids_doc,
    embeddings_file,
    empty_vocab_doc,
    encrypted,
    many_entries_zip,
    panic_merge_doc,
    safetensors,
    sparse_ids_doc,
    tokenizer_doc,
    understated,
    unsupported_method,
    write_folder,
    zip_of,
)
from bad_run import assert_clear_error, strict_loads, tree
from support import ROOT, TOKENIZERS, load_shared

from analysis.cli import build_parser
from analysis.commands import inspect as inspect_command
from analysis.errors import DataError
from analysis.texts.corpora import upload_lines
from analysis.tokenizer import export
from analysis.tokenizer.tokenizer import LoadedTokenizer
from analysis.views import playground

GPT2 = TOKENIZERS / "gpt2"
GPT2_JSON = (GPT2 / "tokenizer.json").read_bytes()


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> dict[str, Path]:
    """The bad files, built once for the module."""
    d = tmp_path_factory.mktemp("bad")
    f: dict[str, Path] = {}
    f["sparse"] = write_folder(d / "sparse", sparse_ids_doc())
    f["dup"] = write_folder(d / "dup", duplicate_ids_doc())
    f["panic"] = write_folder(d / "panic", panic_merge_doc())
    f["empty"] = write_folder(d / "empty", empty_vocab_doc())
    f["deep"] = write_folder(d / "deep", deep_json())
    text = "tere maailm, see on väike tekst\n" * 40
    f["text"] = d / "text.txt"
    f["text"].write_text(text, encoding="utf-8")
    f["latin1"] = d / "latin1.txt"
    f["latin1"].write_bytes("Tere, õun ja äädikas: väga hea\n".encode("latin-1") * 40)
    f["binary"] = d / "binary.txt"
    f["binary"].write_bytes(b"ab\x00cd\x00" * 400 + b"\n")
    f["blank"] = d / "blank.txt"
    f["blank"].write_text("\n  \n\t\n", encoding="utf-8")
    good_zip = zip_of({"corpus/a.txt": text.encode("utf-8")})
    for name, fn in (("crc", bad_crc), ("encrypted", encrypted), ("method", unsupported_method)):
        (d / f"text-{name}.zip").write_bytes(fn(good_zip))
        f[f"text-{name}"] = d / f"text-{name}.zip"
        (d / f"tok-{name}.zip").write_bytes(fn(zip_of({"tok/tokenizer.json": GPT2_JSON})))
        f[f"tok-{name}"] = d / f"tok-{name}.zip"
    gz = gzip.compress(text.encode("utf-8"))
    (d / "truncated.txt.gz").write_bytes(gz[: len(gz) // 2])
    (d / "garbage.txt.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"not really gzip data" * 20)
    f["gz-truncated"], f["gz-garbage"] = d / "truncated.txt.gz", d / "garbage.txt.gz"
    return f


# ============================================================================ resource limits before allocation
@pytest.mark.parametrize("argv", [
    ["inspect", "{sparse}"],
    ["stt", "{sparse}"],
    ["prune", "--tokenizer", "{sparse}", "--order", "last-n", "--n", "1", "--out", "{tmp}/out"],
    ["compress", "-t", "{sparse}", "--langs", "est_Latn"],
])  # fmt: skip
def test_sparse_ids_are_refused_at_load(cli, bad, tmp_path, argv):
    run = cli(*[a.format(sparse=bad["sparse"], tmp=tmp_path) for a in argv])
    assert_clear_error(run, "not dense", "2,000,000,000")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer.model", "vocab.txt"])
def test_a_huge_file_in_a_folder_is_refused_before_reading(cli, tmp_path, name):
    folder = tmp_path / "tok"
    folder.mkdir()
    with open(folder / name, "wb") as fh:
        fh.truncate(2_500_000_000)  # a sparse 2.5 GB file: nothing on disk, 2.5 GB by its size
    assert_clear_error(cli("inspect", folder), "over the 200 MB limit")
    assert_clear_error(cli("inspect", folder / name), "over the 200 MB limit")


def test_one_cap_for_every_way_a_file_arrives(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("TOKLAB_MAX_FILE_MB", "1")
    assert_clear_error(cli("inspect", GPT2), "over the 1 MB limit")  # a folder
    assert_clear_error(cli("inspect", GPT2 / "tokenizer.json"), "over the 1 MB limit")  # a file
    (tmp_path / "t.zip").write_bytes(zip_of({"tok/tokenizer.json": GPT2_JSON}))
    assert_clear_error(cli("inspect", tmp_path / "t.zip"), "over the 1 MB limit")  # a zip


@pytest.mark.parametrize("kind", ["understated", "overstated"])
def test_zip_headers_that_lie_about_sizes(cli, tmp_path, kind):
    data = zip_of({"tok/tokenizer.json": GPT2_JSON, "tok/padding.bin": b"\0" * (20 << 20)})
    if kind == "understated":  # headers claim 100 bytes per member; zipfile then fails the CRC check
        data = understated(data)
        words = ("corrupt",)
    else:  # headers claim 4 GB per member: refused before extracting anything
        data = understated(data, size=0xFFFF0000)
        words = ("expands to more than",)
    (tmp_path / "lying.zip").write_bytes(data)
    assert_clear_error(cli("inspect", tmp_path / "lying.zip"), *words)


def test_zip_declaring_too_many_entries(cli, tmp_path):
    (tmp_path / "many.zip").write_bytes(many_entries_zip(1200))
    assert_clear_error(cli("inspect", tmp_path / "many.zip"), "1,200 entries")


def test_dynamic_batch_over_the_work_bound(cli, tmp_path):
    (tmp_path / "lines.txt").write_text(("word " * 19_000 + "\n") * 6, encoding="utf-8")  # 6 × 95,000 chars
    assert_clear_error(cli("dynamic", GPT2, "--file", tmp_path / "lines.txt"), "500,000 per batch")


# ============================================================================ clear errors, never tracebacks
@pytest.mark.parametrize("kind", ["crc", "encrypted", "method"])
def test_corrupt_tokenizer_zip_members(cli, bad, kind):
    words = {"crc": "corrupt", "encrypted": "encrypted", "method": "unsupported compression"}[kind]
    assert_clear_error(cli("inspect", bad[f"tok-{kind}"]), words)


@pytest.mark.parametrize("kind", ["text-crc", "text-encrypted", "text-method", "gz-truncated", "gz-garbage"])
def test_corrupt_text_archives(cli, bad, kind):
    words = {"text-crc": "corrupt", "text-encrypted": "encrypted", "text-method": "unsupported compression",
             "gz-truncated": "corrupt", "gz-garbage": "corrupt"}[kind]  # fmt: skip
    assert_clear_error(cli("extend", "--tokenizer", GPT2, "--text", bad[kind], "--n", "5"), words)


def test_corrupt_gz_corpus_for_stt(cli, bad):
    assert_clear_error(cli("stt", GPT2, "--corpus", bad["gz-truncated"]), "corrupt")


def test_json_nested_100000_deep(cli, bad, tmp_path):
    assert_clear_error(cli("inspect", bad["deep"]), "nested too deeply")
    slow = write_folder(tmp_path / "slow", b"")
    (slow / "tokenizer.json").unlink()
    (slow / "vocab.json").write_bytes(deep_json())
    (slow / "merges.txt").write_bytes(b"#version: 0.2\n")
    assert_clear_error(cli("inspect", slow), "vocab.json", "nested too deeply")
    (tmp_path / "scores.json").write_bytes(deep_json())
    run = cli("prune", "--tokenizer", GPT2, "--order", "score", "--scores", tmp_path / "scores.json", "--n", "1",
              "--out", tmp_path / "out")  # fmt: skip
    assert_clear_error(run, "nested too deeply")
    run = cli("prune", "--tokenizer", GPT2, "--order", "score", "--n", "1", "--out", tmp_path / "out")
    assert_clear_error(run, "score order needs a score per token", "--scores FILE")  # said which option
    deep = deep_json()
    (tmp_path / "deep.safetensors").write_bytes(len(deep).to_bytes(8, "little") + deep + b"\0" * 16)
    run = cli("undertrained", "--model", tmp_path / "deep.safetensors", "--tokenizer", GPT2)
    assert_clear_error(run, "safetensors header", "nested too deeply")


def test_merge_result_not_in_vocabulary(cli, bad, tmp_path):
    assert_clear_error(cli("inspect", bad["panic"]), "merge #0", "not in the vocabulary")
    (tmp_path / "panic.json").write_text(json.dumps(panic_merge_doc()), encoding="utf-8")
    assert_clear_error(cli("stt", tmp_path / "panic.json"), "not in the vocabulary")


def test_merge_panic_prints_no_rust_backtrace(cli_process, bad):
    run = cli_process("inspect", bad["panic"])  # RUST_BACKTRACE=1: a panic would print its backtrace
    assert_clear_error(run, "not in the vocabulary")


@pytest.mark.parametrize("name", ["merges.txt", "vocab.txt"])
def test_non_utf8_slow_tokenizer_files(cli, tmp_path, name):
    folder = tmp_path / "slow"
    folder.mkdir()
    if name == "merges.txt":
        (folder / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "ab": 2}), encoding="utf-8")
        (folder / "merges.txt").write_bytes(b"#version: 0.2\na b\n\xff\xfe \xe9\n")
    else:
        (folder / "vocab.txt").write_bytes(b"[PAD]\n[UNK]\nhello\n\xe9t\xe9\n")
    assert_clear_error(cli("inspect", folder), name, "not UTF-8")
    if name == "vocab.txt":
        assert_clear_error(cli("inspect", folder / "vocab.txt"), "not UTF-8")


@pytest.mark.parametrize("entry", [
    {"dtype": "F32", "shape": [4, 2], "data_offsets": [32, 0]},
    {"dtype": "F32", "shape": [-4, 2], "data_offsets": [0, 32]},
    {"dtype": "F32", "shape": ["4", 2], "data_offsets": [0, 32]},
    {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 1 << 40]},
    {"dtype": "F32", "shape": [4, 2], "data_offsets": "0-32"},
    "not an object",
    {"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 32]},
])  # fmt: skip
def test_malformed_safetensors_headers(cli, tmp_path, entry):
    (tmp_path / "m.safetensors").write_bytes(safetensors({"model.embed_tokens.weight": entry}, b"\0" * 32))
    assert_clear_error(cli("undertrained", "--model", tmp_path / "m.safetensors", "--tokenizer", GPT2),
                       "corrupt safetensors header")  # fmt: skip


def test_unwritable_outputs(cli, tmp_path):
    (tmp_path / "a-file").write_text("x")
    assert_clear_error(cli("prune", "--tokenizer", GPT2, "--order", "last-n", "--n", "1", "--no-stt", "--no-robustness",
                           "--out", tmp_path / "a-file"), "not a folder")  # fmt: skip
    assert_clear_error(cli("prune", "--tokenizer", GPT2, "--order", "last-n", "--n", "1", "--no-stt", "--no-robustness",
                           "--out", "/proc/toklab-out"), "cannot write")  # fmt: skip
    assert_clear_error(cli("stt", GPT2, "--csv", tmp_path / "missing" / "x.csv"), "cannot write")
    assert_clear_error(cli("stt", GPT2, "--csv", tmp_path), "is a folder")
    assert tree(tmp_path) == {"a-file": 1}  # nothing half-written anywhere


def test_full_disk_leaves_no_output(cli, tmp_path, monkeypatch):
    real = Path.write_bytes
    calls = []

    def full(self: Path, data: bytes) -> int:
        calls.append(self.name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(export.Path, "write_bytes", full)
    run = cli(
        "prune",
        "--tokenizer",
        GPT2,
        "--order",
        "last-n",
        "--n",
        "1",
        "--no-stt",
        "--no-robustness",
        "--out",
        tmp_path / "out",
    )
    assert_clear_error(run, "No space left on device")
    assert tree(tmp_path) == {}  # no target, no temporary folder


def test_a_5000_character_path(cli, tmp_path):
    long = "/tmp/" + "x" * 5000
    assert_clear_error(cli("inspect", long), "cannot read")
    assert_clear_error(cli("extend", "--tokenizer", GPT2, "--text", long, "--n", "5"))
    assert_clear_error(cli("prune", "--tokenizer", GPT2, "--order", "last-n", "--n", "1", "--no-stt", "--no-robustness",
                           "--out", tmp_path / ("y" * 5000)), "cannot write")  # fmt: skip


def test_dangling_symlink_inside_a_tokenizer_folder_loads(cli, tmp_path):
    folder = write_folder(tmp_path / "tok", tokenizer_doc())
    (folder / "tokenizer_config.json").symlink_to(tmp_path / "gone.json")
    (folder / "special_tokens_map.json").symlink_to("missing.json")
    run = cli("inspect", folder, "--json")
    assert run.rc == 0, run.err
    assert strict_loads(run.out)["vocab_size"] == 256


@pytest.mark.parametrize("pct", ["150", "-1", "nan"])
def test_percentile_outside_0_to_100(cli, tmp_path, pct):
    run = cli(
        "undertrained", "--model", tmp_path / "none.safetensors", "--tokenizer", GPT2, "--percentile", pct
    )
    assert_clear_error(run, "between 0 and 100")


def test_invalid_utf8_in_dynamic_text(cli_process):
    run = cli_process("dynamic", str(GPT2), "--text", b"caf\xe9 \xff\xfe")
    assert_clear_error(run, "not valid UTF-8")


def test_duplicate_vocabulary_ids(cli, bad, tmp_path):
    run = cli("prune", "--tokenizer", bad["dup"], "--order", "last-n", "--n", "1", "--out", tmp_path / "o")
    assert_clear_error(run, "duplicate vocabulary ids", "share id 5")


@pytest.mark.parametrize("argv", [
    ["stt", "{empty}"],
    ["prune", "--tokenizer", "{empty}", "--order", "last-n", "--n", "1", "--out", "{tmp}/o"],
    ["compress", "-t", "{empty}", "--langs", "est_Latn"],
])  # fmt: skip
def test_empty_vocabulary_bpe(cli, bad, tmp_path, argv):
    assert_clear_error(
        cli(*[a.format(empty=bad["empty"], tmp=tmp_path) for a in argv]), "vocabulary is empty"
    )


# ============================================================================ no silently wrong results
def test_empty_vocab_txt(cli, tmp_path):
    (tmp_path / "wp").mkdir()
    (tmp_path / "wp" / "vocab.txt").write_text("\n\n", encoding="utf-8")
    assert_clear_error(cli("inspect", tmp_path / "wp"), "vocab.txt is empty")


@pytest.mark.parametrize("corpus", ["empty", "blank"])
def test_empty_stt_corpus(cli, bad, tmp_path, corpus):
    path = tmp_path / "empty.txt" if corpus == "empty" else bad["blank"]
    path.touch()
    assert_clear_error(cli("stt", GPT2, "--corpus", path), "corpus", "empty")


@pytest.mark.parametrize("refs", ["999999", "10-5"])
def test_reference_ids_outside_the_vocabulary(cli, tmp_path, refs):
    (tmp_path / "m.safetensors").write_bytes(embeddings_file(8, 4))  # never read: the spec fails first
    run = cli("undertrained", "--model", tmp_path / "m.safetensors", "--tokenizer", GPT2, "--refs", refs)
    assert_clear_error(run, "reference")


@pytest.mark.parametrize("flag", [["--power", "nan"], ["--power", "inf"], ["--power", "-1"],
                                  ["--reference", "xxx_Latn"], ["--langs", ""], ["--langs", " , "]])  # fmt: skip
def test_compress_parameters(cli, flag):
    run = cli("compress", "-t", GPT2, "--langs", "est_Latn", *flag, "--no-cache")
    words = {"--power": "power", "--reference": "reference", "--langs": "no languages"}
    assert_clear_error(run, words[flag[0]])  # an empty --langs names no language, not all 204


def _numeric_options() -> list[tuple[str, str, object]]:
    """(command, option, its type) of every option of every command that takes a number."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [(name, a.option_strings[-1], a.type) for name, p in sub.choices.items() for a in p._actions
            if a.option_strings and a.type is not None and a.type is not str and (
                a.type in (int, float) or hasattr(a.type, "minimum") or hasattr(a.type, "low"))]  # fmt: skip


def _out_of_bounds(kind: object) -> list[str]:
    """Values just outside a bounded number type's range, and text that is no number."""
    if hasattr(kind, "minimum"):
        out = [str(kind.minimum - 1), "1.5", "ten"]
        return out + ([str(kind.maximum + 1)] if kind.maximum is not None else [])
    low = kind.low if kind.open_low else kind.low - 1
    return [repr(low), "nan", "inf", "-inf", "x"] + (
        [repr(kind.high * 2 + 1)] if math.isfinite(kind.high) else []
    )


def test_every_number_on_the_command_line_is_bounded_as_it_is_read(cli):
    """Every numeric option declares its range (no bare int or float: -1 lines would slice off the last line,
    a negative frequency reached the Rust trainer as a traceback, a batch size of 0 a `range()` error), and a
    value outside it is one `error:` line naming the option, exit 2, before the command starts."""
    options = _numeric_options()
    assert len(options) >= 45, len(options)
    bare = [(c, o) for c, o, kind in options if kind in (int, float)]
    assert not bare, f"numeric options without bounds (use whole_number / real_number): {bare}"
    for command, option, kind in options:
        for value in _out_of_bounds(kind):
            run = cli(command, f"{option}={value}")
            assert_clear_error(run, f"argument {option}")


def test_a_bad_command_line_is_one_error_line(cli):
    """argparse's own failures (a missing argument, an unknown option or choice) take the CLI's one format too."""
    assert_clear_error(cli("prune"), "required", "--order")
    assert_clear_error(cli("stt", GPT2, "--no-such-option"), "unrecognized")
    assert_clear_error(cli("no-such-command"), "invalid choice")


@pytest.mark.parametrize("argv", [
    ["extend", "--tokenizer", str(GPT2), "--text", "{f}", "--n", "5"],
    ["prune", "--tokenizer", str(GPT2), "--order", "frequency", "--text", "{f}", "--n", "1", "--out", "{tmp}/o"],
    ["dynamic", str(GPT2), "--file", "{f}"],
    ["stt", str(GPT2), "--corpus", "{f}"],
])  # fmt: skip
@pytest.mark.parametrize("kind", ["latin1", "binary"])
def test_text_that_is_not_utf8_is_refused_everywhere(cli, bad, tmp_path, argv, kind):
    run = cli(*[a.format(f=bad[kind], tmp=tmp_path) for a in argv])
    assert_clear_error(run, "not UTF-8" if kind == "latin1" else "NUL byte")
    assert "\ufffd" not in run.out


def _tiny_model(folder: Path, nan_rows: slice | None) -> Path:
    """A 256-row untied embedding model for the 256-token byte-level tokenizer (some rows NaN)."""

    folder.mkdir()
    LoadedTokenizer.from_document(tokenizer_doc(), "tiny")  # the document is valid
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_doc()), encoding="utf-8")
    data = bytearray(embeddings_file(256, 8))
    if nan_rows is not None:
        head = int.from_bytes(data[:8], "little") + 8
        emb = np.frombuffer(bytes(data[head:]), dtype=np.float32).reshape(2, 256, 8).copy()
        emb[:, nan_rows, :] = np.nan
        data[head:] = emb.tobytes()
    (folder / "model.safetensors").write_bytes(bytes(data))
    return folder


def test_all_nan_embeddings(cli, tmp_path):
    folder = _tiny_model(tmp_path / "m", slice(0, 256))
    assert_clear_error(cli("undertrained", "--model", folder), "NaN or infinite")


def test_some_nan_rows_are_a_visible_note_and_json_stays_strict(cli, tmp_path):
    folder = _tiny_model(tmp_path / "m", slice(10, 20))
    run = cli("undertrained", "--model", folder, "--json")
    assert run.rc == 0, run.err
    doc = strict_loads(run.out)
    assert any("10 rows give a NaN" in n for n in doc["notes"])
    assert not {c["id"] for c in doc["candidates"]} & set(range(10, 20))
    assert math.isfinite(doc["indicator_stats"]["mean"])
    csv = tmp_path / "health.csv"
    assert cli("undertrained", "--model", folder, "--csv", csv).rc == 0 and csv.stat().st_size > 0


# ============================================================================ atomic outputs
def _prune(cli, out: Path, *extra: str):
    return cli(
        "prune",
        "--tokenizer",
        GPT2,
        "--order",
        "last-n",
        "--n",
        "10",
        "--no-stt",
        "--no-robustness",
        "--out",
        out,
        *extra,
    )


def test_non_empty_out_is_refused_and_force_replaces_it_whole(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_text("stale model of an earlier run")
    assert_clear_error(_prune(cli, out), "not empty", "--force")
    assert tree(out) == {"model.safetensors": 29}  # untouched
    assert_clear_error(cli("extend", "--tokenizer", GPT2, "--text", GPT2 / "merges.txt", "--n", "5", "--out", out),
                       "not empty")  # fmt: skip
    run = _prune(cli, out, "--force")
    assert run.rc == 0, run.err
    assert sorted(tree(out)) == ["prune_report.json", "special_tokens_map.json", "tokenizer.json",
                                 "tokenizer_config.json"]  # fmt: skip
    assert strict_loads((out / "prune_report.json").read_text(encoding="utf-8"))["removed"] == 10
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary or old folder left beside it


@pytest.mark.slow
def test_killed_mid_write_leaves_no_folder(cli, tmp_path):
    """SIGKILL after the first file of the folder is written: the target never appears half-written."""
    script = tmp_path / "kill_after_first_file.py"
    script.write_text(
        "import os, signal, sys\n"
        "from analysis.tokenizer import export\n"
        "real = export.write_files\n"
        "def dying(folder, files):\n"
        "    first = dict(list(files.items())[:1])\n"
        "    real(folder, first)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "export.write_files = dying\n"
        "from analysis.commands import prune\n"
        "prune.write_files = dying\n"
        "from analysis.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    p = subprocess.run(
        [
            sys.executable,
            str(script),
            "prune",
            "--tokenizer",
            str(GPT2),
            "--order",
            "last-n",
            "--n",
            "10",
            "--no-stt",
            "--no-robustness",
            "--out",
            str(out),
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == -9, p.stderr[-2000:]
    assert not out.exists()  # only a hidden .out.*.partial folder may remain, never `out` itself
    assert all(q.name.startswith(".out.") for q in tmp_path.iterdir() if q.is_dir())
    assert _prune(cli, out).rc == 0  # the next run is not confused by the leftover
    assert "tokenizer.json" in tree(out)


# ============================================================================ the CLI's last-resort guard
@pytest.mark.parametrize("exc", ["oserror", "unicode", "memory", "recursion", "panic"])
def test_last_resort_guard_prints_one_error_line(cli, monkeypatch, exc):
    """Failures that slip past the precise checks still end as `error: …` (exit 2), never a traceback."""

    def boom(args):
        if exc == "oserror":
            raise OSError(28, "No space left on device", "/somewhere")
        if exc == "unicode":
            b"\xff".decode("utf-8")
        if exc == "memory":
            raise MemoryError
        if exc == "recursion":
            raise RecursionError

        tokenizers.Tokenizer.from_str(json.dumps(panic_merge_doc()))  # a Rust panic (PanicException)

    monkeypatch.setattr(inspect_command, "run", boom)
    assert_clear_error(cli("inspect", GPT2))


def test_upload_lines_are_bounded_and_strict():
    units, cut = upload_lines("a.txt", b"abcdefghij" * 10_000, max_chars=25_000)  # one line of 100,000
    assert cut and sum(len(u) for u in units) == 25_000
    units, cut = upload_lines("b.txt", b"tere\nmaailm\n")
    assert units == ["tere", "maailm"] and not cut
    with pytest.raises(DataError, match="not UTF-8"):
        upload_lines("c.txt", "õun".encode("latin-1"))


def test_side_by_side_views_refuse_a_100mb_paste():

    with pytest.raises(DataError, match="at most 1,000,000"):
        playground.compare_encodings([load_shared("gpt2")], "x" * 1_000_001)
    with pytest.raises(DataError, match="at most 1,000,000"):
        playground.pre_tokens(load_shared("gpt2"), "x" * 1_000_001)

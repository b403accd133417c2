"""Bad options and inputs of the commands that read files and folders (issue 54, items 6, 8, 12, 14, 16, 17): the
same `--langs` check everywhere, progress on stderr, a restart that deletes only what the tool wrote, bounds checked
before a library panics, and full disks reported."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time

import pytest
from bad_run import assert_clear_error, tree
from support import TOKENIZERS, flores_lines

from analysis.core import outputs
from analysis.core.outputs import atomic_folder, partial_prefix
from analysis.jobs.job import WORKDIR_MARKER

GPT2 = TOKENIZERS / "gpt2"

LANGS_COMMANDS = {
    "export-check": ["export-check", GPT2, "--no-parity"],
    "model-check": ["model-check", "--original", "a", "--edited", "b"],
    "parity-train": ["parity-train", "--vocab-size", "1000"],
    "compress": ["compress", "--tokenizer", GPT2],
}


@pytest.mark.parametrize("command", list(LANGS_COMMANDS))
@pytest.mark.parametrize("spec", [",,,", "xx_Yyyy"])
def test_every_langs_option_is_checked_the_same_way(cli, command, spec):
    assert_clear_error(cli(*LANGS_COMMANDS[command], "--langs", spec), "--langs: ")


def test_restart_clears_only_a_workdir_the_job_made(cli, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("tere maailm, see on väike tekst\n" * 50, encoding="utf-8")
    model = tmp_path / "model"  # a model folder given as --workdir by mistake
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "config.json").write_text("{}", encoding="utf-8")
    job = ["corpus-stats", "--stat", "pretokens", "--tokenizer", GPT2, "--text", text, "--executor", "local",
           "--workers", "1"]  # fmt: skip
    assert_clear_error(
        cli(*job, "--workdir", model, "--restart"), "not made by a corpus job", "nothing was deleted"
    )
    assert tree(model) == {"model.safetensors": 7, "config.json": 2}
    wd = tmp_path / "wd"
    assert cli(*job, "--workdir", wd).rc == 0 and (wd / WORKDIR_MARKER).is_file()
    run = cli(*job, "--workdir", wd, "--restart", "--json")
    assert run.rc == 0 and json.loads(run.out)["map_tasks_run"] == 1  # its own workdir: cleared and rerun


def test_corpus_stats_on_an_empty_text_says_so(cli, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    for stat in ("pretokens", "compression", "token-ids"):
        assert_clear_error(
            cli("corpus-stats", "--stat", stat, "--tokenizer", GPT2, "--text", empty), "the text is empty"
        )


def test_a_crashed_runs_partial_folders_are_cleaned_by_the_next_write(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = partial_prefix("out").split("@")[1].split("~")[0]
    names = {
        "crashed": f".out.@{host}~{dead.pid}@abcd1234.partial",  # its writer is gone
        "alive": partial_prefix("out") + "abcd1234.partial",  # this process: a write in progress
        "old": ".out.abcdefgh.partial",  # before the writer was recorded, two days old
        "young": ".out.hgfedcba.partial",  # the same, an hour old: maybe a run in progress
        "other output": ".out.v2.abcdefgh.partial",  # out.v2's, two days old
        "not a partial": ".out.notes",
    }
    for k, n in names.items():
        (tmp_path / n).mkdir()
        age = 3600 if k == "young" else 2 * 86400
        os.utime(tmp_path / n, (time.time() - age, time.time() - age))
    with atomic_folder(tmp_path / "out") as tmp:
        (tmp / "a.txt").write_text("a", encoding="utf-8")
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"out"} | {names[k] for k in ("alive", "young", "other output", "not a partial")}


def _flores(folder, **lines: list[str]):
    """A FLORES folder (devtest/LANG.devtest) holding the given lines."""
    (folder / "devtest").mkdir(parents=True)
    for lang, text in lines.items():
        (folder / "devtest" / f"{lang}.devtest").write_text("\n".join(text) + "\n", encoding="utf-8")
    return folder


def test_parity_train_checks_its_bounds_and_its_flores_folder(cli, tmp_path, monkeypatch):
    assert_clear_error(cli("parity-train", "--vocab-size", "1000000000"), "--vocab-size")
    eng, est = flores_lines("eng_Latn"), flores_lines("est_Latn")
    cases = {
        "few": ({"eng_Latn": eng[:50], "est_Latn": est[:50]}, "has 50 lines"),
        "not parallel": ({"eng_Latn": eng, "est_Latn": est[:900]}, "different numbers of lines"),
        "long line": (
            {"eng_Latn": eng, "est_Latn": est[:4] + ["x " * 5_000_000] + est[5:]},
            "line 5 is over",
        ),
    }
    for name, (lines, words) in cases.items():
        monkeypatch.setenv("TOKLAB_FLORES", str(_flores(tmp_path / name.replace(" ", "-"), **lines)))
        run = cli("parity-train", "--vocab-size", "300", "--langs", "eng_Latn,est_Latn", "--no-cache")
        assert_clear_error(run, words)


def test_parity_train_out_on_a_full_disk_fails(cli, tmp_path, monkeypatch):
    def full(fd: int) -> None:  # the lowest layer of every output write: ENOSPC as a file system reports it
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", full)
    run = cli(
        "parity-train", "--vocab-size", "300", "--langs", "eng_Latn,est_Latn", "--out", tmp_path / "out"
    )
    assert_clear_error(run, "No space left on device")
    assert tree(tmp_path) == {}  # no output, no partial folder


@pytest.mark.slow
def test_extend_with_a_model_on_a_full_disk_fails_clearly(cli, tmp_path, monkeypatch):
    import transformers  # noqa: PLC0415 - heavy, this test only
    from safetensors import SafetensorError  # noqa: PLC0415

    cfg = transformers.LlamaConfig(vocab_size=50257, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                   num_attention_heads=1, num_key_value_heads=1, tie_word_embeddings=True)  # fmt: skip
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(tmp_path / "model"), safe_serialization=True)
    text = tmp_path / "text.txt"
    text.write_text("\n".join(flores_lines("est_Latn", 50)) + "\n", encoding="utf-8")

    def full(*args, **kwargs) -> None:  # what safetensors raises when the disk fills while it writes
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No '
                              'space left on device" })')  # fmt: skip

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full)
    run = cli("extend", "--tokenizer", GPT2, "--model", tmp_path / "model", "--text", text, "--n", "5",
              "--out", tmp_path / "out")  # fmt: skip
    assert_clear_error(run, "No space left on device")
    assert not (tmp_path / "out").exists()

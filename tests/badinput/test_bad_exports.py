"""Broken export folders (issue 54, items 4 and 17): every JSON file an export holds is parsed or reported
unreadable, with or without --fix (which never overwrites what it could not read), and a chat_template.jinja that
is empty or not UTF-8 is a failed check in the CLI and in the page's Export check section, never a crash."""

from __future__ import annotations

import json
import shutil

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, TOKENIZERS, run_page_job

SMOL = TOKENIZERS / "smollm2-135m-instruct"


def _export(folder):
    """smollm2's tokenizer folder with a config.json and generation_config.json, as an export holds them."""
    shutil.copytree(SMOL, folder)
    (folder / "config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}), encoding="utf-8")
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2]}), encoding="utf-8")
    return folder


def _checks(cli, folder, *extra) -> tuple[bool, dict[str, dict]]:
    run = cli("export-check", folder, "--no-parity", "--json", *extra)
    assert run.rc == 0, run.err
    doc = json.loads(run.out)
    return doc["ok"], {c["name"]: c for c in doc["checks"]}


def test_a_sound_export_passes(cli, tmp_path):
    ok, checks = _checks(cli, _export(tmp_path / "export"))
    assert checks["json_files"]["status"] == "pass" and checks["json_files"]["data"]["files"] == [
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]  # fmt: skip


@pytest.mark.parametrize("fix", [(), ("--fix",)], ids=["check", "fix"])
@pytest.mark.parametrize("name", ["tokenizer_config.json", "config.json", "generation_config.json"])
def test_an_unreadable_json_file_fails_the_check_and_is_left_alone(cli, tmp_path, name, fix):
    folder = _export(tmp_path / "export")
    (folder / name).write_bytes(b'{"eos_token_id": [2,')
    ok, checks = _checks(cli, folder, *fix)
    assert not ok and checks["json_files"]["status"] == "fail"
    assert f"{name} is not valid JSON" in checks["json_files"]["detail"]
    assert (folder / name).read_bytes() == b'{"eos_token_id": [2,'


def test_a_config_that_is_not_an_object_fails(cli, tmp_path):
    folder = _export(tmp_path / "export")
    (folder / "special_tokens_map.json").write_text("[1, 2]", encoding="utf-8")
    ok, checks = _checks(cli, folder)
    assert not ok and "special_tokens_map.json holds a JSON list" in checks["json_files"]["detail"]


def test_an_empty_chat_template_is_not_copied_inline_by_fix(cli, tmp_path):
    folder = _export(tmp_path / "export")
    (folder / "chat_template.jinja").write_bytes(b"")
    before = json.loads((folder / "tokenizer_config.json").read_bytes()).get("chat_template")
    ok, checks = _checks(cli, folder, "--fix")
    assert (
        not ok
        and checks["chat_template"]["status"] == "fail"
        and "empty" in checks["chat_template"]["detail"]
    )
    assert json.loads((folder / "tokenizer_config.json").read_bytes()).get("chat_template") == before


def test_a_chat_template_that_is_not_utf8_fails_in_the_cli(cli, tmp_path):
    folder = _export(tmp_path / "export")
    (folder / "chat_template.jinja").write_bytes(b"{{ '\xff\xfe' }}")
    ok, checks = _checks(cli, folder, "--fix")
    assert not ok and "not UTF-8" in checks["chat_template"]["detail"]


def test_the_export_check_section_shows_a_bad_template_and_bad_json_as_messages(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(tmp_path))
    folder = _export(tmp_path / "export")
    (folder / "chat_template.jinja").write_bytes(b"{{ '\xff' }}")
    (folder / "config.json").write_bytes(b"")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/inspect.py").run()
    at.checkbox(key="inspect-check-parity").uncheck()
    at.text_input(key="inspect-check-path").set_value(str(folder)).run()
    at.button(key="inspect-check-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    run_page_job(at, "inspect-check-job")  # a worker's run, here in this process
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    shown = " ".join(e.value for e in at.error)
    assert "NOT ok" in shown and "not UTF-8" in shown and "config.json is not valid JSON" in shown
    assert "bug" not in shown

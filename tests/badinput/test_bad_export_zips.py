"""The export check's job side (analysis.views.export_check): the export zip a page hands to the worker is unpacked
only when every member is safe and the whole fits the cap, checked before anything is written."""

from __future__ import annotations

import pytest
from bad_files import zip_of

from analysis.errors import DataError
from analysis.jobs.kinds import job_function
from analysis.views import export_check as ec


def test_an_export_zip_unpacks_to_its_one_folder(tmp_path):
    got = ec.unpack_export_zip(
        zip_of({"export/tokenizer.json": b"{}", "export/config.json": b"{}"}), tmp_path
    )
    assert got == tmp_path / "export" and sorted(p.name for p in got.iterdir()) == [
        "config.json",
        "tokenizer.json",
    ]
    flat = ec.unpack_export_zip(zip_of({"tokenizer.json": b"{}"}), tmp_path / "flat")
    assert flat == tmp_path / "flat" and (flat / "tokenizer.json").is_file()


@pytest.mark.parametrize("name", ["../evil.json", "/abs/evil.json", "export/../../evil.json"])
def test_an_unsafe_member_is_refused_before_anything_is_written(tmp_path, name):
    data = zip_of({"export/tokenizer.json": b"{}", name: b"x"})
    with pytest.raises(DataError, match="unsafe name"):
        ec.unpack_export_zip(data, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil.json").exists()


def test_a_large_or_broken_export_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(ec, "MAX_UNPACKED", 10)
    with pytest.raises(DataError, match="too large"):
        ec.unpack_export_zip(zip_of({"export/tokenizer.json": b"x" * 11}), tmp_path)
    with pytest.raises(DataError, match="not a zip"):
        ec.unpack_export_zip(b"PK but not a zip", tmp_path)
    assert job_function("export-check") is ec.export_check_job

"""FLORES data: the shared devtest folder, archives, parquet, aliases, metadata and clear errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from support import FLORES, TOKENIZERS

from analysis.errors import DataError
from analysis.texts import flores as fl


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))


def test_shared_devtest_has_204_languages_of_1012_lines():
    data = fl.open_flores(FLORES)
    assert len(data.codes) == 204
    assert data.kind == "text" and data.split == "devtest"
    for code in ("eng_Latn", "est_Latn", "zho_Hans", "tha_Thai"):
        assert len(data.lines(code)) == 1012
    assert data.lines("eng_Latn")[0].startswith('"We now have 4-month-old mice')


def test_aliases_both_ways():
    data = fl.open_flores(FLORES)
    assert data.resolve("ekk_Latn") == "est_Latn"
    assert data.resolve("cmn_Hani") == "zho_Hans"
    assert data.resolve("cmn_Hant") == "zho_Hant"  # from the data folder's aliases.tsv
    assert data.resolve("fas_Arab") == "pes_Arab"
    assert data.lines("ekk_Latn") == data.lines("est_Latn")
    assert data.data_hash("ekk_Latn") == data.data_hash("est_Latn")
    assert data.resolve_many("eng_Latn, ekk_Latn,est_Latn") == ["eng_Latn", "est_Latn"]
    assert data.resolve_many("all") == data.codes


def test_unknown_codes_give_clear_errors():
    data = fl.open_flores(FLORES)
    with pytest.raises(DataError, match="did you mean est_Latn"):
        data.resolve("est_Cyrl")
    with pytest.raises(DataError, match="not a FLORES language code"):
        data.resolve("estonian")
    with pytest.raises(DataError, match="no languages"):
        data.resolve_many(" , ")


def test_metadata_for_every_code():
    langs = fl.languages()
    data = fl.open_flores(FLORES)
    assert set(langs) == set(data.codes)
    for code, m in langs.items():
        assert m.name and m.family and m.script == code.split("_")[1], code
    assert langs["est_Latn"].family == "Uralic" and langs["est_Latn"].name == "Estonian"
    assert langs["zho_Hans"].script_group == "Hani" and langs["zho_Hans"].spaceless
    assert langs["eng_Latn"].family == "Indo-European" and not langs["eng_Latn"].spaceless
    assert fl.language("ekk_Latn").code == "est_Latn"
    # the spaceless flag agrees with the data (long whitespace "words")
    for code, m in langs.items():
        lines = data.lines(code)
        cpw = sum(map(len, lines)) / sum(len(s.split()) for s in lines)
        assert m.spaceless == (cpw > 12), (code, cpw)


def _make_tree(root, codes=("eng_Latn", "est_Latn"), n=3):
    d = root / "flores200_dataset" / "devtest"
    d.mkdir(parents=True)
    for c in codes:
        (d / f"{c}.devtest").write_text(
            "\n".join(f"{c} sentence {i}" for i in range(n)) + "\n", encoding="utf-8"
        )
    return root


def test_official_layout_and_targz(tmp_path):
    tree = _make_tree(tmp_path / "tree")
    data = fl.open_flores(tree)
    assert data.codes == ["eng_Latn", "est_Latn"] and data.lines("ekk_Latn")[2] == "est_Latn sentence 2"
    archive = tmp_path / "flores200_dataset.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(tree / "flores200_dataset", arcname="flores200_dataset")
    data2 = fl.open_flores(archive)
    assert data2.codes == ["eng_Latn", "est_Latn"]
    assert data2.lines("eng_Latn") == data.lines("eng_Latn")
    assert data2.data_hash("eng_Latn") == data.data_hash("eng_Latn")


def test_download_official_from_a_file_url_with_progress(tmp_path):
    tree = _make_tree(tmp_path / "tree", codes=("eng_Latn", "fra_Latn"))
    archive = tmp_path / "src" / "flores200_dataset.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(tree / "flores200_dataset", arcname="flores200_dataset")
    seen = []
    folder = fl.download_official(
        archive.as_uri(), progress=lambda done, total, message="": seen.append(done)
    )
    assert seen and seen[-1] == archive.stat().st_size
    assert fl.open_flores(folder).codes == ["eng_Latn", "fra_Latn"]


def test_download_offline_is_a_clear_error():
    with pytest.raises(DataError, match="could not download"):
        fl.download_official("http://127.0.0.1:9/flores200_dataset.tar.gz", timeout=2)


def test_bad_sources(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        fl.open_flores(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no FLORES 'devtest' files"):
        fl.open_flores(tmp_path / "empty")
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not an archive")
    with pytest.raises(DataError, match="not a readable"):
        fl.open_flores(bad)
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tf:
        info = tarfile.TarInfo("../escape.devtest")
        payload = b"x\n"
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    with pytest.raises(DataError):
        fl.open_flores(evil)
    assert not (tmp_path / "cache" / "escape.devtest").exists()


def _tar(path, entries):
    with tarfile.open(path, "w:gz") as tf:
        for info, payload in entries:
            tf.addfile(info, io.BytesIO(payload) if payload is not None else None)
    return path


def _file(name, payload=b"x\n"):
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    return info, payload


def test_extraction_keeps_plain_files_only_and_checks_sizes_first(tmp_path, monkeypatch):
    link = tarfile.TarInfo("flores200_dataset/devtest/link.devtest")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    fifo = tarfile.TarInfo("flores200_dataset/devtest/pipe.devtest")
    fifo.type = tarfile.FIFOTYPE
    mode = _file("flores200_dataset/devtest/eng_Latn.devtest", b"a\nb\n")
    mode[0].mode, mode[0].uid = 0o4777, 12345
    folder = fl.extract_archive(_tar(tmp_path / "ok.tar.gz", [mode, (link, None), (fifo, None)]))
    got = sorted(p.name for p in (folder / "flores200_dataset" / "devtest").iterdir())
    assert got == ["eng_Latn.devtest"]  # the link and the FIFO are not written
    out = folder / "flores200_dataset" / "devtest" / "eng_Latn.devtest"
    assert out.read_bytes() == b"a\nb\n" and not out.stat().st_mode & 0o4000  # no setuid from the archive
    with pytest.raises(DataError, match="outside its folder"):
        fl.extract_archive(_tar(tmp_path / "abs.tar.gz", [_file("/tmp/abs.devtest")]))
    monkeypatch.setattr(fl, "MAX_ARCHIVE_BYTES", 10)
    big = _tar(tmp_path / "big.tar.gz", [_file("d/a.devtest", b"x" * 6), _file("d/b.devtest", b"y" * 6)])
    with pytest.raises(DataError, match="unpacks to more than"):
        fl.extract_archive(big)
    assert not any(p.name.startswith("extract-") for p in fl.flores_cache_dir().iterdir() if p.is_dir()
                   and (p / "d").exists())  # fmt: skip


def test_env_var_default(tmp_path, monkeypatch):
    tree = _make_tree(tmp_path / "tree", codes=("deu_Latn",))
    monkeypatch.setenv("TOKLAB_FLORES", str(tree))
    assert fl.default_flores_path() == tree
    assert fl.open_flores(None).codes == ["deu_Latn"]


@pytest.mark.skipif(not fl.parquet_available(), reason="pyarrow not installed")
def test_flores_plus_parquet_layouts(tmp_path):
    d = tmp_path / "plus" / "devtest"
    d.mkdir(parents=True)
    for code in ("eng_Latn", "ekk_Latn", "cmn_Hans"):
        lang, script = code.split("_")
        pd.DataFrame(
            {
                "id": [0, 1],
                "iso_639_3": [lang] * 2,
                "iso_15924": [script] * 2,
                "text": [f"{code} a", f"{code} b"],
            }
        ).to_parquet(d / f"{code}.parquet")
    data = fl.open_flores(tmp_path / "plus")
    assert data.kind == "parquet"
    assert data.codes == ["eng_Latn", "est_Latn", "zho_Hans"]
    assert data.lines("ekk_Latn") == ["ekk_Latn a", "ekk_Latn b"]
    assert data.lines("cmn_Hani") == ["cmn_Hans a", "cmn_Hans b"]
    # one multi-language parquet file
    multi = tmp_path / "multi" / "devtest-00000.parquet"
    multi.parent.mkdir()
    pd.DataFrame(
        {"iso_639_3": ["eng", "eng", "ekk"], "iso_15924": ["Latn"] * 3, "text": ["e1", "e2", "x1"]}
    ).to_parquet(multi)
    data2 = fl.open_flores(tmp_path / "multi")
    assert data2.codes == ["eng_Latn", "est_Latn"]
    assert data2.lines("eng_Latn") == ["e1", "e2"] and data2.lines("est_Latn") == ["x1"]


def test_flores_plus_jsonl_layout(tmp_path):
    d = tmp_path / "plus" / "devtest"
    d.mkdir(parents=True)
    for code in ("eng_Latn", "ekk_Latn"):
        recs = [
            {"id": i, "iso_639_3": code[:3], "iso_15924": "Latn", "text": f"{code} {i}"} for i in range(3)
        ]
        (d / f"{code}.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    data = fl.open_flores(tmp_path / "plus")
    assert data.kind == "jsonl" and data.codes == ["eng_Latn", "est_Latn"]
    assert data.lines("ekk_Latn") == ["ekk_Latn 0", "ekk_Latn 1", "ekk_Latn 2"]
    (d / "eng_Latn.jsonl").write_text("{broken\n", encoding="utf-8")
    fresh = fl.open_flores(tmp_path / "plus" / "devtest")
    with pytest.raises(DataError, match="not a JSON line"):
        fresh.lines("eng_Latn")


def test_hub_download_offline_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network either way: offline mode or an unreachable hub
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    pytest.importorskip("huggingface_hub")
    if not fl.parquet_available():
        with pytest.raises(DataError, match="pyarrow"):
            fl.download_flores_plus()
        return
    seen = []
    with pytest.raises(DataError, match="could not fetch openlanguagedata/flores_plus"):
        fl.download_flores_plus(progress=lambda done, total, message="": seen.append(done))


@pytest.mark.slow
def test_every_command_reads_flores_from_toklab_flores_when_assets_have_none(tmp_path):
    """One FLORES access: `compress` and `dynamic --flores` follow TOKLAB_FLORES when the shared assets have no
    FLORES, as every page does (analysis.texts.flores.default_flores_path)."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "assets").mkdir()
    env = dict(
        os.environ, TOKLAB_ASSETS=str(tmp_path / "assets"), TOKLAB_FLORES=str(FLORES), HF_HUB_OFFLINE="1"
    )
    env["TOKLAB_CACHE"] = str(tmp_path / "cache")
    gpt2 = str(TOKENIZERS / "gpt2")
    for args in (
        ["compress", "--tokenizer", gpt2, "--langs", "est_Latn", "--json"],
        ["dynamic", gpt2, "--flores", "est_Latn", "--n", "4", "--merges", "3", "--json"],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "analysis", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)
    env.pop("TOKLAB_FLORES")
    out = subprocess.run(
        [sys.executable, "-m", "analysis", "dynamic", gpt2, "--flores", "est_Latn", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.startswith("error: no FLORES data configured")

"""Model uploads (`analysis.model.upload`): a .gguf, a zipped Hugging Face folder or a folder's files become a model
source under the data folder, once per content; zip slip, links, oversized zips, pickles and files that are not a
model are refused with a clear message; the operator's model library lists models by name; an unpacked upload is
part of its workspace's storage (charged, removed with the upload or the workspace, pruned once orphaned)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import time
import zipfile
from pathlib import Path

import pytest

from analysis.cli import main
from analysis.core import workspace as wsm
from analysis.core.workspace import WorkspaceStore
from analysis.core.workspace_unpacked import GRACE_SECONDS
from analysis.errors import DataError
from analysis.model.source import library_models, resolve_model
from analysis.model.upload import check_model_names, file_digest, pack_model_files, unpack_model


def _safetensors(path: Path) -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    return path


def _folder(tmp_path: Path) -> list[tuple[str, Path]]:
    d = tmp_path / "src"
    d.mkdir(exist_ok=True)
    _safetensors(d / "model.safetensors")
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (d / "tokenizer.json").write_text("{}")
    return [(p.name, p) for p in sorted(d.iterdir())]


def _zip(path: Path, members: dict[str, bytes], links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return path


def test_a_folders_files_are_packed_and_unpacked_once_by_content(tmp_path):
    packed = pack_model_files(_folder(tmp_path), tmp_path / "smol.zip")
    source = unpack_model(packed, "smol.zip", root=tmp_path / "data")
    src = resolve_model(source)
    assert src.kind == "safetensors" and (src.folder / "config.json").is_file()
    assert (src.folder / "tokenizer.json").is_file()
    assert source.parent.parent == tmp_path / "data" / "models"  # <data>/models/<sha256>/smol
    assert (
        unpack_model(packed, "again.zip", root=tmp_path / "data") == source
    )  # the same content: no new folder


def test_a_zipped_folder_nested_one_level_and_a_gguf_unpack(tmp_path):
    files = {f"smol/{n}": p.read_bytes() for n, p in _folder(tmp_path)}
    files["smol/README.md"] = b"skipped"
    source = unpack_model(_zip(tmp_path / "m.zip", files), "m.zip", root=tmp_path / "data")
    assert source.name == "smol" and not (source / "README.md").exists()
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    out = unpack_model(gguf, "tiny.gguf", root=tmp_path / "data")
    assert out.name == "tiny.gguf" and out.read_bytes() == gguf.read_bytes()


@pytest.mark.parametrize(
    ("members", "links", "message"),
    [
        ({"../evil/config.json": b"{}"}, (), "'..' path"),
        ({"/abs/config.json": b"{}"}, (), "absolute"),
        ({"config.json": b"{}"}, ("model.safetensors",), "symbolic link"),
        ({"config.json": b"{}", "pytorch_model.bin": b"x"}, (), "PyTorch pickles"),
        ({"config.json": b"{}", "notes.md": b"x"}, (), "holds no model"),
        ({"config.json": b"[1]", "model.safetensors": b"\x08" + bytes(7) + b"{}"}, (), "corrupt safetensors"),
    ],
)
def test_unsafe_or_unusable_zips_are_refused(tmp_path, members, links, message):
    z = _zip(tmp_path / "bad.zip", members, links)
    with pytest.raises(DataError, match=message):
        unpack_model(z, "bad.zip", root=tmp_path / "data")
    assert not [p for p in (tmp_path / "data" / "models").glob("*") if not p.name.startswith(".")]


def test_sizes_are_capped_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_MODEL_UPLOAD_MB", "0.01")  # 10 kB upload, 20 kB unzipped
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.safetensors", bytes(40_000))  # compresses to well under the upload cap
        zf.writestr("config.json", b"{}")
    with pytest.raises(DataError, match="expands to"):
        unpack_model(z, "bomb.zip", root=tmp_path / "data")
    big = tmp_path / "big.gguf"
    big.write_bytes(b"GGUF" + bytes(20_000))
    with pytest.raises(DataError, match="over the"):
        unpack_model(big, "big.gguf", root=tmp_path / "data")
    assert not (tmp_path / "data" / "models").exists() or not any((tmp_path / "data" / "models").iterdir())


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["model.pt"], "PyTorch pickles"),
        (["model.safetensors"], "config.json"),
        (["m.gguf", "config.json"], "on its own"),
        (["weights.h5"], "not a model file"),
    ],
)
def test_upload_names_that_are_not_one_model_are_refused(names, message):
    with pytest.raises(DataError, match=message):
        check_model_names(names)


def test_a_file_named_gguf_that_is_not_one_is_refused(tmp_path):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"PK\x03\x04" + bytes(20))
    with pytest.raises(DataError, match="not a GGUF"):
        unpack_model(fake, "fake.gguf", root=tmp_path / "data")


def test_the_model_library_offers_weights_by_name(tmp_path):
    lib = tmp_path / "lib"
    (lib / "smol").mkdir(parents=True)
    _safetensors(lib / "smol" / "model.safetensors")
    (lib / "pickled").mkdir()
    (lib / "pickled" / "pytorch_model.bin").write_bytes(b"x")
    (lib / "tiny.gguf").write_bytes(b"GGUF")
    (lib / "notes.txt").write_text("x")
    assert library_models(lib) == {"smol": lib / "smol", "tiny.gguf": lib / "tiny.gguf"}
    assert library_models(None) == {} and library_models(tmp_path / "missing") == {}


def test_an_unpacked_upload_is_part_of_its_workspaces_storage(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    monkeypatch.setenv("TOKLAB_DATA", str(data))
    monkeypatch.setenv("TOKLAB_WORKSPACE_IDLE_DAYS", "7")
    store = WorkspaceStore(data)
    packed = pack_model_files(_folder(tmp_path), tmp_path / "smol.zip")
    digest, folder = file_digest(packed), store.unpacked_path(file_digest(packed))

    def upload(ws: str, original: Path = packed, name: str = "smol.zip") -> wsm.Item:
        """As `ui.model_uploads.store_upload`: unpacked first, then moved into the store."""
        src = tmp_path / "upload"
        shutil.copyfile(original, src)
        unpack_model(src, name, digest=file_digest(src), root=data)
        return store.put_file(ws, "artifact", name, {"role": "model"}, src, move=True)

    def idle(ws: str) -> None:
        with store._tx() as c:
            c.execute(
                "UPDATE workspaces SET used = ? WHERE key = ?", (time.time() - 10 * 86400, wsm._key(ws))
            )

    ws = store.create()
    item = upload(ws)
    unpacked = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    assert folder.is_dir() and unpacked > 0
    # charged for the zip and for what it unpacked to
    assert item.size >= packed.stat().st_size + unpacked and store.usage(ws).bytes == item.size
    assert store.total_bytes() >= packed.stat().st_size + unpacked
    # a .gguf is linked into its folder, not copied: charged once
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(4000))
    assert upload(ws, gguf, "tiny.gguf").size < 2 * 4004
    # the upload removed from the Files list: its folder goes
    assert store.remove(ws, "artifact", "smol.zip") and not folder.exists()
    # the workspace deleted, expired (opened after its idle time) or pruned: its folders go
    upload(ws)
    store.delete(ws)
    assert not folder.exists() and not list(store.unpacked.iterdir())
    ws = store.create()
    upload(ws)
    idle(ws)
    assert store.open(ws)[0] != ws and not folder.exists()
    ws, keep = store.create(), store.create()
    upload(ws)
    upload(keep, gguf, "tiny.gguf")
    idle(ws)
    assert main(["workspaces", "prune"]) == 0
    assert "removed 1 workspace(s)" in capsys.readouterr().out and not folder.exists()
    kept = store.unpacked_path(file_digest(gguf))
    assert kept.is_dir()
    # a folder whose upload is gone (refused after unpacking, a crash) and an unpacking's leftovers: pruned once
    # past the grace period; the folder of a stored upload stays
    unpack_model(packed, "smol.zip", digest=digest, root=data)
    staging = store.unpacked / f".{digest}.99999.partial"
    staging.mkdir()
    assert store.orphan_unpacked() == []  # young: maybe an upload on its way into the store
    old = time.time() - 2 * GRACE_SECONDS
    for p in (folder, staging, kept):
        os.utime(p, (old, old))
    assert main(["workspaces", "prune", "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unpacked_removed"] == 2 and report["unpacked_bytes"] >= unpacked and folder.exists()
    assert main(["workspaces", "prune"]) == 0
    assert "2 unpacked model folder(s) without an upload" in capsys.readouterr().out
    assert not folder.exists() and not staging.exists() and kept.is_dir()
    assert resolve_model(kept / "tiny.gguf").kind == "gguf"

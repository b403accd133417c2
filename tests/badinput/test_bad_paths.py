"""Server-side paths named by a browser (`analysis.core.paths.confine`): off by default; when the operator allows them,
only inside the configured roots (symlinks resolved, `..` refused), and exports only to a new folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analysis.core import paths
from analysis.core.paths import ServerPathError, confine


@pytest.fixture
def roots(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """(allowed root, a folder outside it holding a planted secret) with server paths switched on."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET=1")
    (allowed / "corpus").mkdir()
    (allowed / "corpus" / "a.txt").write_text("tere")
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(allowed))
    return allowed, outside


def test_off_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    assert not paths.server_paths_enabled()
    with pytest.raises(ServerPathError, match="switched off"):
        confine(tmp_path)


def test_inside_the_roots(roots):
    allowed, _ = roots
    assert confine(allowed / "corpus") == (allowed / "corpus").resolve()
    assert (
        confine("corpus/a.txt") == (allowed / "corpus" / "a.txt").resolve()
    )  # relative: under the first root
    assert confine(allowed / "new-export", write=True) == (allowed / "new-export").resolve()


@pytest.mark.parametrize("case", ["outside", "dotdot", "link-out", "folder-with-link-out", "nul", "long",
                                  "missing", "root-of-fs"])  # fmt: skip
def test_refused_reads(roots, case):
    allowed, outside = roots
    if case == "link-out":
        (allowed / "innocent.txt").symlink_to(outside / "secret.txt")
    if case == "folder-with-link-out":
        (allowed / "corpus" / "b.txt").symlink_to(outside / "secret.txt")
    raw = {
        "outside": str(outside / "secret.txt"),
        "dotdot": str(allowed / ".." / "outside" / "secret.txt"),
        "link-out": str(allowed / "innocent.txt"),
        "folder-with-link-out": str(allowed / "corpus"),
        "nul": str(allowed) + "/a\x00b",
        "long": str(allowed) + "/" + "x" * 5000,
        "missing": str(allowed / "nope"),
        "root-of-fs": "/",
    }[case]
    with pytest.raises(ServerPathError):
        confine(raw)


@pytest.mark.parametrize("case", ["existing-empty", "existing-full", "outside", "no-parent", "link"])
def test_refused_writes(roots, case):
    allowed, outside = roots
    target = {
        "existing-empty": allowed / "out",
        "existing-full": allowed / "corpus",
        "outside": outside / "out",
        "no-parent": allowed / "a" / "b" / "out",
        "link": allowed / "dangling",
    }[case]
    if case == "existing-empty":
        target.mkdir()
    if case == "link":
        target.symlink_to(outside / "planted")
    with pytest.raises(ServerPathError):
        confine(target, write=True)
    assert not (outside / "out").exists() and not (outside / "planted").exists()


def test_roots_default_to_home_and_split_on_pathsep(monkeypatch, tmp_path):
    monkeypatch.delenv("TOKLAB_SERVER_ROOTS", raising=False)
    assert paths.server_roots() == [Path.home().resolve()]
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    assert paths.server_roots() == [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]

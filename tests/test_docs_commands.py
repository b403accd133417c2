"""Every command the README and docs/ show runs as written from the repository root, after the install command.

A ```bash block is run with bash (`set -e`, so every line must succeed) in the repository root, with the shared
assets in TOKLAB_ASSETS and TMPDIR in a fresh folder. Every block starts CLI processes (2–10 s each, the imports
alone take 1–2 s), so every block runs in the slow lane; `# slow` on a block's first line tells the reader that it takes
a minute or so (a model, a full sweep).
A ```sh block starts a server or needs a cluster or GPUs: it is not run, but it must say so (`# starts …` or
`# needs: …`). Every shell line in either kind uses the project's interpreter (`.venv/bin/python`), never a bare
`python`, which fails in a fresh shell with "No module named 'tokenizers'"."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from support import ASSETS, ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
BARE_PYTHON = re.compile(r"(?<![\w/.-])python3?\s")


def blocks(kind: str) -> list[tuple[str, int, str]]:
    """(file, block number, text) of every fenced block of this kind in the README and docs/."""
    out = []
    for path in DOCS:
        for n, m in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8")), 1):
            if m.group(1) == kind:
                out.append((str(path.relative_to(ROOT)), n, m.group(2)))
    return out


def _params(slow: bool) -> list:
    return [
        pytest.param(text, id=f"{name}#{n}", marks=[pytest.mark.slow])
        for name, n, text in blocks("bash")
        if text.startswith("# slow") == slow
    ]


def _run(text: str, tmp_path: Path) -> None:
    env = dict(os.environ, TOKLAB_ASSETS=str(ASSETS), TMPDIR=str(tmp_path), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        ["bash", "-e", "-c", text], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{text}\n--- stderr ---\n{done.stderr[-3000:]}"


def test_the_docs_show_commands():
    """The extraction finds the examples (a renamed fence would silently skip them)."""
    assert len(blocks("bash")) >= 8 and any("README.md" == name for name, _, _ in blocks("bash"))
    assert any(text.startswith("# slow") for _, _, text in blocks("bash"))


@pytest.mark.parametrize("text", _params(slow=False))
def test_fast_doc_commands_run(text: str, tmp_path: Path) -> None:
    _run(text, tmp_path)


@pytest.mark.parametrize("text", _params(slow=True))
def test_slow_doc_commands_run(text: str, tmp_path: Path) -> None:
    _run(text, tmp_path)


def test_blocks_that_are_not_run_say_why():
    for name, n, text in blocks("sh"):
        assert re.match(r"# (starts|needs:)", text), f"{name} block {n}: say what it starts or needs"


def test_every_shown_command_uses_the_project_interpreter():
    bad = [
        f"{name} block {n}: {line.strip()}"
        for kind in ("bash", "sh")
        for name, n, text in blocks(kind)
        for line in text.splitlines()
        if not line.lstrip().startswith("#") and BARE_PYTHON.search(line.split("#")[0])
    ]
    assert not bad, bad
    assert BARE_PYTHON.search("python -m analysis inspect x") and not BARE_PYTHON.search(
        ".venv/bin/python -m x"
    )


def test_docs_and_readme_show_no_placeholder_tokenizer():
    """Examples name real files (the shared assets, the bundled default), not `T` / `M` placeholders."""
    bad = [
        f"{name} block {n}: {line.strip()}"
        for kind in ("bash", "sh")
        for name, n, text in blocks(kind)
        for line in text.splitlines()
        if re.search(r"--(tokenizer|model) [A-Z]\b|\bTOKENIZER\b", line)
    ]
    assert not bad, bad


def test_the_readme_is_a_front_door():
    """The README stays short (≤ 200 lines, ≤ 16,000 characters): details go to docs/, measured figures to
    bench/results/ and the generated docs/results.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200 and len(text) <= 16_000, (len(text.splitlines()), len(text))

"""The command line that reproduces a page's result: one builder per change operation (extend, prune, reuse,
sabpe, dynamic, transplant), each fed the parameters the page used, so that the page shows one copyable command
and ``python -m analysis …`` prints the same numbers.

Paths never show the server's layout: a file in the shared assets is written ``$TOKLAB_ASSETS/…`` (the shell
expands it where the assets are configured), any other server file by its name unless the operator allows server
paths (:func:`analysis.core.paths.shown_path`); an upload or an edit made in the app is named by its file name
with a note saying which file to give. :func:`argv_of` turns a shown command back into the CLI's argv (the tests
run it through :func:`analysis.cli.main`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.core import paths
from analysis.texts.corpora import Source

#: How a command names the shared assets folder (expanded by the shell).
ASSETS_VAR = "$TOKLAB_ASSETS"
#: The program every command starts with.
PROGRAM = ("python", "-m", "analysis")


@dataclass
class Equivalent:
    """One command line: its arguments after ``python -m analysis`` and notes on the files it names."""

    argv: list[str]
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The shell line (``$TOKLAB_ASSETS/…`` left for the shell to expand, everything else quoted)."""
        return " ".join([*PROGRAM, *(_quote(a) for a in self.argv)])

    def plus(self, *args: str) -> Equivalent:
        """The same command with more arguments (before ``--json``)."""
        head = self.argv[:-1] if self.argv[-1:] == ["--json"] else self.argv
        return Equivalent([*head, *args, *self.argv[len(head) :]], list(self.notes))

    def caption(self) -> str:
        """The sentence shown above the command: what it reproduces, and the notes on its files."""
        return " ".join(["The same from the command line (it prints this page's numbers):", *self.notes])


def _quote(arg: str) -> str:
    if arg.startswith(ASSETS_VAR + "/"):
        rest = arg[len(ASSETS_VAR) :]
        return ASSETS_VAR + rest if shlex.quote(rest) == rest else '"' + ASSETS_VAR + _dq(rest) + '"'
    return shlex.quote(arg)


def _dq(s: str) -> str:
    return "".join("\\" + c if c in '"\\`$' else c for c in s)


def argv_of(command: str, assets: str | os.PathLike | None = None) -> list[str]:
    """The CLI argv of a shown command line (without ``python -m analysis``), ``$TOKLAB_ASSETS`` replaced by
    `assets` (default: the configured shared assets)."""
    words = shlex.split(command)
    if tuple(words[: len(PROGRAM)]) == PROGRAM:
        words = words[len(PROGRAM) :]
    base = os.fspath(assets if assets is not None else paths.shared_assets())
    return [base + w[len(ASSETS_VAR) :] if w.startswith(ASSETS_VAR + "/") else w for w in words]


def file_arg(path: str | os.PathLike, what: str = "file") -> tuple[str, str | None]:
    """A server file as a command names it: ``$TOKLAB_ASSETS/…`` inside the shared assets, the whole path when the
    operator allows server paths, else its name with a note."""
    p = Path(path)
    if p.is_absolute():
        try:
            return f"{ASSETS_VAR}/{p.resolve().relative_to(paths.shared_assets()).as_posix()}", None
        except ValueError:
            pass
    shown = paths.shown_path(p)
    if shown == os.fspath(p):
        return shown, None
    return shown, f"`{shown}` is a {what} on the server: give your copy's path."


def upload_arg(name: str) -> tuple[str, str]:
    """An uploaded file as a command names it: its file name, with a note."""
    return name, f"`{name}` is the file you uploaded: give its path on your machine."


def tokenizer_arg(tok: Any) -> tuple[str, str | None]:
    """A loaded tokenizer as a command names it (``--tokenizer``): a hub id, a shared or server folder, an upload
    by its name; an edit made in the app or the embedded default by the name of the folder to download."""
    src = str(getattr(tok, "source", "") or "")
    name = getattr(tok, "name", "tokenizer")
    if src.startswith("hub:"):
        return src[4:], None
    if src.startswith("upload:"):
        return upload_arg(src[7:] if src[7:] not in ("", "library") else name)
    if src.startswith("edited:") or src == "embedded" or not src:
        folder = str(name).replace(" ", "_")
        return folder, f"`{folder}` is the tokenizer {name!r} made here: download it and give its folder."
    return file_arg(src.removeprefix("path:"), "tokenizer")


class _Builder:
    """Collects arguments and their notes."""

    def __init__(self, command: str) -> None:
        self.argv: list[str] = [command]
        self.notes: list[str] = []

    def add(self, *args: Any) -> _Builder:
        self.argv.extend(str(a) for a in args)
        return self

    def note(self, pair: tuple[str, str | None], flag: str | None) -> _Builder:
        arg, note = pair
        self.argv.extend((flag, arg) if flag else (arg,))
        if note and note not in self.notes:
            self.notes.append(note)
        return self

    def repeat(self, flag: str, values: Iterable[Any]) -> _Builder:
        for v in values:
            self.argv.extend((flag, str(v)))
        return self

    def build(self, json: bool = True) -> Equivalent:
        return Equivalent(self.argv + (["--json"] if json else []), self.notes)


# --------------------------------------------------------------------------------------------------
# One builder per operation
# --------------------------------------------------------------------------------------------------
def _training_text(b: _Builder, sources: Sequence[Source]) -> None:
    """The training text's sources as `extend`/`reuse` read them, in the same order: FLORES training lines
    (``--flores``), files and folders, uploads by name (``--text``)."""
    for s in sources:
        if s.kind == "flores-train":
            b.add("--flores", s.ref.partition(":")[0])
        elif s.kind in ("file", "folder"):
            b.note(file_arg(s.ref, "text file" if s.kind == "file" else "folder"), "--text")
        elif s.kind == "bytes":
            b.note(upload_arg(s.ref), "--text")
        else:
            b.note((s.label, f"`{s.label}` has no command-line form here: give it as a file."), "--text")


def extend_command(
    tok: Any,
    *,
    method: str,
    n: int,
    sources: Sequence[Source],
    max_chars: int | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    heldout_flores: Sequence[str] = (),
    parity_variant: str | None = None,
) -> Equivalent:
    """``extend``: the method at N, the training text in the page's order (FLORES training lines, files,
    uploads), its character budget and the held-out FLORES languages; with `parity_variant`, the parity-aware
    auxiliary against the plain one (``--parity``)."""
    b = _Builder("extend").note(tokenizer_arg(tok), "--tokenizer").add("--method", method, "--n", n)
    _training_text(b, sources)
    if max_chars is not None:
        b.add("--max-chars", max_chars)
    if min_frequency:
        b.add("--min-frequency", min_frequency)
    if max_token_length is not None:
        b.add("--max-token-length", max_token_length)
    b.repeat("--heldout-flores", heldout_flores)
    if parity_variant is not None:
        b.add("--parity", "--parity-variant", parity_variant)
    return b.build()


def prune_command(
    tok: Any,
    *,
    order: str,
    n: int,
    flores: Sequence[str] = (),
    flores_lines: int | None = None,
    mix_uploads: Sequence[str] = (),
    scripts: Sequence[str] | None = None,
    corpus_files: Sequence[str | os.PathLike] = (),
    out: str | None = None,
) -> Equivalent:
    """``prune``: the order, N, the frequencies' text (the page's FLORES mix with its uploads, or a corpus job's
    files), the scripts of the script order and a new output folder named after the tokenizer."""
    b = _Builder("prune").note(tokenizer_arg(tok), "--tokenizer").add("--order", order, "--n", n)
    b.repeat("--flores", flores)
    if flores and flores_lines is not None:
        b.add("--flores-lines", flores_lines)
    for u in mix_uploads:
        b.note(upload_arg(u), "--mix-text")
    for f in corpus_files:
        b.note(file_arg(f, "text file"), "--text")
    if scripts is not None:
        b.add("--allowed-scripts", ",".join(scripts))
    if order == "score":
        b.notes.append("The score order's scores come from the model here: give them with --scores FILE.")
    b.add("--out", out or f"{getattr(tok, 'name', 'tokenizer')}-pruned{n}".replace(" ", "_"))
    return b.build()


def reuse_command(
    tok: Any,
    *,
    opts: dict[str, Any],
    lang: str,
    sources: Sequence[str],
    uploads: Sequence[str] = (),
    collateral: bool = False,
    robustness: bool = True,
) -> Equivalent:
    """``reuse`` (``--no-robustness`` unless the page measured robustness): target, preserved scripts, threshold, rules, protections, minimum frequency and trainer (`opts`,
    the page's), the FLORES language, the training text (the page's sources: ``FLORES lines``, ``Shared
    corpora``, ``My files``) and the collateral table when the page measured it."""
    b = _Builder("reuse").note(tokenizer_arg(tok), None)  # `reuse TOKENIZER`
    b.add("--target", opts["target"], "--train-lang", lang, "--preserve", ",".join(opts["preserved"]))
    b.add(
        "--min-reusable",
        opts["min_reusable"],
        "--rules",
        opts["rules"],
        "--protect",
        ",".join(opts["protect"]),
    )
    b.add("--min-frequency", opts["min_frequency"], "--trainer", opts["trainer"])
    if "FLORES lines" not in sources:
        b.add("--no-flores")
    if "Shared corpora" not in sources:
        b.add("--no-corpora")
    if "My files" in sources:
        for u in uploads:
            b.note(upload_arg(u), "--text")
    b.add("--collateral", "heldout" if collateral else "none")
    if not robustness:
        b.add("--no-robustness")
    return b.build()


def sabpe_command(
    base: Any,
    *,
    languages: Sequence[str],
    files_per_repo: int | None,
    vocab_size: int,
    priority: str,
    skip: Any,
    parity: bool = False,
    corpus: Sequence[str | os.PathLike] = (),
    robustness: bool = True,
) -> Equivalent:
    """``sabpe`` (``--no-robustness`` unless the page measured robustness): the base pre-tokenizer, the code corpus (the shared one when `corpus` is empty), languages, files
    per repository, vocabulary size, priority, the skip rule (a :class:`analysis.methods.sabpe.SkipRule`) and the
    parity-aware baseline."""
    b = _Builder("sabpe").note(tokenizer_arg(base), "--base")
    for c in corpus:
        b.note(file_arg(c, "code corpus"), "--corpus")
    b.add("--languages", ",".join(languages))
    if files_per_repo is not None:
        b.add("--max-files-per-repo", files_per_repo)
    b.add("--vocab-size", vocab_size, "--priority", priority)
    b.add("--min-sources", skip.min_repos, "--min-languages", skip.min_languages)
    if skip.max_share is not None:
        b.add("--max-share", skip.max_share)
    if parity:
        b.add("--parity")
    if not robustness:
        b.add("--no-robustness")
    return b.build()


#: Longest batch of the user's own lines a command spells out with --text (longer: a file, with a note).
MAX_INLINE_CHARS = 2_000


def dynamic_command(
    tok: Any,
    *,
    batch: tuple[str, str, int] | Sequence[str],
    boundary: str,
    special: bool = False,
    merges: int | None = None,
    target: float | None = None,
    model: str | None = None,
    batch_size: int | None = None,
    seed: int = 0,
) -> Equivalent:
    """``dynamic``: the batch (``("flores", LANG, n)`` or the user's lines), boundary, special tokens, and either
    one batch at `merges` with the target and the full curve (the page's main result) or the sampled batches of
    `batch_size`."""
    b = _Builder("dynamic").note(tokenizer_arg(tok), None)  # `dynamic TOKENIZER`
    if isinstance(batch, tuple) and batch and batch[0] == "flores":
        b.add("--flores", batch[1], "--n", batch[2])
    elif sum(len(t) for t in batch) <= MAX_INLINE_CHARS:
        b.repeat("--text", batch)
    else:
        b.add("--file", "batch.txt")
        b.notes.append("`batch.txt`: your lines, one example per line.")
    b.add("--boundary", boundary)
    if special:
        b.add("--special-tokens")
    if batch_size is not None:
        b.add("--batch-size", batch_size, "--sample-merges", "--seed", seed)
        return b.build()
    if merges is not None:
        b.add("--merges", merges)
    if target is not None:
        b.add("--target", f"{target:g}")
    b.add("--full-curve")
    if model:
        b.note(file_arg(model, "model") if not model.startswith("hub:") else (model[4:], None), "--model")
    return b.build()


def model_arg(model: str) -> tuple[str, str | None]:
    """A model as a command names it: a hub id as it is, a file or folder on the server as :func:`file_arg`."""
    return (model[4:], None) if model.startswith("hub:") else file_arg(model, "model")


def transplant_command(
    model: str,
    tok: Any,
    *,
    init: str,
    k: int | None = None,
    langs: Sequence[str] | None = None,
    lines: int | None = None,
    out: str = "OUT",
) -> Equivalent:
    """``transplant``: the model, the tokenizer it gets, the init (OMP's k), the output folder with its GGUF, and
    the model check's languages (``all`` for every one) and held-out lines per language."""
    b = _Builder("transplant").note(model_arg(model), "--model").note(tokenizer_arg(tok), "--tokenizer")
    b.add("--init", init)
    if init == "omp" and k is not None:
        b.add("--k", k)
    b.add("--out", out, "--gguf")
    if langs is not None:
        b.add("--langs", ",".join(langs))
    if lines is not None:
        b.add("--lines", lines)
    return b.build()


def model_check_command(
    original: str,
    *,
    langs: Sequence[str] | None = None,
    lines: int | None = None,
    inits: Sequence[str] = (),
    warmup_steps: int = 0,
    objective: str | None = None,
    edited: str = "EDITED",
) -> Equivalent:
    """``model-check``: the original model, the edit's folder (written by the edit's command with --out and
    --model), languages, held-out lines per language, the bake-off's inits and the warm-up."""
    b = _Builder("model-check").note(model_arg(original), "--original").add("--edited", edited)
    b.notes.append(f"`{edited}`: the folder the edit's command wrote with --out and --model.")
    if langs is not None:
        b.add("--langs", ",".join(langs))
    if lines is not None:
        b.add("--lines", lines)
    if inits:
        b.add("--inits", ",".join(inits))
    if warmup_steps:
        b.add("--warmup-steps", warmup_steps)
        if objective:
            b.add("--objective", objective)
    return b.build()

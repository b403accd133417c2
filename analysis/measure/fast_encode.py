"""The one encoder of bulk measurement: `gigatoken` where it is proven to give the ids `tokenizers` gives, else
`tokenizers` itself (the reference).

Every whole-corpus count — Compression on FLORES and on corpora, the corpus jobs' token ids, the SaBPE measures —
encodes through :func:`encode_ids` (lines → flat ids and tokens per line, no special tokens added). The fast
encoder, gigatoken (Marcel Rød, MIT; a Rust BPE encoder that reads tokenizer.json), is never trusted: a tokenizer
(by :attr:`~analysis.tokenizer.tokenizer.LoadedTokenizer.content_hash`, with both libraries' versions) is encoded
with it only after its ids were compared with tokenizers' on the whole verification set and found identical:

* every FLORES-200 devtest line (all 204 languages),
* the shared code corpus (a bounded slice of every repository),
* a hostile set built from the tokenizer itself (:func:`hostile_lines`): long runs, mixed scripts, combining marks
  and invisible characters, text the normalizer changes, characters outside the vocabulary (byte fallback),
  byte-like and control characters, and the text of every added and special token alone, inside words and
  half-written.

Until then the tokenizer is *being verified*: :func:`encode_ids` returns tokenizers' ids, and when the batch is a
whole FLORES language (its data hash) it also encodes it with gigatoken and compares (a shadow encode, a fraction
of the reference's time), so a first `compress --langs all` verifies as it measures, and the verification costs
no reference encode of its own; when the last language matched, the code corpus and the hostile set are compared
(a few seconds) and the verdict is stored. :func:`verify` runs whatever is left at once. Other batches of an
unverified tokenizer cost nothing extra (gigatoken is not even loaded). Any difference, exception or Rust panic (pyo3's `PanicException`
derives from `BaseException` and is caught explicitly), an unsupported model (WordPiece, Unigram) or no
gigatoken at all keeps the tokenizer on tokenizers, with the reason; the verdict is stored in the disk cache
(namespace ``encoder``) and shown by :func:`encoder_status` (the Compression page, ``compress --json``).
A panic after the verdict (on text outside the verification set) falls back for that batch and withdraws it.

``TOKLAB_ENCODER=tokenizers`` switches the fast encoder off.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tokenizers

from analysis.core.cache import DiskCache, memoize
from analysis.core.progress import Progress, report
from analysis.errors import AnalysisError
from analysis.texts import probes
from analysis.texts.code import read_code
from analysis.texts.flores import open_flores
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: Bumped whenever the verification set or the comparison changes (every stored verdict is then taken again).
VERIFY_VERSION = 1
FAST = "gigatoken"
REFERENCE = "tokenizers"
#: ``TOKLAB_ENCODER=tokenizers`` (or ``off``) keeps every tokenizer on tokenizers.
ENV_SWITCH = "TOKLAB_ENCODER"
#: The code corpus part of the verification set: at most this many UTF-8 bytes of each repository.
CODE_BYTES_PER_REPO = 16_000
#: Lines compared per call of both encoders while verifying (bounded memory).
VERIFY_BATCH = 4096
#: Added tokens whose text goes into the hostile set (the first ones by id).
MAX_ADDED_TOKENS = 3000
#: A gigatoken tokenizer is built anew after it encoded this many characters: its word caches have no bound of
#: their own (measured: +200 MB after all of FLORES-200 devtest, 35M characters; +150 MB per 2M distinct words).
RENEW_CHARS = 64_000_000

#: the verdicts, one document per tokenizer and pair of versions (see :func:`_blank`), shared by every process
_DISK = DiskCache("encoder", VERIFY_VERSION)


# --------------------------------------------------------------------------------------------------
# The two encoders
# --------------------------------------------------------------------------------------------------
def reference_tokenizer(tok: LoadedTokenizer) -> tokenizers.Tokenizer:
    """The tokenizers object measurements encode with: the shared one, or a private copy with BPE dropout off."""
    if tok.dropout:
        t = tok.fresh_tokenizer()
        t.model.dropout = 0.0
        return t
    return tok.tokenizer


def reference_encode(tok: LoadedTokenizer, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """tokenizers' ids of lines without special tokens: (flat ids, tokens per line) as int64 arrays."""
    enc = reference_tokenizer(tok).encode_batch_fast(list(lines), add_special_tokens=False)
    ids = [e.ids for e in enc]
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter((i for row in ids for i in row), dtype=np.int64, count=int(lens.sum()))
    return flat, lens


class FastTokenizer:
    """gigatoken's tokenizer of one tokenizer.json, built anew after every :data:`RENEW_CHARS` characters it
    encoded, so its caches stay bounded in a long-running server (building costs about a second)."""

    def __init__(self, module: Any, tok: LoadedTokenizer) -> None:
        self._module = module
        self._source = tok
        self._lock = threading.Lock()
        self._chars = 0
        self._tok = module.Tokenizer.from_json(tok.to_json())

    def encode_batch(self, lines: list[str], *, parallel: bool | None = None) -> Any:
        """gigatoken's `encode_batch` (an awkward array of ids; no special tokens added)."""
        n = sum(map(len, lines))
        with self._lock:
            if self._chars and self._chars + n > RENEW_CHARS:
                self._tok = self._module.Tokenizer.from_json(self._source.to_json())
                self._chars = 0
            self._chars += n
            tok = self._tok
        return tok.encode_batch(lines, parallel=parallel)


def fast_encode(fast: Any, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """gigatoken's ids of lines (its encode adds no special tokens): (flat ids, tokens per line) as int64 arrays,
    read straight from the result's offsets and contents (no Python object per token)."""
    if not lines:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    layout = fast.encode_batch(list(lines)).layout
    offsets = np.asarray(layout.offsets.data, dtype=np.int64)  # a ListOffsetArray of a NumpyArray of uint32
    content = np.asarray(layout.content.data)
    if offsets.size != len(lines) + 1:
        raise ValueError(f"gigatoken returned {offsets.size - 1} rows for {len(lines)} lines")
    return content[offsets[0] : offsets[-1]].astype(np.int64), np.diff(offsets)


def _fatal(e: BaseException) -> bool:
    """Exceptions that must go on up (an interrupt, running out of memory): never a verdict about the encoder."""
    return isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError))


def _describe(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0][:200]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


@memoize(maxsize=1)
def fast_module() -> tuple[Any | None, str]:
    """(the gigatoken module, "") or (None, why it cannot be used): not installed, no wheel for this platform,
    or an import that fails or panics. Never raises."""
    try:
        return importlib.import_module("gigatoken"), ""
    except BaseException as e:  # a missing wheel, a broken build, a Rust panic at import
        if _fatal(e):
            raise
        return None, f"gigatoken cannot be imported ({_describe(e)})"


def versions() -> dict[str, str]:
    """The versions of both encoders (part of every verdict's key)."""
    mod, _ = fast_module()
    fast = "-"
    if mod is not None:
        try:
            fast = importlib.metadata.version("gigatoken")
        except importlib.metadata.PackageNotFoundError:
            fast = str(getattr(mod, "__version__", "?"))
    return {FAST: fast, REFERENCE: tokenizers.__version__}


def _switched_off() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() in ("tokenizers", "off", "0", "reference")


@memoize(maxsize=4)
def _load_fast(tok: LoadedTokenizer) -> tuple[FastTokenizer | None, str]:
    """gigatoken's tokenizer for `tok` (the last 4 kept, by content hash), or (None, why not)."""
    mod, why = fast_module()
    if mod is None:
        return None, why
    try:
        return FastTokenizer(mod, tok), ""
    except BaseException as e:  # unsupported models raise RuntimeError; a Rust panic is a BaseException
        if _fatal(e):
            raise
        return None, f"gigatoken cannot load this {tok.model_type} tokenizer ({_describe(e)})"


def fingerprint(lines: Sequence[str]) -> str:
    """SHA-256 (16 hex) of lines joined by newlines: for a FLORES language, its
    :meth:`~analysis.texts.flores.FloresData.data_hash`."""
    return hashlib.sha256(("\n".join(lines) + "\n").encode("utf-8")).hexdigest()[:16]


def first_difference(
    lines: Sequence[str], ref: tuple[np.ndarray, np.ndarray], fast: tuple[np.ndarray, np.ndarray]
) -> str | None:
    """None when both encoders gave the same ids on every line, else the first differing line, described."""
    (rf, rl), (ff, fl) = ref, fast
    if rl.shape == fl.shape and np.array_equal(rl, fl) and np.array_equal(rf, ff):
        return None
    ro = np.concatenate(([0], np.cumsum(rl)))
    fo = np.concatenate(([0], np.cumsum(fl)))
    n = min(len(rl), len(fl))
    for i in range(n):
        a, b = rf[ro[i] : ro[i + 1]], ff[fo[i] : fo[i + 1]]
        if not np.array_equal(a, b):
            j = next((k for k in range(min(a.size, b.size)) if a[k] != b[k]), min(a.size, b.size))
            lo = max(0, j - 2)
            return (
                f"line {i} ({lines[i][:60]!r}) differs from token {j}: tokenizers {a[lo : j + 3].tolist()} "
                f"({a.size} tokens), gigatoken {b[lo : j + 3].tolist()} ({b.size} tokens)"
            )
    return f"gigatoken returned {len(fl)} lines for {len(rl)}"


# --------------------------------------------------------------------------------------------------
# The verification set
# --------------------------------------------------------------------------------------------------
@memoize(maxsize=1)
def required_flores() -> dict[str, str]:
    """Data hash → language of every FLORES-200 devtest language (the FLORES part of the verification set);
    empty when no FLORES data is found."""
    try:
        data = open_flores()
        return {data.data_hash(c): c for c in data.codes}
    except (AnalysisError, OSError):
        return {}


def code_lines() -> list[str]:
    """The code part of the verification set: whole files of every language of the shared code corpus, at most
    :data:`CODE_BYTES_PER_REPO` bytes per repository (empty when the corpus is absent)."""
    try:
        return [r.text for r in read_code(max_bytes_per_repo=CODE_BYTES_PER_REPO) if r.text]
    except (AnalysisError, OSError):
        return []


def hostile_lines(tok: LoadedTokenizer) -> list[str]:
    """The hostile part of the verification set: :data:`analysis.texts.probes.ENCODER_HOSTILE`, plus the text of the tokenizer's added
    and special tokens (the first :data:`MAX_ADDED_TOKENS` by id) alone, repeated, glued inside words, between
    spaces, half-written, and all of them in one line."""
    out = list(probes.ENCODER_HOSTILE)
    added = [t.content for t in sorted(tok.added_tokens, key=lambda t: t.id) if t.content][:MAX_ADDED_TOKENS]
    for c in added:
        out += [c, c + c, f"x{c}y", f" {c} ", f"a {c}b {c}\n{c}", c[:-1], c[1:]]
    if added:
        out.append(" ".join(added[:200]))
        out.append("".join(added[:200]))
    return out


# --------------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------------
def _key(tok: LoadedTokenizer) -> str:
    v = versions()
    return f"{tok.content_hash}-gt{v[FAST]}-tk{v[REFERENCE]}"


def _blank() -> dict[str, Any]:
    """A verdict document: `encoder` FAST or REFERENCE when decided (None while being verified), `reason`, the
    FLORES languages compared so far (`checked`: data hash → language) and the lines compared."""
    return {"encoder": None, "reason": "", "checked": {}, "lines": 0}


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two verdict documents as one: a fall-back wins over a proof, a proof over a verification in progress."""
    for enc in (REFERENCE, FAST):
        for d in (a, b):
            if d.get("encoder") == enc:
                return {**_blank(), **d}
    return {
        **_blank(),
        "checked": {**(a.get("checked") or {}), **(b.get("checked") or {})},
        "lines": max(int(a.get("lines") or 0), int(b.get("lines") or 0)),
    }


def _state(tok: LoadedTokenizer) -> dict[str, Any]:
    """This tokenizer's verdict document as stored (a blank one while none is)."""
    stored = _DISK.get(_key(tok))
    return _merge(_blank(), stored) if isinstance(stored, dict) else _blank()


def _store(tok: LoadedTokenizer, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Apply `change` to the stored verdict document under the store's lock (another process's changes kept);
    returns the new document (also when the store cannot be written: the verdict then holds for this call)."""
    new: list[dict[str, Any]] = []

    def merge(stored: Any) -> dict[str, Any]:
        new[:] = [change(_merge(_blank(), stored) if isinstance(stored, dict) else _blank())]
        return new[0]

    _DISK.update(_key(tok), merge)
    return new[0] if new else change(_state(tok))


def _decide(tok: LoadedTokenizer, encoder: str, reason: str) -> dict[str, Any]:
    def change(doc: dict[str, Any]) -> dict[str, Any]:
        if doc.get("encoder") == REFERENCE:  # the first fall-back's reason stays
            return doc
        return {**doc, "encoder": encoder, "reason": reason}

    return _store(tok, change)


def _static_reason(tok: LoadedTokenizer) -> str:
    """Why this tokenizer stays on tokenizers without trying gigatoken ("" when it may be tried)."""
    if _switched_off():
        return f"the fast encoder is switched off ({ENV_SWITCH}={os.environ.get(ENV_SWITCH)})"
    _, why = fast_module()
    return why


def reset() -> None:
    """Forget the loaded encoders, the import and the verification set of this process (not the verdicts)."""
    for fn in (fast_module, _load_fast, required_flores):
        clear = getattr(fn, "cache_clear", None)  # a test may have replaced one
        if clear is not None:
            clear()


def encoder_status(tok: LoadedTokenizer) -> dict[str, str]:
    """Which encoder measures this tokenizer now, and why: ``{"encoder": "gigatoken 0.10.0" | "tokenizers
    0.23.3", "encoder_reason": …}`` (reads the verdict; loads nothing, verifies nothing)."""
    v = versions()
    ref = f"{REFERENCE} {v[REFERENCE]}"
    why = _static_reason(tok)
    if why:
        return {"encoder": ref, "encoder_reason": why}
    doc = _state(tok)
    if doc["encoder"] == FAST:
        return {"encoder": f"{FAST} {v[FAST]}", "encoder_reason": doc["reason"]}
    if doc["encoder"] == REFERENCE:
        return {"encoder": ref, "encoder_reason": doc["reason"]}
    return {
        "encoder": ref,
        "encoder_reason": f"being verified: {REFERENCE} encodes, and {FAST}'s ids of the same lines are compared, "
        "until the whole verification set matches",
    }


def verification_progress(tok: LoadedTokenizer) -> dict[str, int]:
    """How far this tokenizer's verification is: FLORES languages compared (`languages` of `of`) and `lines`."""
    doc, need = _state(tok), required_flores()
    return {
        "languages": sum(1 for h in doc["checked"] if h in need),
        "of": len(need),
        "lines": int(doc["lines"]),
    }


def uses_fast(tok: LoadedTokenizer) -> bool:
    """True when :func:`encode_ids` encodes this tokenizer with gigatoken now."""
    return encoder_status(tok)["encoder"].startswith(FAST)


# --------------------------------------------------------------------------------------------------
# Encoding and verifying
# --------------------------------------------------------------------------------------------------
def _compare(
    tok: LoadedTokenizer, fast: Any, lines: Sequence[str], ref: tuple[np.ndarray, np.ndarray]
) -> str:
    """ "" when gigatoken's ids of `lines` equal `ref`, else why not (a difference, an exception, a panic)."""
    try:
        got = fast_encode(fast, lines)
    except BaseException as e:  # pyo3's PanicException derives from BaseException
        if _fatal(e):
            raise
        return f"{FAST} failed on a batch of {len(lines)} lines ({_describe(e)})"
    diff = first_difference(lines, ref, got)
    return f"{FAST}'s ids differ from {REFERENCE}': {diff}" if diff else ""


def _batches(lines: Sequence[str], n: int = VERIFY_BATCH) -> Iterable[Sequence[str]]:
    for i in range(0, len(lines), n):
        yield lines[i : i + n]


def _finish(tok: LoadedTokenizer, fast: Any) -> dict[str, Any]:
    """Every FLORES language matched: compare the code corpus and the hostile set, then decide."""
    doc = _state(tok)
    code, hostile = code_lines(), hostile_lines(tok)
    for part in (code, hostile):
        for batch in _batches(part):
            why = _compare(tok, fast, batch, reference_encode(tok, batch))
            if why:
                return _decide(tok, REFERENCE, why)
    n = doc["lines"] + len(code) + len(hostile)
    return _decide(
        tok,
        FAST,
        f"ids identical to {REFERENCE}' on {n:,} texts: every line of {len(doc['checked'])} FLORES devtest "
        f"languages, {len(code):,} code files and {len(hostile):,} hostile lines",
    )


def _record(tok: LoadedTokenizer, fast: Any, lines: Sequence[str]) -> None:
    """A shadow-compared batch matched: count it when it is a whole FLORES language; decide when all are."""
    need = required_flores()
    if not need:
        _no_flores_yet(tok, fast)
        return
    h = fingerprint(lines)
    if h not in need:
        return
    doc = _store(
        tok,
        lambda d: (
            d
            if h in d["checked"]
            else {**d, "checked": {**d["checked"], h: need[h]}, "lines": d["lines"] + len(lines)}
        ),
    )
    if doc["encoder"] is None and all(k in doc["checked"] for k in need):
        _finish(tok, fast)


def _no_flores_yet(tok: LoadedTokenizer, fast: Any) -> None:
    """Without FLORES data the verification set is the code corpus and the hostile set: compare them now."""
    if not required_flores() and _state(tok)["encoder"] is None:
        _finish(tok, fast)


def encode_ids(tok: LoadedTokenizer, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode lines without special tokens: (flat token ids, tokens per line) as int64 arrays — with gigatoken
    where this tokenizer's verdict allows it, else with tokenizers (comparing gigatoken's ids on the side while
    the tokenizer is being verified). The ids are tokenizers' ids either way. Never raises because of gigatoken."""
    lines = list(lines)
    if _static_reason(tok):
        return reference_encode(tok, lines)
    doc = _state(tok)
    if doc["encoder"] == REFERENCE:
        return reference_encode(tok, lines)
    if doc["encoder"] == FAST:
        fast, why = _load_fast(tok)
        try:
            if fast is None:
                raise RuntimeError(why)
            return fast_encode(fast, lines)
        except BaseException as e:  # a panic on text outside the verification set: fall back, withdraw
            if _fatal(e):
                raise
            _decide(tok, REFERENCE, f"{FAST} failed after its verification ({_describe(e)})")
            return reference_encode(tok, lines)
    ref = reference_encode(tok, lines)
    need = required_flores()
    if need and fingerprint(lines) not in need:  # only whole FLORES languages count towards the verification
        return ref
    _shadow(tok, lines, ref)
    return ref


def _shadow(tok: LoadedTokenizer, lines: Sequence[str], ref: tuple[np.ndarray, np.ndarray]) -> None:
    """Compare gigatoken's ids of lines with tokenizers' (`ref`): a difference decides; a match counts."""
    fast, why = _load_fast(tok)
    if fast is None:
        _decide(tok, REFERENCE, why)
        return
    why = _compare(tok, fast, lines, ref)
    if why:
        _decide(tok, REFERENCE, why)
    else:
        _record(tok, fast, lines)


def verify(tok: LoadedTokenizer, progress: Progress | None = None) -> dict[str, str]:
    """Take this tokenizer's verdict now: compare both encoders on whatever of the verification set is not
    compared yet (:func:`encoder_status` afterwards). A no-op when the verdict is already taken."""
    if _static_reason(tok):
        return encoder_status(tok)
    doc = _state(tok)
    if doc["encoder"] is not None:
        return encoder_status(tok)
    fast, why = _load_fast(tok)
    if fast is None:
        _decide(tok, REFERENCE, why)
        return encoder_status(tok)
    need = required_flores()
    todo = [c for h, c in need.items() if h not in doc["checked"]]
    data = open_flores() if todo else None
    for i, code in enumerate(todo):
        lines = data.lines(code) if data is not None else []
        ref = reference_encode(tok, lines)
        why = _compare(tok, fast, lines, ref)
        if why:
            _decide(tok, REFERENCE, f"{code}: {why}")
            return encoder_status(tok)
        _record(tok, fast, lines)
        report(progress, i + 1, len(todo), f"verifying {tok.name} · {code}")
    if _state(tok)["encoder"] is None:
        _finish(tok, fast)
    return encoder_status(tok)


# --------------------------------------------------------------------------------------------------
# gigatoken's BPE trainer
# --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send what native code writes to file descriptor 1 to descriptor 2 meanwhile (gigatoken's trainer prints
    its progress to stdout, which would corrupt a command's `--json`)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def train_bpe(documents: Sequence[str], vocab_size: int) -> tuple[list[tuple[bytes, bytes]], str]:
    """gigatoken's plain byte-level BPE trainer on GPT-2's pre-tokenization (ties broken as tokenizers' BpeTrainer
    breaks them): (merges as byte pairs, "") — or ([], why not): no gigatoken, a document holding the separator
    (a newline), an exception or a panic. `vocab_size` counts the 256 bytes."""
    mod, why = fast_module()
    if _switched_off():
        return [], f"the fast encoder is switched off ({ENV_SWITCH})"
    if mod is None:
        return [], why
    if any("\n" in d for d in documents):
        return [], "a document holds a newline (gigatoken's trainer splits documents at newlines)"
    try:
        with _stdout_to_stderr():
            _, merges = mod.train_bpe(
                "\n".join(documents).encode("utf-8"),
                vocab_size,
                [],
                tie_breaking="huggingface",
                separator=b"\n",
            )
    except BaseException as e:  # a Rust panic is a BaseException
        if _fatal(e):
            raise
        return [], f"gigatoken's trainer failed ({_describe(e)})"
    return [(bytes(a), bytes(b)) for a, b in merges], ""

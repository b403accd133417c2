"""Under-trained tokens from a model's own weights (Land & Bartolo 2024, "magikarp"; methods.md §7).

Pipeline: read the embedding matrices (:mod:`analysis.weights`) → choose reference tokens that are known to
be untrained (:func:`auto_references`) → indicators (:func:`compute_indicators`: L2 norm of input embeddings
for untied models; cosine and L2 distance of the unembedding rows to the mean reference row, optionally with
the first principal component removed) → round-trip categories (:func:`round_trip_categories`, §2.2) →
candidates = lowest percentile among tokens that round-trip (:func:`select_candidates`) → verification with
three repeat prompts (:class:`Verifier`) → token classes from paper 003 App. A (:func:`token_class`) and a
token-health table joined with the STT result (:func:`health_table`).

Implemented from the paper and our spec; no code from the (unlicensed) magikarp repository.
"""

from __future__ import annotations

import math
import re
import string
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ModelLoadError, UnsupportedTokenizerError
from .progress import Progress, report
from .tokenizer import BYTE_TO_CHAR, SPIECE_UNDERLINE, LoadedTokenizer
from .unicode import text_script
from .weights import (
    EmbeddingWeights,
    Matrix,
    ModelSource,
    load_embeddings,
    resolve_model,
    tokenizer_for_model,
)

# --------------------------------------------------------------------------------------------------
# Round-trip categories (methods.md §2.2)
# --------------------------------------------------------------------------------------------------
OK = "OK"
OK_SPECIAL = "OK_SPECIAL"
UNREACHABLE_SPECIAL = "UNREACHABLE_SPECIAL"
UNDECODEABLE = "UNDECODEABLE"
UNREACHABLE_SINGLE = "UNREACHABLE_SINGLE_TOKEN"
UNREACHABLE_MULTI = "UNREACHABLE_MULTI_TOKEN"
PADDING_ROW = "PADDING_ROW"  # embedding row beyond the tokenizer
MISSING = "MISSING"  # an id inside the tokenizer range that names no token
ROUND_TRIP_CATEGORIES = (
    OK,
    OK_SPECIAL,
    UNREACHABLE_SPECIAL,
    UNDECODEABLE,
    UNREACHABLE_SINGLE,
    UNREACHABLE_MULTI,
    PADDING_ROW,
    MISSING,
)

#: Indicator names → human labels (lower = more under-trained for every one of them).
INDICATOR_LABELS = {
    "input_norm": "L2 norm of input embedding",
    "cosine": "cosine distance to reference mean",
    "cosine_nopc1": "cosine distance to reference mean (1st PC removed)",
    "l2_distance": "L2 distance to reference mean",
    "bias": "output bias",
}

_SPECIALISH = re.compile(r"^[\[<].*[A-Za-z].*[\]>]$", re.S)


def _decode_tokenizer(tok: LoadedTokenizer):
    """A private fast tokenizer whose decoder does no clean-up of spaces."""
    from tokenizers import decoders

    tk = tok.fresh_tokenizer()
    dec = tok.decoder or {}
    if dec.get("type") == "WordPiece" and dec.get("cleanup", True):
        tk.decoder = decoders.WordPiece(prefix=dec.get("prefix", "##"), cleanup=False)
    return tk


@dataclass
class RoundTrip:
    """Per-id round-trip results: category, decoded string and re-encoded ids."""

    categories: list[str]
    decoded: list[str]
    reencoded: list[list[int]]
    prefix_mode: bool


def special_ids(tok: LoadedTokenizer) -> set[int]:
    """Ids of special tokens (added tokens marked special, plus the unk token)."""
    ids = {a.id for a in tok.special_tokens}
    if tok.unk_token is not None and tok.unk_token in tok.vocab:
        ids.add(tok.vocab[tok.unk_token])
    return ids


def round_trip_categories(tok: LoadedTokenizer) -> RoundTrip:
    """magikarp's round trip for every id < vocab_size: decode([id]) then encode without specials (§2.2)."""
    tk = _decode_tokenizer(tok)
    n = tok.vocab_size
    id_to_tok = tok.id_to_token
    ids = [i for i in range(n) if i in id_to_tok]
    # leading-space handling: tokenizers that add a prefix space get a «/» prefix token first
    first = tk.encode("test", add_special_tokens=False).tokens
    prefix_mode = bool(first) and first[0][:1] in (" ", SPIECE_UNDERLINE, "_", "Ġ")
    pid = None
    if prefix_mode:
        for ch in ("«", "»"):
            e = tk.encode(ch, add_special_tokens=False).ids
            if len(e) == 1:
                pid = e[0]
                break
        if pid is None:
            prefix_mode = False
    if prefix_mode:
        dec = tk.decode_batch([[pid, i] for i in ids], skip_special_tokens=False)
        pre = tk.decode([pid], skip_special_tokens=False)
        dec = [d[len(pre) :] if d.startswith(pre) else d[1:] for d in dec]
        enc = tk.encode_batch([tk.decode([pid]) + d for d in dec], add_special_tokens=False)
        reenc = [e.ids[1:] if e.ids[:1] == [pid] else e.ids for e in enc]
    else:
        dec = tk.decode_batch([[i] for i in ids], skip_special_tokens=False)
        reenc = [e.ids for e in tk.encode_batch(dec, add_special_tokens=False)]
    specials = special_ids(tok)
    cats = [MISSING] * n
    decoded = [""] * n
    reencoded: list[list[int]] = [[] for _ in range(n)]
    for i, s, r in zip(ids, dec, reenc):
        decoded[i] = s
        reencoded[i] = r
        if r == [i]:
            cats[i] = OK_SPECIAL if i in specials else OK
        elif len(s) >= 3 and s[0] in "[<" and s[-1] in "]>" and any(c.isalpha() for c in s):
            cats[i] = UNREACHABLE_SPECIAL
        elif "\ufffd" in s:
            cats[i] = UNDECODEABLE
        elif len(r) == 1:
            cats[i] = UNREACHABLE_SINGLE
        else:
            cats[i] = UNREACHABLE_MULTI
    return RoundTrip(cats, decoded, reencoded, prefix_mode)


# --------------------------------------------------------------------------------------------------
# Reference ("known unused") tokens
# --------------------------------------------------------------------------------------------------
INVALID_UTF8_BYTES = (0xC0, 0xC1, *range(0xF5, 0x100))
_UNUSED_NAME = re.compile(r"^[<\[]\|?\s*(unused|reserved)[\w\- ]*\|?[>\]]$", re.I)


@dataclass
class References:
    """Reference token ids (known to be untrained) with a reason each; held-out ones validate the choice."""

    ids: list[int]
    reasons: dict[int, str]
    held_out: list[int] = field(default_factory=list)
    source: str = "auto"

    def summary(self) -> list[dict[str, Any]]:
        """Counts per reason kind (the text before the first colon of each reason)."""
        out: dict[str, int] = {}
        for i in self.ids:
            k = self.reasons.get(i, "").split(":")[0]
            out[k] = out.get(k, 0) + 1
        return [{"reason": k, "count": v} for k, v in out.items()]


def _natural_key(s: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


def auto_references(
    tok: LoadedTokenizer,
    n_rows: int | None = None,
    *,
    max_named: int = 10,
    max_rows: int = 100,
    padding_norms: np.ndarray | None = None,
    use_unreachable: bool = True,
    round_trip: RoundTrip | None = None,
    duplicate_groups: list[list[int]] | None = None,
) -> References:
    """Pick reference tokens for a vocabulary: impossible UTF-8 bytes, unused/reserved specials, rows
    beyond the tokenizer size, groups of exactly identical (never updated) rows; only when none of those exist, STT-unreachable tokens, and then tokens that
    encoding never produces (round-trip unreachable, §2.2; e.g. letter+digit tokens under a digit-splitting
    pre-tokenizer)."""
    reasons: dict[int, str] = {}
    held: list[int] = []
    vocab = tok.vocab
    # (a) bytes that never occur in UTF-8
    if tok.is_byte_level:
        for b in INVALID_UTF8_BYTES:
            i = vocab.get(BYTE_TO_CHAR[b])
            if i is not None:
                reasons[i] = (
                    f"invalid UTF-8 byte: byte-level token for 0x{b:02X} can never occur in UTF-8 text"
                )
    elif tok.byte_fallback:
        for b in INVALID_UTF8_BYTES:
            i = vocab.get(f"<0x{b:02X}>")
            if i is not None:
                reasons[i] = (
                    f"invalid UTF-8 byte: byte piece <0x{b:02X}> can never be emitted by byte fallback"
                )
        for b in range(0x21, 0x7F):
            i = vocab.get(f"<0x{b:02X}>")
            if i is not None and chr(b) in vocab:
                reasons[i] = (
                    f"duplicate byte piece: <0x{b:02X}> duplicates the piece {chr(b)!r}, "
                    "so byte fallback never emits it"
                )
    # (b) <unused…>, [unusedN], reserved specials
    named = sorted(
        ((t, i) for i, t in tok.id_to_token.items() if _UNUSED_NAME.match(t)),
        key=lambda x: (x[1], _natural_key(x[0])),
    )
    for k, (t, i) in enumerate(named):
        if k < max_named:
            reasons[i] = f"unused/reserved special: {t} (first {min(max_named, len(named))} of {len(named)})"
        else:
            held.append(i)
    # (c) rows beyond the tokenizer
    if n_rows is not None and n_rows > tok.vocab_size:
        rows = range(tok.vocab_size, n_rows)
        taken = 0
        for r in rows:
            if padding_norms is not None and padding_norms[r - tok.vocab_size] <= 1e-8:
                continue  # all-zero padding rows carry no direction
            if taken >= max_rows:
                held.append(r)
                continue
            reasons[r] = f"row beyond the tokenizer: embedding row {r} ≥ tokenizer size {tok.vocab_size}"
            taken += 1
    # (c2) groups of identical rows: tokens whose rows never diverged were never updated
    if duplicate_groups:
        taken = 0
        for g in duplicate_groups:
            for r in g:
                if r in reasons or taken >= max_rows:
                    continue
                name = tok.readable(tok.id_to_token[r]) if r in tok.id_to_token else f"row {r}"
                reasons[r] = (
                    f"identical rows: {name!r} shares its embedding row exactly with {len(g) - 1} other "
                    "token(s), so it was never updated"
                )
                taken += 1
    # (d) STT-unreachable tokens, as a fallback
    if not reasons and use_unreachable:
        try:
            from .bpe import unreachable_ids

            un = sorted(unreachable_ids(tok))
        except UnsupportedTokenizerError:
            un = []
        for i in un[:max_rows]:
            reasons[i] = (
                f"STT-unreachable: {tok.id_to_token.get(i)!r} cannot be produced by the tokenizer's merges"
            )
    if not reasons and use_unreachable and round_trip is not None:
        un = [
            i
            for i, c in enumerate(round_trip.categories)
            if c in (UNREACHABLE_SINGLE, UNREACHABLE_MULTI) and i not in tok.added_ids
        ]
        for i in un[:max_rows]:
            reasons[i] = (
                f"never produced by encoding: decode→encode of {tok.readable(tok.id_to_token[i])!r} "
                "gives other tokens, so the model never saw this id"
            )
        held.extend(un[max_rows:])
    return References(sorted(reasons), reasons, held_out=held, source="auto")


def user_references(ids: Iterable[int], tok: LoadedTokenizer | None = None) -> References:
    """References picked by the user (ids)."""
    ids = sorted({int(i) for i in ids})
    names = tok.id_to_token if tok is not None else {}
    return References(ids, {i: f"picked by the user: {names.get(i, f'row {i}')}" for i in ids}, source="user")


def parse_reference_spec(spec: str, tok: LoadedTokenizer) -> list[int]:
    """Parse `"3,5-9,[unused0]"` style input: ids, id ranges or token strings."""
    out: list[int] = []
    for part in re.split(r"[,\s]+", spec.strip()):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)-(\d+)", part)
        if m:
            out.extend(range(int(m.group(1)), int(m.group(2)) + 1))
        elif part.isdigit():
            out.append(int(part))
        else:
            i = tok.tokenizer.token_to_id(part)
            if i is None:
                from .errors import DataError

                raise DataError(f"reference token {part!r} is not in the vocabulary")
            out.append(i)
    return out


# --------------------------------------------------------------------------------------------------
# Indicators (methods.md §7)
# --------------------------------------------------------------------------------------------------
def row_norms(m: Matrix) -> np.ndarray:
    """L2 norm of every row (float32), computed block by block."""
    out = np.empty(m.shape[0], dtype=np.float32)
    for s, b in m.blocks():
        out[s : s + len(b)] = np.sqrt(np.einsum("ij,ij->i", b, b))
    return out


def duplicate_row_groups(m: Matrix, *, min_size: int = 2, seed: int = 0) -> list[list[int]]:
    """Groups of rows that are exactly identical (and non-zero): a random projection finds equal rows,
    which are then confirmed by comparing the rows themselves."""
    rng = np.random.default_rng(seed)
    r = rng.standard_normal(m.shape[1])
    proj = np.empty(m.shape[0], dtype=np.float64)
    for s, b in m.blocks():
        proj[s : s + len(b)] = b.astype(np.float64) @ r
    order = np.argsort(proj, kind="stable")
    sp = proj[order]
    cuts = np.flatnonzero(np.diff(sp) != 0) + 1
    groups: list[list[int]] = []
    for g in np.split(order, cuts):
        if len(g) < min_size:
            continue
        rows = m.take(g)
        if not np.any(rows[0]):
            continue  # all-zero rows carry no direction
        same = [int(i) for i, row in zip(g, rows) if np.array_equal(row, rows[0])]
        if len(same) >= min_size:
            groups.append(sorted(same))
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def first_principal_component(
    m: Matrix,
    *,
    max_iters: int = 30,
    k: int = 8,
    tol: float = 1e-7,
    seed: int = 0,
    sample_rows: int | None = 16384,
) -> tuple[np.ndarray, np.ndarray]:
    """(mean row, first principal direction) by block subspace iteration with Rayleigh–Ritz over row blocks
    (no SVD of the matrix; stops when the direction is stable). The mean uses every row; the direction is
    estimated on a random sample of `sample_rows` rows when the matrix is larger (None = all rows)."""
    n, d = m.shape
    mu = np.zeros(d, dtype=np.float64)
    for _, b in m.blocks():
        mu += b.sum(axis=0, dtype=np.float64)
    mu /= n
    mu32 = mu.astype(np.float32)
    if sample_rows and n > sample_rows:
        idx = np.sort(np.random.default_rng(seed).choice(n, sample_rows, replace=False))
        m = Matrix(m.take(idx), "F32", m.name)
    k = max(1, min(k, d))
    rng = np.random.default_rng(seed)
    v = np.linalg.qr(rng.standard_normal((d, k)))[0].astype(np.float32)
    pc = np.zeros(d)
    for _ in range(max_iters):
        y = np.zeros((d, k), dtype=np.float64)
        for _, b in m.blocks():
            b -= mu32
            y += b.T @ (b @ v)
        small = v.astype(np.float64).T @ y  # Rayleigh–Ritz on the current subspace
        w, q = np.linalg.eigh((small + small.T) / 2)
        new = v.astype(np.float64) @ q[:, -1]
        new /= np.linalg.norm(new)
        done = abs(float(new @ pc)) > 1 - tol
        pc = new
        if done:
            break
        v = np.linalg.qr(y)[0].astype(np.float32)
    return mu32, pc.astype(np.float32)


def _distances(
    m: Matrix, ref_ids: list[int], *, mu: np.ndarray | None = None, pc: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine distance and L2 distance of every row to the mean reference row (optionally in PC1-removed space)."""
    refs = m.take(ref_ids)
    if pc is not None:
        refs = refs - mu
        refs -= np.outer(refs @ pc, pc)
    u = refs.astype(np.float64).mean(axis=0).astype(np.float32)
    un = float(np.linalg.norm(u))
    uu = np.float32(un * un)
    n = m.shape[0]
    cos = np.empty(n, dtype=np.float32)
    l2 = np.empty(n, dtype=np.float32)
    for s, b in m.blocks():
        if pc is not None:
            b -= mu
            b -= np.outer(b @ pc, pc)
        e = s + len(b)
        n2 = np.einsum("ij,ij->i", b, b)
        dots = b @ u
        cos[s:e] = 1.0 - dots / np.maximum(np.sqrt(n2) * un, 1e-6)
        # ‖x−u‖² = ‖x‖² − 2x·u + ‖u‖² (one pass less); rows close to u are recomputed exactly (cancellation)
        d2 = n2 - 2.0 * dots + uu
        close = d2 < 1e-2 * (n2 + uu)
        if close.any():
            diff = b[close] - u
            d2[close] = np.einsum("ij,ij->i", diff, diff)
        l2[s:e] = np.sqrt(np.maximum(d2, 0.0))
    return cos, l2


def compute_indicators(
    w: EmbeddingWeights, reference_ids: list[int] | None, *, remove_pc1: bool = False
) -> dict[str, np.ndarray]:
    """Indicators over all rows, in magikarp's order: [input_norm if untied] + cosine(, cosine_nopc1), l2_distance
    (+ input_norm for models without an LM head) (+ bias). Lower = more under-trained."""
    out: dict[str, np.ndarray] = {}
    untied = w.input is not None and w.output is not None
    if untied:
        out["input_norm"] = row_norms(w.input)
    if reference_ids:
        m = w.unembedding
        bad = [i for i in reference_ids if not 0 <= i < m.shape[0]]
        if bad:
            from .errors import DataError

            raise DataError(f"reference ids outside the {m.shape[0]} embedding rows: {bad[:5]}")
        cos, l2 = _distances(m, list(reference_ids))
        out["cosine"] = cos
        if remove_pc1:
            mu, pc = first_principal_component(m)  # direction from a 16k-row sample on big matrices
            out["cosine_nopc1"], _ = _distances(m, list(reference_ids), mu=mu, pc=pc)
        out["l2_distance"] = l2
    elif not untied:
        from .errors import DataError

        raise DataError(
            "this model's embeddings are tied (or there is no separate input matrix): "
            "the indicators need reference tokens, and none were found or given"
        )
    if w.input is not None and not untied and not w.has_lm_head:
        # no LM head (encoders): the input rows only get input gradients, so their norm is informative too
        out["input_norm"] = row_norms(w.input)
    if w.bias is not None and len(w.bias) == w.n_rows:
        out["bias"] = w.bias.astype(np.float32)
    return out


def default_main_indicator(names: list[str], remove_pc1: bool = False) -> str:
    """magikarp's default: the first indicator (input norm for untied models, else cosine)."""
    if remove_pc1 and "cosine_nopc1" in names and "input_norm" not in names:
        return "cosine_nopc1"
    return names[0]


# --------------------------------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------------------------------
def select_candidates(
    indicator: np.ndarray, categories: list[str], *, percentile: float = 2.0, n_tokens: int | None = None
) -> tuple[float, list[int]]:
    """Threshold = `percentile`-th percentile over OK tokens; candidates = OK/OK_SPECIAL ids at or below it."""
    n = n_tokens if n_tokens is not None else len(categories)
    cats = np.asarray(categories[:n])
    ind = np.asarray(indicator[:n], dtype=np.float64)
    ok = cats == OK
    if not ok.any():
        return float("nan"), []
    thr = float(np.percentile(ind[ok], percentile))
    sel = np.flatnonzero(((cats == OK) | (cats == OK_SPECIAL)) & (ind <= thr))
    return thr, [int(i) for i in sel[np.argsort(ind[sel], kind="stable")]]


# --------------------------------------------------------------------------------------------------
# Token classes (paper 003, App. A) and script
# --------------------------------------------------------------------------------------------------
TOKEN_CLASSES = (
    "Special tokens",
    "Digits and numbers",
    "Punctuation",
    "Variable or function names",
    "ALL-CAPS Latin words",
    "Other Latin words",
    "Non-Latin words or characters",
    "Other",
)
_SPECIAL_RE = re.compile(r"<[^>]+>|\[[A-Za-z][^\]]*\]")
_NUMBER_RE = re.compile(r"[+-]?\d+")
_SNAKE_RE = re.compile(r"_*[A-Za-z0-9]+(?:_+[A-Za-z0-9]+)*_*")
_CAMEL_RE = re.compile(r"[A-Za-z]*[A-Z][A-Za-z]*")


def _is_latin_letter(ch: str) -> bool:
    return ch.isalpha() and unicodedata.name(ch, "").startswith("LATIN")


def token_class(text: str, *, special: bool = False) -> str:
    """Rule-based class of a token (paper 003 App. A), applied to its text without surrounding whitespace.

    Rules in order: special (`<…>`, `[…]` or a registered special token); digits with optional sign;
    punctuation (> 80% of the characters are `string.punctuation` or Unicode P*); variable/function names
    (words joined by `_`, or the paper's regex `^[a-zA-Z]*[A-Z][a-zA-Z]*$` restricted to names with an
    internal capital — as written the regex also matches every capitalised or all-caps word, which would leave
    the ALL-CAPS class empty, unlike the paper's Table 1); ALL-CAPS Latin; other Latin words; non-Latin.
    """
    t = text.strip().replace(SPIECE_UNDERLINE, " ").strip()
    if special or (_SPECIAL_RE.fullmatch(t) and "⟨" not in t):
        return "Special tokens"
    if not t or "⟨" in t:  # whitespace-only, or a partial UTF-8 fragment
        return "Other"
    if _NUMBER_RE.fullmatch(t):
        return "Digits and numbers"
    n_punct = sum(1 for c in t if c in string.punctuation or unicodedata.category(c).startswith("P"))
    if n_punct / len(t) > 0.8:
        return "Punctuation"
    if ("_" in t and _SNAKE_RE.fullmatch(t) and any(c.isalpha() for c in t)) or (
        _CAMEL_RE.fullmatch(t) and (re.search(r"[a-z][A-Z]", t) or re.search(r"[A-Z]{2}[a-z]", t))
    ):
        return "Variable or function names"
    if all(_is_latin_letter(c) for c in t):
        return "ALL-CAPS Latin words" if t.isupper() else "Other Latin words"
    if any(
        ord(c) > 127 and not _is_latin_letter(c) and not unicodedata.category(c).startswith(("P", "Z"))
        for c in t
    ):
        return "Non-Latin words or characters"
    return "Other"


# --------------------------------------------------------------------------------------------------
# Verification (methods.md §7)
# --------------------------------------------------------------------------------------------------
TEMPLATES: tuple[tuple[str, int, str, str, str], ...] = (
    # name, n, preamble, repeated unit, ending  ({T} = the token's text; 2n+1 times, 51 for repeats)
    (
        "input_output",
        20,
        "This device repeats its input exactly, as shown in these 100 identical trials.",
        "\nInput: «{T}»\nOutput: «{T}»",
        "\nInput: «{T}»\nOutput: «",
    ),
    (
        "assistant_explain",
        0,
        "This helpful assistant explains what a phrase means, replying with identical responses to identical "
        "questions for reliability.\nUser: What does 'edslfkj' mean?\nAssistant: 'edslfkj' has no specific "
        "meaning I am aware of.",
        "",
        "\nUser: what does '{T}' mean?\nAssistant: '",
    ),
    (
        "repeats",
        50,
        "Below is the output, as you can see it's just giving the same phrase repeated indefinitely:\n",
        "{T}",
        "{T}",
    ),
)


def verdict_for(max_prob: float, any_encodeable: bool) -> str:
    """strong/weak verified/rejected from a token's max probability over the prompts (methods.md §7)."""
    if max_prob > 0.9:
        return "strong_rejected"
    if max_prob > 0.1:
        return "weak_rejected"
    if not any_encodeable:
        return "verification_encoding_failed"
    if max_prob < 0.001:
        return "strong_verified"
    return "weak_verified"


@dataclass
class PromptResult:
    """One verification prompt for one candidate."""

    test_name: str
    encodeable: bool
    output: str
    max_prob: float


@dataclass
class Verification:
    """The verification of one candidate token."""

    id: int
    max_prob: float
    verdict: str
    prompts: list[PromptResult]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "id": self.id,
            "max_prob": self.max_prob,
            "verdict": self.verdict,
            "prompts": [p.__dict__ for p in self.prompts],
        }


def pick_device(device: str | None = None) -> str:
    """`device` if given, else CUDA when available, else CPU."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_lm(
    src: ModelSource | str, weights: EmbeddingWeights | None = None, *, device: str | None = None
) -> Any:
    """Load a causal LM for verification (safetensors or GGUF via transformers; never remote code)."""
    import torch

    src = src if isinstance(src, ModelSource) else resolve_model(src)
    if weights is not None and not weights.has_lm_head:
        archs = ", ".join(weights.config.get("architectures") or []) or "unknown architecture"
        raise ModelLoadError(
            f"{src.label} has no LM head ({archs}): verification is not possible (the indicators still work)"
        )
    device = pick_device(device)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    try:
        from transformers import AutoConfig, AutoModelForCausalLM

        kw: dict[str, Any] = {"dtype": dtype, "trust_remote_code": False}
        if src.kind == "gguf":
            kw["gguf_file"] = src.gguf_file
        else:
            cfg = AutoConfig.from_pretrained(str(src.folder), trust_remote_code=False)
            archs = " ".join(cfg.architectures or [])
            if archs and not re.search(r"(CausalLM|LMHead)", archs):
                raise ModelLoadError(
                    f"{src.label} is a {archs}, not a causal LM with an LM head: "
                    "verification is not possible (the indicators still work)"
                )
        kw["use_safetensors"] = True if src.kind == "safetensors" else None
        model, info = AutoModelForCausalLM.from_pretrained(str(src.folder), output_loading_info=True, **kw)
    except ModelLoadError:
        raise
    except Exception as e:
        raise ModelLoadError(
            f"{src.label}: cannot load the model for verification ({e.__class__.__name__}: {e})"
        ) from e
    missing = [k for k in (info.get("missing_keys") or []) if "lm_head" in k or "embed_out" in k]
    if missing and not getattr(model.config, "tie_word_embeddings", False):
        raise ModelLoadError(
            f"{src.label}: the checkpoint has no LM head weights ({missing[0]}): verification is not possible"
        )
    model.eval().to(device)
    return model, device


class Verifier:
    """Runs the three verification prompts for candidate ids, batched, on one device."""

    def __init__(
        self, model: Any, tok: LoadedTokenizer, *, device: str = "cpu", round_trip: RoundTrip | None = None
    ) -> None:
        self.model = model
        self.tok = tok
        self.device = device
        self.tk = _decode_tokenizer(tok)
        self.rt = round_trip or round_trip_categories(tok)
        self.placeholder, self.prompts = self._build_prompts()

    def _placeholder_candidates(self) -> list[int]:
        ids = []
        for i, c in enumerate(self.rt.categories):
            if c != OK:
                continue
            s = self.rt.decoded[i]
            if s.isascii() and s.isalpha():
                ids.append(i)
        ids.sort(key=lambda i: (-len(set(self.rt.decoded[i])), -len(self.rt.decoded[i]), i))
        return ids

    def _build_prompts(self) -> tuple[int, list[tuple[str, list[int]]]]:
        tk = self.tk
        for p in self._placeholder_candidates()[:5000]:
            if tk.encode(tk.decode([p, p], skip_special_tokens=False), add_special_tokens=False).ids != [
                p,
                p,
            ]:
                continue
            text = self.rt.decoded[p]
            prompts = []
            for name, n, pre, unit, end in TEMPLATES:
                s = pre + unit.replace("{T}", text) * n + end.replace("{T}", text)
                ids = tk.encode(s, add_special_tokens=True).ids
                if ids.count(p) != unit.count("{T}") * n + end.count("{T}"):
                    break
                prompts.append((name, ids))
            else:
                return p, prompts
        raise UnsupportedTokenizerError(
            f"{self.tok.name}: found no placeholder token whose prompts re-encode exactly; cannot verify"
        )

    def _run_batch(self, ids: list[int], prompt: list[int], p: int) -> tuple[np.ndarray, list[list[int]]]:
        import torch

        base = torch.tensor(prompt, dtype=torch.long)
        mask = base == p
        x = base.repeat(len(ids), 1)
        cand = torch.tensor(ids, dtype=torch.long)
        x[:, mask] = cand[:, None]
        x = x.to(self.device)
        cand_d = cand.to(self.device)
        probs = np.zeros((len(ids), 3), dtype=np.float64)
        gen: list[list[int]] = [[] for _ in ids]
        rows = torch.arange(len(ids), device=self.device)
        with torch.inference_mode():
            try:
                out = self.model(input_ids=x, use_cache=True, logits_to_keep=1)
            except TypeError:
                out = self.model(input_ids=x, use_cache=True)
            for step in range(3):
                logits = out.logits[:, -1, :].float()
                pr = torch.softmax(logits, dim=-1)
                probs[:, step] = (
                    pr[rows, cand_d].double().cpu().numpy() if cand_d.max() < pr.shape[1] else 0.0
                )
                nxt = logits.argmax(dim=-1)
                for r, t in enumerate(nxt.tolist()):
                    gen[r].append(t)
                if step < 2:
                    try:
                        out = self.model(
                            input_ids=nxt[:, None],
                            past_key_values=out.past_key_values,
                            use_cache=True,
                            logits_to_keep=1,
                        )
                    except TypeError:
                        out = self.model(
                            input_ids=nxt[:, None], past_key_values=out.past_key_values, use_cache=True
                        )
        return probs, gen

    def _encodeable(self, prompt: list[int], p: int, cid: int) -> bool:
        ids = [cid if t == p else t for t in prompt]
        text = self.tk.decode(ids, skip_special_tokens=False)
        return cid in self.tk.encode(text, add_special_tokens=False).ids

    def verify(
        self,
        ids: list[int],
        *,
        batch_size: int = 8,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_result: Callable[[Verification], None] | None = None,
    ) -> list[Verification]:
        """Verify candidates in batches; stops early (keeping finished results) when `should_stop()` is true.
        `on_result` receives each finished verification at once (so an interrupted run keeps them)."""
        results: list[Verification] = []
        total = len(ids)
        report(progress, 0, total, "candidates verified")
        for s in range(0, total, batch_size):
            if should_stop and should_stop():
                break
            chunk = [int(i) for i in ids[s : s + batch_size]]
            per: list[list[PromptResult]] = [[] for _ in chunk]
            for name, prompt in self.prompts:
                probs, gen = self._run_batch(chunk, prompt, self.placeholder)
                for r, cid in enumerate(chunk):
                    per[r].append(
                        PromptResult(
                            name,
                            self._encodeable(prompt, self.placeholder, cid),
                            self.tk.decode(gen[r], skip_special_tokens=False),
                            float(probs[r].max()),
                        )
                    )
            for r, cid in enumerate(chunk):
                mp = max(p.max_prob for p in per[r])
                results.append(
                    Verification(cid, mp, verdict_for(mp, any(p.encodeable for p in per[r])), per[r])
                )
                if on_result:
                    on_result(results[-1])
            report(progress, len(results), total, "candidates verified")
        return results


# --------------------------------------------------------------------------------------------------
# The whole analysis
# --------------------------------------------------------------------------------------------------
@dataclass
class UndertrainedResult:
    """Everything the page and the CLI show for one model + tokenizer."""

    model_label: str
    tokenizer_name: str
    weights: dict[str, Any]
    tied: bool
    has_lm_head: bool
    n_rows: int
    n_tokens: int
    references: References
    indicators: dict[str, np.ndarray]
    main: str
    round_trip: RoundTrip
    tokens: list[str]
    specials: set[int]
    threshold: float
    percentile: float
    candidates: list[int]
    verifications: dict[int, Verification] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def main_values(self) -> np.ndarray:
        """The main indicator over all rows."""
        return self.indicators[self.main]

    def stats(self) -> dict[str, float]:
        """Mean ± std of the main indicator over the tokenizer's tokens."""
        v = self.main_values[: self.n_tokens].astype(np.float64)
        return {"mean": float(v.mean()), "std": float(v.std())}

    def category(self, i: int) -> str:
        """Round-trip category of an id (PADDING_ROW beyond the tokenizer)."""
        return self.round_trip.categories[i] if i < len(self.round_trip.categories) else PADDING_ROW

    def token_class(self, i: int) -> str:
        """Paper-003 class of an id."""
        if i >= self.n_tokens:
            return "Other"
        return token_class(self.tokens[i], special=i in self.specials)

    def candidate_rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The candidates as `{"id", "token", "indicator", …}` (+ max_prob, verdict when verified)."""
        out = []
        refs = set(self.references.ids)
        for i in self.candidates[:limit]:
            row: dict[str, Any] = {
                "id": i,
                "token": self.tokens[i],
                "indicator": float(self.main_values[i]),
                "category": self.category(i),
                "class": self.token_class(i),
                "script": text_script(self.tokens[i]),
                "reference": i in refs,
            }
            v = self.verifications.get(i)
            if v is not None:
                row["max_prob"] = v.max_prob
                row["verdict"] = v.verdict
            out.append(row)
        return out

    def reference_validation(self) -> dict[str, Any] | None:
        """How the held-out known-unused tokens rank under the main indicator (share in the lowest 5%)."""
        held = [i for i in self.references.held_out if i < self.n_tokens]
        if not held:
            return None
        v = self.main_values[: self.n_tokens]
        ranks = np.argsort(np.argsort(v, kind="stable"), kind="stable")
        pct = ranks[held] / len(v)
        return {
            "held_out": len(held),
            "share_lowest_5pct": float((pct < 0.05).mean()),
            "median_percentile": float(np.median(pct) * 100),
        }

    def to_json(self, *, max_candidates: int | None = None) -> dict[str, Any]:
        """The CLI's JSON document."""
        return {
            "model": self.model_label,
            "tokenizer": self.tokenizer_name,
            "tied": self.tied,
            "has_lm_head": self.has_lm_head,
            "weights": self.weights,
            "rows": self.n_rows,
            "tokens": self.n_tokens,
            "reference_ids": self.references.ids,
            "reference_source": self.references.source,
            "reference_reasons": {str(i): self.references.reasons.get(i, "") for i in self.references.ids},
            "indicator": self.main,
            "indicator_label": INDICATOR_LABELS.get(self.main, self.main),
            "indicator_names": list(self.indicators),
            "indicator_stats": self.stats(),
            "percentile": self.percentile,
            "threshold": self.threshold,
            "n_candidates": len(self.candidates),
            "reference_validation": self.reference_validation(),
            "candidates": self.candidate_rows(max_candidates),
            "verified": len(self.verifications),
            "verdict_counts": _count(v.verdict for v in self.verifications.values()),
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "notes": self.notes,
        }


def _count(xs: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def analyze(
    model: str | ModelSource,
    tokenizer: LoadedTokenizer | None = None,
    *,
    reference_ids: list[int] | None = None,
    remove_pc1: bool = False,
    percentile: float = 2.0,
    main: str | None = None,
    weights: EmbeddingWeights | None = None,
) -> UndertrainedResult:
    """Indicators, references, round-trip categories and candidates for a model (no verification)."""
    t0 = time.perf_counter()
    src = model if isinstance(model, ModelSource) else resolve_model(model)
    tok = tokenizer or tokenizer_for_model(src)
    t1 = time.perf_counter()
    w = weights or load_embeddings(src, vocab_size=tok.vocab_size)
    t2 = time.perf_counter()
    notes = list(w.notes)
    n_rows = w.n_rows
    n_tokens = min(tok.vocab_size, n_rows)
    if n_rows < tok.vocab_size:
        notes.append(
            f"the tokenizer has {tok.vocab_size} tokens but the model only {n_rows} rows; "
            "ids ≥ rows are ignored (wrong tokenizer?)"
        )
    rt = round_trip_categories(tok)
    t3 = time.perf_counter()
    if reference_ids:
        refs = user_references(reference_ids, tok)
    else:
        pad = row_norms(_row_slice(w.unembedding, tok.vocab_size)) if n_rows > tok.vocab_size else None
        dups = duplicate_row_groups(w.unembedding)
        refs = auto_references(tok, n_rows, padding_norms=pad, round_trip=rt, duplicate_groups=dups)
    refs.ids = [i for i in refs.ids if i < n_rows]
    indicators = compute_indicators(w, refs.ids or None, remove_pc1=remove_pc1)
    t4 = time.perf_counter()
    names = list(indicators)
    main = main or default_main_indicator(names, remove_pc1)
    if main not in indicators:
        from .errors import DataError

        raise DataError(f"indicator {main!r} is not available here; choose one of {', '.join(names)}")
    id_to_tok = tok.id_to_token
    tokens = [tok.readable(id_to_tok[i]) if i in id_to_tok else f"⟨row {i}⟩" for i in range(n_rows)]
    thr, cands = select_candidates(indicators[main], rt.categories, percentile=percentile, n_tokens=n_tokens)
    return UndertrainedResult(
        model_label=src.label,
        tokenizer_name=tok.name,
        weights=w.summary(),
        tied=w.tied,
        has_lm_head=w.has_lm_head,
        n_rows=n_rows,
        n_tokens=n_tokens,
        references=refs,
        indicators=indicators,
        main=main,
        round_trip=rt,
        tokens=tokens,
        specials=special_ids(tok),
        threshold=thr,
        percentile=percentile,
        candidates=cands,
        timings={"tokenizer": t1 - t0, "read_weights": t2 - t1, "round_trip": t3 - t2, "indicators": t4 - t3},
        notes=notes,
    )


def _row_slice(m: Matrix, start: int) -> Matrix:
    return Matrix(m.raw[start:], m.dtype, m.name)


def verify_result(
    result: UndertrainedResult,
    model: str | ModelSource,
    tok: LoadedTokenizer,
    k: int,
    *,
    device: str | None = None,
    batch_size: int = 8,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    lm: tuple[Any, str] | None = None,
) -> list[Verification]:
    """Verify the first `k` candidates of a result (stored in `result.verifications`); returns them."""
    src = model if isinstance(model, ModelSource) else resolve_model(model)
    if not result.has_lm_head:
        raise ModelLoadError(
            f"{src.label} has no LM head: verification is not possible (the indicators still work)"
        )
    t0 = time.perf_counter()
    net, dev = lm or load_lm(src, device=device)
    t1 = time.perf_counter()
    ver = Verifier(net, tok, device=dev, round_trip=result.round_trip)
    todo = [i for i in result.candidates[:k] if i not in result.verifications]
    out = ver.verify(
        todo,
        batch_size=batch_size,
        progress=progress,
        should_stop=should_stop,
        on_result=lambda v: result.verifications.__setitem__(v.id, v),
    )
    result.timings["load_lm"] = t1 - t0
    result.timings["verify"] = time.perf_counter() - t1
    result.timings["verify_device_" + dev] = 1.0
    return out


# --------------------------------------------------------------------------------------------------
# Token-health table (joined with STT)
# --------------------------------------------------------------------------------------------------
def stt_status(tok: LoadedTokenizer) -> dict[int, str]:
    """STT category per id from analysis.reachability (reachable, unreachable_multi, special, …); {} for non-BPE."""
    from .bpe import stt as rb

    try:
        if hasattr(rb, "stt_report"):
            return {r.id: r.category for r in rb.stt_report(tok).rows}
        un = rb.unreachable_ids(tok)
    except UnsupportedTokenizerError:
        return {}
    out = {i: "reachable" for i in tok.vocab.values()}
    for i in un:
        out[i] = "unreachable"
    for i in tok.added_ids:
        out[i] = "special"
    return out


def health_table(result: UndertrainedResult, stt: dict[int, str] | None = None) -> Any:
    """One row per token: indicators, rank, round-trip category, class, script, reference, verdict, STT."""
    import pandas as pd

    n = result.n_rows
    main = result.main_values
    order = np.argsort(main, kind="stable")
    pct = np.empty(n, dtype=np.float64)
    pct[order] = np.arange(n) / max(1, n)
    data: dict[str, Any] = {
        "id": np.arange(n),
        "token": result.tokens,
        "round_trip": [result.category(i) for i in range(n)],
        "class": [result.token_class(i) for i in range(n)],
        "script": [text_script(t) if i < result.n_tokens else "" for i, t in enumerate(result.tokens)],
    }
    for k, v in result.indicators.items():
        data[k] = v
    data["percentile"] = np.round(pct * 100, 3)
    refs = set(result.references.ids)
    data["reference"] = [i in refs for i in range(n)]
    cset = set(result.candidates)
    data["candidate"] = [i in cset for i in range(n)]
    data["max_prob"] = [
        result.verifications[i].max_prob if i in result.verifications else math.nan for i in range(n)
    ]
    data["verdict"] = [result.verifications[i].verdict if i in result.verifications else "" for i in range(n)]
    if stt is not None:
        data["stt"] = [stt.get(i, "n/a") for i in range(n)]
    return pd.DataFrame(data)

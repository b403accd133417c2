"""Batch-level dynamic tokenization (Feher, Vulić, Minixhofer, "Retrofitting Large Language Models with Dynamic
Tokenization", arXiv 2411.18553, 2024).

Every example of a batch is tokenized with the base tokenizer (Rust `encode_batch`, no special tokens, tokens
as strings). Then, for up to `max_merges` iterations, the adjacent pairs of the whole batch are counted (valid
pairs only), the most frequent pair is chosen (ties: the pair that occurs first in the batch, i.e. first
inserted into a fresh counter) and its non-overlapping occurrences are replaced left to right in every
sequence. There is no vocabulary check: merged strings need not be in any vocabulary.

Pair validity (memoised per pair):

* space-like rule, on the bytes the two tokens stand for: a space-like byte (space, `\\n`, `\\t`; `Ġ Ċ ĉ` in a
  byte-level vocabulary, `▁` and `<0x0A>`/`<0x09>` in a SentencePiece-style one) may only be the first byte
  of the concatenation, unless every byte is space-like; a concatenation containing `\\n\\n` is always
  rejected. For SentencePiece vocabularies this makes `▁` (a word start) a hard left boundary: a merged token
  never holds a `▁` after its first character, so merges never cross words;
* added (special) tokens never merge with anything, in every mode;
* bytes that do not decode as UTF-8 (a partial character) → accepted;
* `pretokens`: the base pre-tokenizer yields exactly one piece for the decoded concatenation (a tokenizer
  without a pre-tokenizer, like Llama-2, counts as one piece: the space-like rule is then the boundary);
* `word`: a whitespace split of the decoded text gives at most one piece;
* `word_hyphen`: as `word`, and a non-punctuation token joins a punctuation token only if that one is `-`;
* `sentence`: only the special-token and space-like rules.

The merge loop is incremental: positions are nodes of per-sequence linked lists over one flat array, pair
counts and a pair → left-positions index are kept up to date, and a merge only touches the neighbours of the
replaced occurrences. `merge_naive` is the recount-every-iteration baseline (benchmarks and tests).
"""

from __future__ import annotations

import heapq
import re
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.tokenizer.alphabets import readable_from_bytes
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .report import DynamicResult, MergeStep

BOUNDARIES = ("pretokens", "word", "word_hyphen", "sentence")
#: "Until no valid pair is left": a merge budget no batch reaches.
FULL_MERGES = 10**9
#: The full curve the page draws and `dynamic --full-curve` reports: until no valid pair is left, at most this
#: many merges.
FULL_CURVE_MERGES = 5000

#: The work bound: the merge loop's time and memory grow about linearly with the batch (≈ 1 s and 60 MB per
#: 100,000 characters), so one example and one batch are capped before tokenizing.
MAX_TEXT_CHARS = 100_000
MAX_BATCH_CHARS = 500_000
SPACE_BYTES = frozenset(b" \n\t")
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


# --------------------------------------------------------------------------------------------------
# Validity
# --------------------------------------------------------------------------------------------------
def _is_punct(text: str) -> bool:
    """True when the text (leading whitespace ignored) is made only of punctuation characters."""
    s = text.lstrip()
    return bool(s) and all(unicodedata.category(c).startswith("P") for c in s)


def tokens_concatenate(tok: LoadedTokenizer) -> bool:
    """Whether the tokenizer's token strings concatenate to the text (BPE, Unigram), as merging adjacent tokens
    needs; WordPiece's '##' continuation pieces do not."""
    return not (tok.model_type == "WordPiece" or tok.continuing_subword_prefix)


class PairRules:
    """Decides (and memoises) whether two adjacent token strings may merge under a boundary mode."""

    def __init__(self, tok: LoadedTokenizer, boundary: str = "pretokens") -> None:
        """Set up the rules for one tokenizer and boundary mode."""
        if boundary not in BOUNDARIES:
            raise DataError(f"unknown boundary {boundary!r}; choose one of {', '.join(BOUNDARIES)}")
        if not tokens_concatenate(tok):
            raise UnsupportedTokenizerError(
                f"{tok.name}: dynamic tokenization needs a BPE/Unigram tokenizer whose token strings concatenate"
                " to the text (WordPiece '##' continuation pieces do not)"
            )
        self.tok = tok
        self.boundary = boundary
        self.specials = frozenset(a.content for a in tok.added_tokens)
        self.pre_tokenizer = tok.tokenizer.pre_tokenizer if boundary == "pretokens" else None
        self._bytes: dict[str, bytes] = {}
        self._memo: dict[tuple[str, str], bool] = {}

    def token_bytes(self, s: str) -> bytes:
        """The bytes a (possibly merged) token string stands for."""
        b = self._bytes.get(s)
        if b is None:
            if s in self.specials:
                b = s.encode("utf-8")
            elif self.tok.is_byte_level or not _BYTE_PIECE.search(s):
                b = self.tok.token_bytes(s)
            else:  # SentencePiece string with <0xNN> byte pieces inside (a merged token)
                out = bytearray()
                pos = 0
                for m in _BYTE_PIECE.finditer(s):
                    if m.start() > pos:
                        out += self.tok.token_bytes(s[pos : m.start()])
                    out.append(int(m.group(1), 16))
                    pos = m.end()
                if pos < len(s):
                    out += self.tok.token_bytes(s[pos:])
                b = bytes(out)
            self._bytes[s] = b
        return b

    def remember_merge(self, left: str, right: str) -> str:
        """The merged string; its bytes are the concatenation of both sides' bytes."""
        merged = left + right
        if merged not in self._bytes:
            self._bytes[merged] = self.token_bytes(left) + self.token_bytes(right)
        return merged

    def valid(self, left: str, right: str) -> bool:
        """Whether `left` and `right` may merge (memoised)."""
        key = (left, right)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._decide(left, right)
            self._memo[key] = hit
        return hit

    def _decide(self, left: str, right: str) -> bool:
        if left in self.specials or right in self.specials:
            return False
        lb, rb = self.token_bytes(left), self.token_bytes(right)
        b = lb + rb
        if b"\n\n" in b:
            return False
        if not all(x in SPACE_BYTES for x in b) and any(x in SPACE_BYTES for x in b[1:]):
            return False
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            return True  # a partial character: accept
        if self.boundary == "sentence":
            return True
        if self.boundary == "pretokens":
            if self.pre_tokenizer is None:
                return True
            return len(self.pre_tokenizer.pre_tokenize_str(text)) == 1
        if len(text.split()) > 1:
            return False
        if self.boundary == "word_hyphen":
            try:
                lt, rt = lb.decode("utf-8"), rb.decode("utf-8")
            except UnicodeDecodeError:
                return True
            lp, rp = _is_punct(lt), _is_punct(rt)
            if lp != rp:
                punct = lt if lp else rt
                return punct.strip() == "-"
        return True


# --------------------------------------------------------------------------------------------------
# Base tokenization
# --------------------------------------------------------------------------------------------------
def base_tokenize(
    tok: LoadedTokenizer, texts: list[str]
) -> tuple[list[list[str]], list[list[int]], list[list[tuple[int, int]]]]:
    """Tokens (strings), ids and offsets of every text under the base tokenizer (no special tokens)."""
    encs = tok.tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [e.tokens for e in encs], [e.ids for e in encs], [e.offsets for e in encs]


# --------------------------------------------------------------------------------------------------
# Incremental merging
# --------------------------------------------------------------------------------------------------
def merge_incremental(
    sequences: list[list[str]], rules: PairRules, max_merges: int
) -> tuple[list[list[str]], list[list[tuple[int, int]]], list[MergeStep], list[float], bool]:
    """BPE-style merging of a batch with maintained pair counts and a pair → positions index."""
    n_seq = len(sequences)
    flat: list[str] = []
    nxt: list[int] = []
    prv: list[int] = []
    end: list[int] = []  # exclusive base index (within the sequence) covered by the node
    starts: list[int] = []
    for seq in sequences:
        base = len(flat)
        starts.append(base)
        n = len(seq)
        for j, t in enumerate(seq):
            flat.append(t)
            prv.append(base + j - 1 if j > 0 else -1)
            nxt.append(base + j + 1 if j < n - 1 else -1)
            end.append(j + 1)
    alive = [True] * len(flat)
    counts: dict[tuple[str, str], int] = {}
    where: dict[tuple[str, str], set[int]] = {}
    # lazy max-heap of (-count, lower bound of the first position, pair); an entry is live when its count is
    # the pair's count, and it is accepted when its bound is the pair's true first position (ties: earliest)
    heap: list[tuple[int, int, tuple[str, str]]] = []
    first: dict[tuple[str, str], int] = {}  # per pair, a lower bound of min(where[pair])
    valid = rules.valid
    building = True

    def add(pair: tuple[str, str], pos: int) -> None:
        if not valid(*pair):
            return
        c = counts.get(pair, 0)
        if c:
            where[pair].add(pos)
            if pos < first[pair]:
                first[pair] = pos
        else:
            where[pair] = {pos}
            first[pair] = pos
        counts[pair] = c + 1
        if not building:
            heapq.heappush(heap, (-(c + 1), first[pair], pair))

    def remove(pair: tuple[str, str], pos: int) -> None:
        c = counts.get(pair)
        if not c:
            return
        s = where[pair]
        if pos not in s:
            return
        s.discard(pos)
        if c == 1:
            del counts[pair]
            del where[pair]
            del first[pair]
        else:
            counts[pair] = c - 1
            heapq.heappush(heap, (1 - c, first[pair], pair))

    def pop_best() -> tuple[tuple[str, str], int] | None:
        while heap:
            negc, bound, pair = heapq.heappop(heap)
            if counts.get(pair) != -negc:
                continue  # stale count
            true_first = min(where[pair])
            first[pair] = true_first
            if true_first == bound:
                return pair, -negc
            heapq.heappush(heap, (negc, true_first, pair))
        return None

    for i, t in enumerate(flat):
        j = nxt[i]
        if j >= 0:
            add((t, flat[j]), i)
    building = False
    heap = [(-c, first[p], p) for p, c in counts.items()]
    heapq.heapify(heap)
    total = sum(len(s) for s in sequences)
    curve = [total / n_seq if n_seq else 0.0]
    steps: list[MergeStep] = []
    exhausted = False
    for _ in range(max_merges):
        top = pop_best()
        if top is None:
            exhausted = True
            break
        best, chosen_count = top
        left, right = best
        merged = rules.remember_merge(left, right)
        replaced = 0
        for i in sorted(where[best]):
            if not alive[i] or flat[i] != left:
                continue
            j = nxt[i]
            if j < 0 or flat[j] != right:
                continue
            p, n = prv[i], nxt[j]
            if p >= 0:
                remove((flat[p], left), p)
            remove((left, right), i)
            if n >= 0:
                remove((right, flat[n]), j)
            flat[i] = merged
            alive[j] = False
            nxt[i] = n
            if n >= 0:
                prv[n] = i
            end[i] = end[j]
            if p >= 0:
                add((flat[p], merged), p)
            if n >= 0:
                add((merged, flat[n]), i)
            replaced += 1
        total -= replaced
        steps.append(MergeStep(left, right, merged, chosen_count, replaced))
        curve.append(total / n_seq)
    else:
        exhausted = not counts
    out_tokens: list[list[str]] = []
    out_spans: list[list[tuple[int, int]]] = []
    for s, seq in zip(starts, sequences):
        toks: list[str] = []
        spans: list[tuple[int, int]] = []
        i = s if seq else -1
        while i >= 0:
            toks.append(flat[i])
            spans.append((i - s, end[i]))
            i = nxt[i]
        out_tokens.append(toks)
        out_spans.append(spans)
    return out_tokens, out_spans, steps, curve, exhausted


def merge_naive(
    sequences: list[list[str]], rules: PairRules, max_merges: int
) -> tuple[list[list[str]], list[MergeStep], list[float], bool]:
    """The baseline: recount every valid pair of the batch at every iteration (Algorithm 1 as written)."""
    seqs = [list(s) for s in sequences]
    n_seq = len(seqs)
    total = sum(len(s) for s in seqs)
    curve = [total / n_seq if n_seq else 0.0]
    steps: list[MergeStep] = []
    for _ in range(max_merges):
        freqs: Counter[tuple[str, str]] = Counter()
        for s in seqs:
            for pair in zip(s, s[1:]):
                if rules.valid(*pair):
                    freqs[pair] += 1
        if not freqs:
            return seqs, steps, curve, True
        best, count = max(freqs.items(), key=lambda kv: kv[1])  # ties: the first inserted
        merged = rules.remember_merge(*best)
        replaced = 0
        for k, s in enumerate(seqs):
            out: list[str] = []
            i = 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == best[0] and s[i + 1] == best[1]:
                    out.append(merged)
                    i += 2
                    replaced += 1
                else:
                    out.append(s[i])
                    i += 1
            seqs[k] = out
        total -= replaced
        steps.append(MergeStep(best[0], best[1], merged, count, replaced))
        curve.append(total / n_seq)
    exhausted = not any(rules.valid(a, b) for s in seqs for a, b in zip(s, s[1:]))
    return seqs, steps, curve, exhausted


# --------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------
def dynamic_tokenize(
    tok: LoadedTokenizer,
    texts: list[str],
    max_merges: int = 100,
    boundary: str = "pretokens",
    *,
    special_tokens: bool = False,
) -> DynamicResult:
    """Tokenize a batch with the base tokenizer, then merge its most frequent valid pairs up to max_merges times.

    With `special_tokens`, every sequence carries the special tokens the tokenizer's post-processor adds (BOS,
    EOS, ``[CLS]`` …; :func:`special_frame`): they count in the sequence lengths and never merge."""
    texts = [t for t in texts if isinstance(t, str)]
    if not texts:
        raise DataError("dynamic tokenization needs at least one text in the batch")
    if max_merges < 0:
        raise DataError("the number of merges cannot be negative")
    check_batch_size(texts)
    rules = PairRules(tok, boundary)
    base_tokens, base_ids, base_offsets = base_tokenize(tok, texts)
    if special_tokens:
        base_tokens, base_ids, base_offsets = _with_specials(
            tok, rules, texts, base_tokens, base_ids, base_offsets
        )
    t0 = time.perf_counter()
    tokens, spans, steps, curve, exhausted = merge_incremental(base_tokens, rules, max_merges)
    seconds = time.perf_counter() - t0
    return DynamicResult(
        tokenizer=tok.name,
        boundary=boundary,
        texts=list(texts),
        base_tokens=base_tokens,
        base_ids=base_ids,
        base_offsets=[[tuple(o) for o in offs] for offs in base_offsets],
        tokens=tokens,
        spans=spans,
        merges=steps,
        merges2seqlen=curve,
        exhausted=exhausted,
        seconds=seconds,
        extra={"special_tokens": special_tokens},
    )


# --------------------------------------------------------------------------------------------------
# Special tokens in the sequence lengths
# --------------------------------------------------------------------------------------------------
def special_frame(tok: LoadedTokenizer) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The (token, id) pairs the post-processor puts before and after one sequence (e.g. Llama's ``<s>``)."""
    probe = "x"
    framed = tok.tokenizer.encode(probe, add_special_tokens=True)
    bare = tok.tokenizer.encode(probe, add_special_tokens=False).ids
    n = len(bare)
    for k in range(len(framed.ids) - n + 1):
        if framed.ids[k : k + n] == bare:
            pre = list(zip(framed.tokens[:k], framed.ids[:k]))
            post = list(zip(framed.tokens[k + n :], framed.ids[k + n :]))
            return pre, post
    return [], []


def _with_specials(
    tok: LoadedTokenizer,
    rules: PairRules,
    texts: list[str],
    tokens: list[list[str]],
    ids: list[list[int]],
    offsets: list[list[tuple[int, int]]],
) -> tuple[list[list[str]], list[list[int]], list[list[tuple[int, int]]]]:
    """Every sequence framed by the post-processor's special tokens (empty offsets at its start and end)."""
    pre, post = special_frame(tok)
    rules.specials = rules.specials | {t for t, _ in pre + post}
    pt, pi = [t for t, _ in pre], [i for _, i in pre]
    qt, qi = [t for t, _ in post], [i for _, i in post]
    out_offsets = [
        [(0, 0)] * len(pre) + [tuple(o) for o in offs] + [(len(text), len(text))] * len(post)
        for text, offs in zip(texts, offsets)
    ]
    return [pt + t + qt for t in tokens], [pi + i + qi for i in ids], out_offsets


def check_batch_size(texts: list[str]) -> None:
    """Refuse a batch whose merge loop would run for minutes and take gigabytes (see :data:`MAX_TEXT_CHARS`)."""
    for k, t in enumerate(texts, 1):
        if len(t) > MAX_TEXT_CHARS:
            raise DataError(
                f"example {k} is over {MAX_TEXT_CHARS:,} characters: dynamic tokenization takes at most "
                f"{MAX_TEXT_CHARS:,} per example and {MAX_BATCH_CHARS:,} per batch (its time and memory grow "
                "with the batch); split the text into lines or use a shorter one"
            )
    total = sum(len(t) for t in texts)
    if total > MAX_BATCH_CHARS:
        raise DataError(
            f"the batch is over {MAX_BATCH_CHARS:,} characters: dynamic tokenization takes at most "
            f"{MAX_BATCH_CHARS:,} per batch and {MAX_TEXT_CHARS:,} per example (its time and memory grow with "
            "the batch); use fewer or shorter lines"
        )


def merged_offsets(result: DynamicResult, k: int) -> list[tuple[int, int]]:
    """Character offsets of sequence k's merged tokens (first base token's start, last one's end)."""
    offs = result.base_offsets[k]
    return [(offs[a][0], offs[b - 1][1]) for a, b in result.spans[k]]


def readable_token(tok: LoadedTokenizer, token: str, rules: PairRules | None = None) -> str:
    """The text a (possibly merged) token string stands for; partial UTF-8 shown like ⟨E2 80⟩.

    Pass one `PairRules` when converting many tokens: it memoises their bytes."""
    rules = rules or PairRules(tok, "sentence")
    if token in rules.specials:
        return token
    return readable_from_bytes(rules.token_bytes(token))


def merged_ids(result: DynamicResult, k: int) -> list[int]:
    """Ids of sequence k's tokens after merging: the base id of an unmerged token, -1 for a merged one."""
    ids = result.base_ids[k]
    return [ids[a] if b - a == 1 else -1 for a, b in result.spans[k]]


# --------------------------------------------------------------------------------------------------
# Sampling the number of merges per batch
# --------------------------------------------------------------------------------------------------
@dataclass
class BatchRun:
    """One batch of :func:`dynamic_batches`: its maximum merge count, the merges used and the lengths."""

    index: int
    sequences: int
    m_max: int
    merges: int
    tokens_before: int
    tokens_after: int
    tokens_at_max: int

    @property
    def reduction_pct(self) -> float:
        """Reduction of the batch's total length, in percent of the initial length."""
        return 100.0 * (1 - self.tokens_after / self.tokens_before) if self.tokens_before else 0.0

    @property
    def reduction_of_max_pct(self) -> float:
        """Reduction in percent of the maximum (boundary-level) reduction (the paper's scale)."""
        span = self.tokens_before - self.tokens_at_max
        return 100.0 * (self.tokens_before - self.tokens_after) / span if span > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly record."""
        return {
            **self.__dict__,
            "reduction_pct": self.reduction_pct,
            "reduction_of_max_pct": self.reduction_of_max_pct,
        }


@dataclass
class SampledBatches:
    """Dynamic tokenization batch by batch (:func:`sampled_batches`): what `dynamic --batch-size … --json`
    prints and the page's "sample the number of merges per batch" offers as JSON."""

    tokenizer: str
    boundary: str
    #: True when each batch's merge count was drawn from U(0, m_max)
    sampled: bool
    seed: int
    special_tokens: bool
    runs: list[BatchRun]

    def to_json(self) -> dict[str, Any]:
        """The parameters and one record per batch (:meth:`BatchRun.to_json`)."""
        return {
            "tokenizer": self.tokenizer,
            "boundary": self.boundary,
            "sampled": self.sampled,
            "seed": self.seed,
            "special_tokens": self.special_tokens,
            "batches": [r.to_json() for r in self.runs],
        }


def sampled_batches(
    tok: LoadedTokenizer,
    texts: list[str],
    *,
    batch_size: int = 32,
    merges: int | None = None,
    seed: int = 0,
    boundary: str = "pretokens",
    special_tokens: bool = False,
) -> SampledBatches:
    """:func:`dynamic_batches` with its parameters, as one result."""
    runs = dynamic_batches(tok, texts, batch_size=batch_size, merges=merges, seed=seed, boundary=boundary,
                           special_tokens=special_tokens)  # fmt: skip
    return SampledBatches(tok.name, boundary, merges is None, seed, special_tokens, runs)


def dynamic_batches(
    tok: LoadedTokenizer,
    texts: list[str],
    *,
    batch_size: int = 32,
    merges: int | None = None,
    seed: int = 0,
    boundary: str = "pretokens",
    special_tokens: bool = False,
) -> list[BatchRun]:
    """Dynamic tokenization batch by batch, as Feher et al. train: each batch's merge count is `merges` (capped
    at the batch's maximum) or, when `merges` is None, sampled per batch from U(0, m_max), where m_max is the
    batch's merge count at the boundary level (merging until no valid pair is left)."""
    if batch_size < 1:
        raise DataError("the batch size must be at least 1")
    texts = [t for t in texts if isinstance(t, str)]
    if not texts:
        raise DataError("dynamic tokenization needs at least one text")
    if merges is not None and merges < 0:
        raise DataError("the number of merges cannot be negative")
    rng = np.random.default_rng(seed)
    runs = []
    for k in range(0, len(texts), batch_size):
        batch = texts[k : k + batch_size]
        full = dynamic_tokenize(tok, batch, FULL_MERGES, boundary, special_tokens=special_tokens)
        m_max = len(full.merges)
        m = int(rng.integers(0, m_max + 1)) if merges is None else min(int(merges), m_max)
        # merging is greedy and deterministic: the first m merges of the full run are the run with m merges
        before, after, at_max = (round(full.merges2seqlen[j] * len(batch)) for j in (0, m, m_max))
        runs.append(BatchRun(len(runs), len(batch), m_max, m, before, after, at_max))
    return runs

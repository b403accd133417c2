"""The export check: pre-flight checks, tokenization parity with llama.cpp and the round trip before and after an
edit, for an exported Hugging Face folder or a GGUF file — one typed report (:class:`ExportCheckReport`) whose
`to_json()` is both `python -m analysis export-check --json` and the page's download.

A folder without a GGUF file is checked against a vocabulary-only GGUF written on the fly (its pre-tokenizer named
from `base`, the original tokenizer, when given: :mod:`analysis.tokenizer.gguf_export`). The parity part needs
`llama-cpp-python`; without it the report says "blocked" with the reason and keeps the rest.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.progress import Progress, report, scaled
from analysis.errors import DataError, ModelLoadError, TokenizerLoadError
from analysis.model.gguf_model import LogprobComparison, compare_logprobs
from analysis.model.source import resolve_model
from analysis.model.weights import load_embeddings
from analysis.texts import flores
from analysis.tokenizer.gguf_export import gguf_bytes_vocab_only, gguf_vocab, read_gguf_vocab_meta
from analysis.tokenizer.gguf_source import gguf_tensor_shapes, load_gguf
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .parity import ParityReport, tokenization_parity
from .preflight import (
    Check,
    check_chat_template,
    check_ids_fit,
    check_json_files,
    check_legacy_fields,
    check_padding_rows,
    check_rows_unchanged,
    check_special_ids,
    padding_max_probability,
)
from .speculative import SpeculativeCompatibility, speculative_compatibility

_WEIGHT_NAMES = ("model.safetensors", "model.safetensors.index.json")


@dataclass
class RoundTrip:
    """Languages whose held-out lines decoded to themselves before the edit and no longer do after it."""

    languages: int
    broken: list[dict[str, Any]] = field(default_factory=list)
    #: what the method itself costs (stated plainly when the edit is one that breaks some languages by design)
    note: str = ""
    #: broken languages the method's design does not explain (entries without an expected role)
    unexpected: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """JSON form (each broken entry carries `lang`, and `role` when the edit names one)."""
        by_role: dict[str, int] = {}
        for e in self.broken:
            if "role" in e:
                by_role[e["role"]] = by_role.get(e["role"], 0) + 1
        return {
            "languages": self.languages,
            "broken": len(self.broken),
            "by_role": by_role,
            "unexpected": list(self.unexpected),
            "note": self.note,
            "entries": self.broken,
        }


@dataclass
class EditedCodec:
    """An edited tokenizer that is more than one tokenizer.json (R-BPE: two tokenizers and an id map), as the
    export check sees it: the tokenizer llama.cpp and the pre-flight checks read, the original, the edited round
    trip (text → ids → text), and optionally each language's role (e.g. R-BPE's ``reused`` script, whose breakage
    is the method's own price) with the roles that price covers."""

    tokenizer: LoadedTokenizer
    base: LoadedTokenizer
    round_trip: Callable[[str], str]
    role: Callable[[list[str]], str] | None = None
    expected_roles: tuple[str, ...] = ()
    note: str = ""


@dataclass
class ExportCheckReport:
    """Everything the export check found."""

    path: str
    kind: str  # "folder" | "gguf"
    checks: list[Check] = field(default_factory=list)
    gguf: dict[str, Any] = field(default_factory=dict)
    parity: ParityReport | None = None
    roundtrip: RoundTrip | None = None
    #: llama.cpp running the export's GGUF vs the Hugging Face model, same ids (when both carry weights)
    logprobs: LogprobComparison | None = None
    #: may llama.cpp pair the export with its original for speculative decoding (with a base only)
    speculative: SpeculativeCompatibility | None = None

    @property
    def ok(self) -> bool:
        """No failed check, parity without an unexplained difference, no language broken by the edit."""
        return (
            all(c.status != "fail" for c in self.checks)
            and (self.parity is None or self.parity.ok)
            and (self.roundtrip is None or not self._unexplained_breaks())
        )

    def _unexplained_breaks(self) -> list[str]:
        """Languages broken by the edit that the method's own price does not cover (all of them when the edit
        states no price)."""
        rt = self.roundtrip
        if rt is None:
            return []
        if rt.note:
            return list(rt.unexpected)
        return [e["lang"] for e in rt.broken]

    def to_json(self) -> dict:
        """The report as one JSON document (no server path: the file name only)."""
        return {
            "path": os.path.basename(self.path.rstrip("/")),
            "kind": self.kind,
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
            "gguf": self.gguf,
            "parity": self.parity.to_json() if self.parity is not None else None,
            "roundtrip": self.roundtrip.to_json() if self.roundtrip is not None else None,
            "logprobs": self.logprobs.to_json() if self.logprobs is not None else None,
            "speculative": self.speculative.to_json() if self.speculative is not None else None,
        }


def _tokenizer_round_trip(tok: LoadedTokenizer) -> Callable[[str], str]:
    enc = tok.tokenizer

    def rt(line: str) -> str:
        return enc.decode(enc.encode(line, add_special_tokens=False).ids, skip_special_tokens=False)

    return rt


def roundtrip_before_after(
    base: LoadedTokenizer,
    edited: LoadedTokenizer | EditedCodec,
    *,
    langs: Sequence[str] | None = None,
    max_lines: int | None = None,
) -> RoundTrip:
    """The languages whose held-out FLORES lines all decoded to themselves with `base` and not with `edited`,
    each with its first broken line (what it decodes to) and, for an :class:`EditedCodec` with roles, the
    language's role (a role outside its expected ones is listed as unexpected)."""
    codes = list(langs) if langs is not None else flores.available_codes()
    codec = edited if isinstance(edited, EditedCodec) else None
    after = codec.round_trip if codec is not None else _tokenizer_round_trip(edited)
    before = _tokenizer_round_trip(base)
    out = RoundTrip(languages=len(codes), note=codec.note if codec is not None else "")
    for lang in codes:
        _, held = flores.split_lines(lang)
        held = held[:max_lines]

        def first_broken(fn: Callable[[str], str], lines: list[str]) -> tuple[str, str] | None:
            for line in lines:
                back = fn(line)
                if back != line:
                    return line, back
            return None

        if first_broken(before, held) is None and (bad := first_broken(after, held)) is not None:
            entry = {"lang": lang, "text": bad[0][:300], "decoded": bad[1][:300]}
            if codec is not None and codec.role is not None:
                entry["role"] = codec.role(held)
                if entry["role"] not in codec.expected_roles:
                    out.unexpected.append(lang)
            out.broken.append(entry)
    return out


def _model_rows(folder: Path) -> tuple[Any, dict | None]:
    if not any((folder / n).is_file() for n in _WEIGHT_NAMES):
        return None, None
    w = load_embeddings(resolve_model(folder))
    return w, w.config


def _matrices(w: Any) -> dict[str, Any]:
    return {
        "input": None if w.input is None else np.asarray(w.input.raw),
        "output": None if (w.output is None or w.tied) else np.asarray(w.output.raw),
        "bias": w.bias,
        "tied": w.tied,
    }


def check_export(
    path: str | os.PathLike,
    *,
    base: LoadedTokenizer | None = None,
    original_model: str | os.PathLike | None = None,
    langs: Sequence[str] | None = None,
    max_lines: int | None = None,
    parity: bool = True,
    fix: bool = False,
    codec: EditedCodec | None = None,
    probe_model: bool = True,
    progress: Progress | None = None,
) -> ExportCheckReport:
    """Check an exported folder (tokenizer files, maybe weights and a GGUF) or a GGUF file.

    `base` is the original tokenizer (the round trip before/after and the GGUF pre-tokenizer); `original_model`
    the model the export came from (rows of unchanged ids). `langs`/`max_lines` bound the FLORES parts (default:
    every language, every held-out line). `fix` writes the accepted form where a check can fix it. `codec` is an
    edit that is more than one tokenizer.json (R-BPE): its tokenizer is the one checked, its original the default
    `base`, its round trip the "after" one. `probe_model` runs the exported model on held-out text to measure the
    largest probability of its unused rows (only when it has some).
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p.name}: no such export folder or GGUF file")
    is_gguf = p.is_file() and p.suffix.lower() == ".gguf"
    rep = ExportCheckReport(path=str(p), kind="gguf" if is_gguf else "folder")
    if is_gguf:
        tok = load_gguf(p)
        gguf_path: Path | None = p
    elif p.is_dir():
        tok = codec.tokenizer if codec is not None else load(p)
        if codec is not None and base is None:
            base = codec.base
        ggufs = sorted(p.glob("*.gguf"))
        gguf_path = ggufs[0] if ggufs else None
        rep.checks.append(check_json_files(p))
        weights, config = _model_rows(p)
        rep.checks.append(check_ids_fit(tok, None if weights is None else weights.n_rows, config))
        rep.checks.append(check_special_ids(p, tok, fix=fix))
        rep.checks.append(check_chat_template(p, fix=fix))
        rep.checks.append(check_legacy_fields(p, fix=fix))
        if weights is not None and original_model is not None and base is not None:
            old = load_embeddings(resolve_model(original_model))
            rep.checks.append(check_rows_unchanged(tok, base, _matrices(weights), _matrices(old)))
        else:
            rep.checks.append(
                Check(
                    "rows_unchanged", "skip", "needs the exported weights, the original model and tokenizer"
                )
            )
        if weights is not None:
            max_prob = _padding_probe(p, tok, weights.n_rows, langs) if probe_model else None
            rep.checks.append(check_padding_rows(p, tok, weights.n_rows, max_prob=max_prob, fix=fix))
    else:
        raise DataError(f"{p.name}: not a folder or a .gguf file")
    report(progress, 0.1, 1.0, "pre-flight checks done")
    if base is not None:
        rep.speculative = speculative_compatibility(tok, base)
        rep.roundtrip = roundtrip_before_after(base, codec or tok, langs=langs, max_lines=max_lines)
    report(progress, 0.3, 1.0, "round trip before/after done")
    if parity:
        rep.parity = _parity(tok, gguf_path, base, rep, langs, max_lines, scaled(progress, 0.3, 0.9))
    if (
        probe_model
        and not is_gguf
        and weights is not None
        and gguf_path is not None
        and _has_tensors(gguf_path)
    ):
        report(progress, 0.9, 1.0, "llama.cpp vs Hugging Face log-probabilities")
        rep.logprobs = _logprobs(p, gguf_path, tok, langs)
    return rep


def _has_tensors(path: Path) -> bool:
    """Whether a GGUF file holds a model (tensors), not a vocabulary only (from its header: no vocabulary parse)."""
    try:
        return len(gguf_tensor_shapes(path)) > 0
    except (OSError, TokenizerLoadError):  # an unreadable file has no model to compare; parity reports it
        return False


#: What a quantised GGUF costs against its dequantised Hugging Face copy, measured on the unedited demo model
#: (SmolLM2-135M Q4_1, 256 held-out Estonian tokens): the bound an edited export's difference should stay within.
EXPECTED_LOGPROB_ERROR = (
    "llama.cpp multiplies quantised weights with 8-bit activations and keeps an F16 KV cache, so a quantised "
    "GGUF differs from its dequantised Hugging Face copy: the unedited SmolLM2-135M Q4_1 gives mean 0.10 nats, "
    "max 1.15, 95.7 % same top-1; an F32/F16 GGUF of the same weights stays near 0.001 nats."
)


def _logprobs(
    folder: Path, gguf_path: Path, tok: LoadedTokenizer, langs: Sequence[str] | None
) -> LogprobComparison:
    """Next-token log-probabilities of the export's GGUF in llama.cpp vs its Hugging Face model on held-out text."""
    code = next((c for c in (langs or []) if c in flores.available_codes()), flores.ENGLISH)
    _, held = flores.split_lines(code)
    return compare_logprobs(folder, gguf_path, tok, " ".join(held[:20]), expected=EXPECTED_LOGPROB_ERROR)


#: Held-out text the padding probe runs the model on: this many tokens of each of up to 4 languages.
PROBE_TOKENS = 128


def _padding_probe(
    folder: Path, tok: LoadedTokenizer, rows: int, langs: Sequence[str] | None
) -> float | None:
    """The largest probability the exported model gives its unused rows on held-out FLORES text (None when every
    row is a token)."""
    from analysis.model.models import load_causal_lm  # noqa: PLC0415 - transformers, loaded on use

    unused = [i for i in range(rows) if i not in tok.id_to_token]
    if not unused:
        return None
    codes = [c for c in (langs or [flores.ENGLISH]) if c in flores.available_codes()][:4] or [flores.ENGLISH]
    seqs = []
    for code in codes:
        _, held = flores.split_lines(code)
        seqs.append(tok.tokenizer.encode(" ".join(held[:20]), add_special_tokens=True).ids[:PROBE_TOKENS])
    return padding_max_probability(load_causal_lm(folder).model, unused, seqs)


def _parity(
    tok: LoadedTokenizer,
    gguf_path: Path | None,
    base: LoadedTokenizer | None,
    rep: ExportCheckReport,
    langs: Sequence[str] | None,
    max_lines: int | None,
    progress: Progress | None,
) -> ParityReport:
    with tempfile.TemporaryDirectory(prefix="toklab-check-") as tmp:
        if gguf_path is None:
            vocab = gguf_vocab(tok, base=base)
            gguf_path = Path(tmp) / "vocab-only.gguf"
            gguf_path.write_bytes(gguf_bytes_vocab_only(vocab, tok.name))
            rep.gguf = {"written": "vocab-only (temporary)", **vocab.to_json()}
        else:
            rep.gguf = {"file": gguf_path.name, **read_gguf_vocab_meta(gguf_path)}
        try:
            return tokenization_parity(tok, gguf_path, langs=langs, max_lines=max_lines, progress=progress)
        except ModelLoadError as e:
            return ParityReport(gguf=gguf_path.name, blocked=str(e))

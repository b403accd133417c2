#!/usr/bin/env bash
# Install the app's requirements into .venv (once) and start it on http://127.0.0.1:8501.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -qq -r requirements.txt
exec .venv/bin/streamlit run app.py --server.address 127.0.0.1 --server.port "${PORT:-8501}" \
  --server.fileWatcherType none --browser.gatherUsageStats false "$@"

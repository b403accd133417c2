# Sourced by scripts/start.sh and scripts/test.sh: create a virtual environment and install a requirements file
# into it, skipping pip when nothing changed since the last successful install.
#
#   ensure_venv VENV REQUIREMENTS [FILES THAT REQUIREMENTS INCLUDES WITH -r ...]
#   build_in_background VENV REQUIREMENTS LOG    (ensure_venv in a background process, its output in LOG)
#
# The stamp VENV/.toklab-<requirements file name>.sha256 holds the sha256 of the Python version and of every
# requirements file given; pip runs only when the stamp is missing or differs, or when FORCE_PIP=1. The stamp is
# written only after pip succeeded: an interrupted or failed install is never taken for a complete one.
# While build_in_background runs, VENV/.toklab-<name>.building holds its process id, start time (seconds since
# the epoch) and log; a failed build leaves VENV/.toklab-<name>.failed (its log) instead. The app reads both
# (analysis/model/llamacpp.py) to say what is going on.

venv_stamp_wanted() {
  local venv="$1"
  { "$venv/bin/python" -VV; sha256sum "${@:2}"; } | sha256sum | cut -d' ' -f1
}

venv_current() {
  # true when REQUIREMENTS was installed into VENV with these files and this Python (and FORCE_PIP is not 1)
  local venv="$1" req="$2"
  local stamp="$venv/.toklab-$(basename "$req").sha256"
  [ "${FORCE_PIP:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(venv_stamp_wanted "$@")" ]
}

ensure_venv() {
  local venv="$1" req="$2"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  local stamp="$venv/.toklab-$(basename "$req").sha256" want
  want="$(venv_stamp_wanted "$@")"
  if venv_current "$@"; then
    echo "[venv] $req unchanged since the last install: no pip run"
    return 0
  fi
  rm -f "$stamp"
  echo "[venv] installing $req into $venv: the first install downloads about 2 GB of wheels (PyTorch is most of it)" \
    "(45 s with a package mirror nearby; longer over a slow link); pip prints each package as it goes"
  # llama-cpp-python comes as a source distribution only: build it portable (no -march=native) and without the
  # parts the export check does not use (llava, tests, examples); 3-10 minutes on 2 cores
  if ! CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}" \
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --progress-bar on -r "$req"; then
    echo "[venv] pip failed: $req is not marked installed (the next run tries again)" >&2
    return 1
  fi
  echo "$want" >"$stamp"
}

build_in_background() {
  local venv="$1" req="$2" log="$3"
  local state="$venv/.toklab-$(basename "$req").building" failed="$venv/.toklab-$(basename "$req").failed"
  if [ -f "$state" ] && kill -0 "$(head -n1 "$state")" 2>/dev/null; then
    echo "[venv] $req is already being built in the background (log: $log)"
    return 0
  fi
  rm -f "$failed"
  (
    printf '%s\n%s\n%s\n' "$BASHPID" "$(date +%s)" "$log" >"$state"
    renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true # the build takes both cores for minutes: requests go first
    if ensure_venv "$venv" "$req"; then
      echo "[venv] $req installed"
    else
      echo "$log" >"$failed"
    fi
    rm -f "$state"
  ) >"$log" 2>&1 </dev/null & # its own output only in the log: the terminal is the server's
}

# Sourced by scripts/start.sh and scripts/test.sh: create a virtual environment and install a requirements file
# into it, skipping pip when nothing changed since the last successful install.
#
#   ensure_venv VENV REQUIREMENTS [FILES THAT REQUIREMENTS INCLUDES WITH -r ...]
#
# The stamp VENV/.toklab-<requirements file name>.sha256 holds the sha256 of the Python version and of every
# requirements file given; pip runs only when the stamp is missing or differs, or when FORCE_PIP=1.

ensure_venv() {
  local venv="$1" req="$2"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  local stamp="$venv/.toklab-$(basename "$req").sha256" want
  want="$({ "$venv/bin/python" -VV; sha256sum "${@:2}"; } | sha256sum | cut -d' ' -f1)"
  if [ "${FORCE_PIP:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "[venv] $req unchanged since the last install: no pip run"
    return 0
  fi
  echo "[venv] installing $req into $venv: the first install downloads about 2 GB of wheels (PyTorch is most of it)" \
    "(45 s with a package mirror nearby; longer over a slow link); pip prints each package as it goes"
  # llama-cpp-python comes as a source distribution only: build it portable (no -march=native) and without the
  # parts the export check does not use (llava, tests, examples); about 3 minutes on 2 cores
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}" \
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --progress-bar on -r "$req"
  echo "$want" >"$stamp"
}

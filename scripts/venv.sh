# Sourced by scripts/run and scripts/test: make sure a virtual environment with Campfire and the
# given extras exists, installing only when pyproject.toml changed since the last install.
# CAMPFIRE_VENV chooses its folder (default .venv); PYTHON chooses the interpreter.

ensure_venv() {
    local extras="$1"
    VENV="${CAMPFIRE_VENV:-.venv}"
    local python="${PYTHON:-python3}"
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "Campfire needs Python 3.11 or newer; '$python' is $("$python" --version 2>&1)." >&2
        echo "Set PYTHON to a newer interpreter." >&2
        exit 1
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        echo "Creating a virtual environment in $VENV ..." >&2
        "$python" -m venv "$VENV"
    fi
    # llama.cpp (the "local" extra's embedded model) is compiled here, by default for this very
    # CPU (-march=native). Some virtual machines report instructions their hypervisor does not
    # let a program run: on one that reported Intel's AMX tile instructions, the native build
    # died in its first matrix product (a general protection fault on ldtilecfg). Built for
    # x86-64 with AVX2, FMA and F16C (GGML_NATIVE=OFF keeps ggml's defaults for those on), it runs
    # on every x86 machine of the last decade. CMAKE_ARGS set by the caller wins.
    if [ -z "${CMAKE_ARGS:-}" ] && [ "$(uname -m)" = x86_64 ]; then
        export CMAKE_ARGS="-DGGML_NATIVE=OFF"
    fi
    local stamp="$VENV/.campfire-installed"
    local want
    want="$extras ${CMAKE_ARGS:-} $(cat pyproject.toml | cksum)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "Installing Campfire with [$extras] (the first time builds llama.cpp: several minutes) ..." >&2
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
        # PYTHONWARNINGS: setuptools' notice that every editable install of a flat layout
        # prints ("Editable installation. Please be careful with folders…") says nothing a
        # newcomer can act on; pip's own errors still show.
        PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip install --quiet -e ".[$extras]" >&2
        echo "$want" > "$stamp"
    fi
}

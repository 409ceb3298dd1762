#!/usr/bin/env bash
# From a fresh Debian machine to ready, idempotently and quickly when already done:
#   1. a virtual environment in .venv with terminal-env installed (editable) with its test, hf,
#      train, lora, ray, trl, skyrl, openenv and miniswe extras (torch pinned to a CPU build first);
#      it sees the system's site-packages, so what the machine already has is not downloaded again;
#   1b. a second virtual environment, .venv-verifiers, with the `verifiers` package (0.4, its v1
#      API) and terminal-env's core: that package pins openai<3 and mcp==2.0.0, which the extras
#      of .venv cannot share (terminal_env.integrations.verifiers; its test drives it from .venv);
#   2. the Docker engine, installed and started when absent, and gVisor's runsc installed and
#      registered where the Debian mirror has it (scripts/install-engine.sh);
#   3. the project's base image, bootstrapped from Debian packages when absent (no registry).
# Re-running skips every step whose inputs did not change (the venv step is keyed by the
# content of pyproject.toml and by this checkout's path).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-python3}"
say() { echo "setup: $*" >&2; }

# ---- 1. Python ------------------------------------------------------------------------------
if ! command -v "$PY" >/dev/null; then
    say "installing python3 (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    say "installing python3-venv (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
STAMP=".venv/.terminal-env-stamp"
want="$(sha256sum pyproject.toml | cut -c1-16) $ROOT"
if [ ! -x .venv/bin/python ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    say "creating .venv and installing terminal-env with its test extras"
    "$PY" -m venv --system-site-packages .venv
    # torch first and pinned (a CPU build): an open-ended requirement could pull a CUDA build of
    # several GB. The tests of the local-model backend (and later the trainer) need it.
    if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
        say "installing torch==${TORCH_VERSION:-2.13.0} (CPU)"
        .venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==${TORCH_VERSION:-2.13.0}"
    fi
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test,hf,train,lora,ray,trl,skyrl,openenv,miniswe]"
    echo "$want" > "$STAMP"
fi

# ---- 1b. The verifiers package, in a virtual environment of its own -------------------------
VSTAMP=".venv-verifiers/.terminal-env-stamp"
vwant="$(sha256sum pyproject.toml | cut -c1-16) $ROOT"
if [ ! -x .venv-verifiers/bin/vf-eval ] || [ "$(cat "$VSTAMP" 2>/dev/null)" != "$vwant" ]; then
    say "creating .venv-verifiers: terminal-env with its [verifiers] extra (the verifiers package, and uv)"
    "$PY" -m venv .venv-verifiers
    .venv-verifiers/bin/python -m pip install --quiet --disable-pip-version-check -e ".[verifiers]"
    echo "$vwant" > "$VSTAMP"
fi

# ---- 2. Docker engine -----------------------------------------------------------------------
bash scripts/install-engine.sh

# ---- 3. Base image --------------------------------------------------------------------------
.venv/bin/terminal-env images bootstrap --family all >&2
say "ready: activate with '. .venv/bin/activate', or call .venv/bin/terminal-env directly"

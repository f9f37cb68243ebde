#!/usr/bin/env bash
# Create .venv and install abc_lightning with the tested versions (constraints.txt).
# torch is installed first on its own so that pip never picks a CUDA build by accident.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt "torch==2.13.0"
.venv/bin/python -m pip install -q -c constraints.txt -e ".[dev]"
echo "installed into .venv ($(.venv/bin/python -c 'import torch, lightning; print("torch", torch.__version__, "lightning", lightning.__version__)'))"

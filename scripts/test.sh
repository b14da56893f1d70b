#!/usr/bin/env bash
# The README's test command: install (CPU torch first, so pip does not pull the CUDA build) and run the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[dev]"
# The served-backbone integration tests need llama-cpp-python's server: from a local wheel cache, else built once.
bash scripts/install_llama_server.sh
# OpenRLHF and verl (pinned, --no-deps) for the tests that drive their own client and reward-loop code.
bash scripts/install_frameworks.sh
# Headless Chromium (Debian's package) for the step-score viewer's browser test.
bash scripts/install_chromium.sh
# Lint first (pyproject.toml [tool.ruff]): unused or undefined names fail before the tests run.
python -m ruff check .
python -m pytest -q "$@"

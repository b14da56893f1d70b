"""Shared fixtures. Everything is offline: tiny models are built from configs and saved to a temp dir."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
# The checkout's benchmark scripts and recipes (eval/, training/) are tested from here; the package never needs them.
sys.path.insert(0, str(REPO_ROOT))
# tests/ mirrors the package in folders (tests/estimator/, tests/rewards/, ...): the shared helpers (tiny_models,
# helpers, ...) live here, and a test may import another room's test module (test_rerank's problems, say).
HERE = Path(__file__).resolve().parent
for room in sorted(p for p in HERE.iterdir() if p.is_dir() and p.name not in ("fixtures", "frameworks", "__pycache__")):
    sys.path.insert(0, str(room))
sys.path.insert(0, str(HERE))
# The shared data beside the checkout (the workspace and CI layout), unless ARES_DATA_DIR names another folder.
if "ARES_DATA_DIR" not in os.environ and (REPO_ROOT.parent / "shared" / "data").is_dir():
    os.environ["ARES_DATA_DIR"] = str(REPO_ROOT.parent / "shared" / "data")


@pytest.fixture(scope="session")
def tiny_causal_lm_path(tmp_path_factory) -> Path:
    from tiny_models import tiny_qwen2_causal_lm

    return tiny_qwen2_causal_lm(tmp_path_factory.mktemp("tiny-qwen2-causal"))


@pytest.fixture(scope="session")
def tiny_prm_path(tmp_path_factory) -> Path:
    from tiny_models import tiny_qwen2_token_classifier

    return tiny_qwen2_token_classifier(tmp_path_factory.mktemp("tiny-qwen2-prm"))


@pytest.fixture(scope="session")
def tiny_nli_path(tmp_path_factory) -> Path:
    from tiny_models import tiny_bert_classifier

    return tiny_bert_classifier(tmp_path_factory.mktemp("tiny-bert-nli"))


@pytest.fixture(scope="session")
def tiny_nli3_path(tmp_path_factory) -> Path:
    from tiny_models import tiny_bert_classifier

    return tiny_bert_classifier(tmp_path_factory.mktemp("tiny-bert-nli3"), num_labels=3)

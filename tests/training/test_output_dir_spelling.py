"""One spelling for output folders: ``--output-dir`` works for ``ares-rerank adapt`` and ``train`` as for every
argparse command (``calibrate``, ``eval``), and ``--output_dir`` (what TRL and transformers users type) still works:
both parse to the same arguments."""

from __future__ import annotations

import dataclasses

import pytest
from transformers import HfArgumentParser

from ares_rerank.training.adapt import parse_args as parse_adapt
from ares_rerank.training.head import parse_args as parse_head
from ares_rerank.training.prm import PRMTrainingArguments


def settings(*objects) -> list[dict]:
    return [dataclasses.asdict(o) if dataclasses.is_dataclass(o) else o for o in objects]


@pytest.mark.parametrize("dashed, underscored", [
    (["--output-dir", "runs/a", "--max-steps", "7"], ["--output_dir", "runs/a", "--max_steps", "7"]),
    (["--output-dir", "runs/b", "--chains-file", "mine.jsonl"],
     ["--output_dir", "runs/b", "--chains_file", "mine.jsonl"]),
])
def test_train_head_takes_both_spellings(dashed, underscored):
    assert settings(*parse_head(dashed)) == settings(*parse_head(underscored))
    assert parse_head(dashed)[1].output_dir == dashed[1]


def test_adapt_takes_both_spellings():
    dashed = parse_adapt(["default", "--chains-file", "mine.jsonl", "--output-dir", "runs/a", "--adapted-weight",
                          "0.7"])
    underscored = parse_adapt(["default", "--chains_file", "mine.jsonl", "--output_dir", "runs/a",
                               "--adapted_weight", "0.7"])
    assert settings(*dashed) == settings(*underscored)
    assert dashed[1].output_dir == "runs/a" and dashed[1].adapted_weight == 0.7


def test_train_prm_takes_both_spellings(tmp_path):
    parser = HfArgumentParser(PRMTrainingArguments)  # what ares_rerank.training.prm.main parses with
    (dashed,) = parser.parse_args_into_dataclasses(args=["--output-dir", str(tmp_path), "--model-name-or-path", "m"])
    (underscored,) = parser.parse_args_into_dataclasses(args=["--output_dir", str(tmp_path), "--model_name_or_path",
                                                               "m"])
    assert (dashed.output_dir, dashed.model_name_or_path) == (underscored.output_dir, "m") == (str(tmp_path), "m")

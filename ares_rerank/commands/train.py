"""``ares-rerank train``: fine-tune an entailment head or a PRM head (:mod:`ares_rerank.training`).

Examples:
    ares-rerank train head --chains-file chains.jsonl --output-dir runs/my-head --max-steps 200
    ares-rerank train head my_config.yaml --max-steps 50 --output-dir /tmp/try
    ares-rerank train prm --model-name-or-path path/to/qwen --dataset rows.jsonl --output-dir runs/prm

Everything after the target goes to :func:`ares_rerank.training.head.main` / :func:`ares_rerank.training.prm.main`:
an optional YAML config first, then ``--field-name value`` flags of their argument dataclasses (``--help`` lists
them; ``HfArgumentParser`` takes each with dashes or underscores: ``--output-dir``, as every command spells it, or
``--output_dir``, as TRL writes it). Checkpoints, logs and the trained head are written under ``--output-dir``.
The recipe of the shipped default head is in the source checkout (``python -m training.train_default_head``).
"""

from __future__ import annotations

import argparse
from typing import Any


TARGETS = {"head": "ares_rerank.training.head", "prm": "ares_rerank.training.prm"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train", help="Fine-tune a calibrated entailment head or a PRM head.",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", choices=sorted(TARGETS),
                        help="head: an entailment head (LoRA or full) for ARES; prm: a step-tag PRM.")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="[config.yaml] [--field value ...]")


def run(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(TARGETS[args.target])
    return int(module.main(list(args.args)) or 0)

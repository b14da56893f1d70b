"""``ares-rerank train``: fine-tune an entailment head or a PRM head (the recipes in ``training/`` of a checkout).

Examples:
    ares-rerank train default-head                       # the shipped default head: both stages of its recipe
    ares-rerank train default-head --runs_dir /tmp/try --export_dir ""          # the same, shipping nothing
    ares-rerank train head training/configs/default_head_stage1.yaml --max_steps 50 --output_dir /tmp/try
    ares-rerank train prm --model_name_or_path path/to/qwen --dataset rows.jsonl --output_dir runs/prm

Everything after the target goes to ``python -m training.train_default_head`` / ``training.train_head`` /
``training.train_prm`` (for ``head`` and ``prm`` a YAML config first, then ``--field value`` flags of their argument
dataclasses; ``--help`` lists them). The training
recipes ship with the repository, not with the installed package: run this from a source checkout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


TARGETS = {"default-head": "training.train_default_head", "head": "training.train_head", "prm": "training.train_prm"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="Fine-tune a calibrated entailment head or a PRM head (from a source checkout).",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", choices=sorted(TARGETS),
                        help="default-head: the shipped head's recipe; head: an entailment head (LoRA) from a config; "
                             "prm: a step-tag PRM.")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="[config.yaml] [--field value ...]")


def find_training_checkout() -> Path:
    """The source checkout that holds ``training/``: beside this package, else the working directory."""
    here = Path(__file__).resolve().parents[2]
    for root in (here, Path.cwd()):
        if (root / "training" / "train_head.py").is_file() and (root / "training" / "__init__.py").is_file():
            return root
    raise SystemExit(
        "ares-rerank train runs the training recipes in training/, which ship with the source repository, not with "
        "the installed package. Run it from a checkout: `git clone <ares-rerank repo> && cd ares-rerank && "
        "ares-rerank train default-head` (or `python -m training.train_default_head`)."
    )


def run(args: argparse.Namespace) -> int:
    import importlib

    root = str(find_training_checkout())
    if root not in sys.path:
        sys.path.insert(0, root)
    module = importlib.import_module(TARGETS[args.target])
    return int(module.main(list(args.args)) or 0)

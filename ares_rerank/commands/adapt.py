"""``ares-rerank adapt``: continue a trained entailment head on your labelled chains
(:mod:`ares_rerank.training.adapt`).

Examples:
    ares-rerank adapt default --chains-file mine.jsonl --output-dir runs/my-head
    ares-rerank adapt you/ares-head --chains-file mine.jsonl --output-dir runs/my-head --max-steps 300

The head's LoRA rank, premise selection, window and calibration method come from the head; every batch replays
pairs of the mix it was trained on (``--replay_share``) and of wordings drawn fresh for the run
(``--guard_chains``) against forgetting; other fresh wordings (``--check_chains``) are a forgetting check that
averages back toward the head when they lose more than ``--forgetting_bound``. Prints a before / after table of
your held-out chains, the check's wordings and the head's own held-out pairs, and saves ``<output_dir>/head``
(load it with ``load_backbone``) with a card that records the adaptation. ``--help`` after the head lists every
option; each is spelled with dashes (``--output-dir``, as every command spells it) or underscores
(``--output_dir``, as TRL writes it): ``HfArgumentParser`` takes both.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "adapt", help="Adapt a trained entailment head to your labelled chains, replaying its own training pairs "
                      "and fresh wordings, with a forgetting check (measured on wordings made after its defaults, 3 "
                      "seeds: the adapted wording 0.98 ARES macro-F1 at 0.5, a second unseen wording 0.829 -> 0.945 "
                      "CV, the paper's wording and held-out recipes within 0.01; see the README).",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("head", metavar="HEAD", help="default (the shipped head), a head folder, or a hub id.")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="--chains-file FILE --output-dir DIR [--field-name value ...] (or --output_dir ...)")


def run(args: argparse.Namespace) -> int:
    from ..training.adapt import main

    return int(main([args.head, *args.args]) or 0)

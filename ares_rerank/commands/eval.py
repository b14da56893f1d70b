"""``ares-rerank eval``: run a benchmark with the paper's protocol (the harness in ``eval/`` of a source checkout).

Example:
    ares-rerank eval --task claimtrees --length 10 --n 100 --backbone claimtrees-oracle --methods ares,entail-prev

The harness ships with the repository, not with the installed package: run this from a checkout (the same as
``python -m eval.runner ...``). Scores are cached under ``eval/cache/``; results go to ``eval/results/raw/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


DEFAULT_METHODS = "ares,entail-prev,entail-base,roscoe-li-self,roscoe-li-source,receval-inter"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness's options; shared by ``ares-rerank eval`` and ``python -m eval.runner``."""
    task = parser.add_argument_group("task (options left out use the loader's defaults)")
    task.add_argument("--task", required=True, help="claimtrees, recipes, prmbench, bbm or processbench.")
    task.add_argument("--n", type=int, default=None, help="Evaluate the first N examples (default: the loader's).")
    task.add_argument("--sample", type=int, default=None,
                      help="Evaluate K examples drawn at random (seeded by --sample-seed) instead of all; for CPU runs.")
    task.add_argument("--sample-seed", type=int, default=0, help="Seed of --sample (default 0).")
    task.add_argument("--start", type=int, default=None, help="First example index (claimtrees, recipes).")
    task.add_argument("--length", type=int, default=None, help="ClaimTrees L (vanilla).")
    task.add_argument("--variant", default=None, help="ClaimTrees variant: vanilla, multi_source, insertion.")
    task.add_argument("--sources", type=int, default=None, help="ClaimTrees sXdY: X.")
    task.add_argument("--depth", type=int, default=None, help="ClaimTrees sXdY: Y.")
    task.add_argument("--valid", type=int, default=None, help="ClaimTrees vVi I: V.")
    task.add_argument("--inserted", type=int, default=None, help="ClaimTrees vVi I: I.")
    task.add_argument("--paper-compat", action="store_true", default=None,
                      help="ClaimTrees: the research code's labels (a deleted fact labels every step sound).")
    task.add_argument("--path", default=None, help="Data file, folder or hub id (prmbench, bbm, processbench).")
    task.add_argument("--data-dir", default=None, help="The shared data folder (default $ARES_DATA_DIR or ../shared/data).")
    task.add_argument("--split", default=None, help="prmbench: test or train; processbench hub split.")
    task.add_argument("--classifications", default=None, help="prmbench: comma-separated error types to keep.")
    task.add_argument("--tasks", default=None, help="bbm: comma-separated task names to keep.")
    task.add_argument("--labels", default=None, help="bbm / processbench: propagate (default) or first.")
    task.add_argument("--question", default=None, help="prmbench: paired (default) or question.")
    task.add_argument("--out-of-range", default=None, help="prmbench: skip (default) or ignore.")
    model = parser.add_argument_group("backbone and methods")
    model.add_argument("--backbone", default="claimtrees-oracle",
                       help="claimtrees-oracle, module:factory, or a load_backbone name / path (e.g. 'default').")
    model.add_argument("--kind", default=None, help="Backbone kind for load_backbone (nli, prm, judge, ...).")
    model.add_argument("--backbone-options", default=None,
                       help='JSON object of load_backbone keyword arguments, e.g. \'{"overlong_steps": "truncate"}\'.')
    model.add_argument("--methods", default=DEFAULT_METHODS, help="Comma-separated: ares and/or baselines.")
    model.add_argument("--prior", type=float, default=1.0, help="ARES base-claim prior p (paper tables: 0.95).")
    model.add_argument("--eps", type=float, default=0.1)
    model.add_argument("--delta", type=float, default=0.1)
    model.add_argument("--mode", default="auto", choices=["auto", "exact", "sample"])
    model.add_argument("--seed", type=int, default=0)
    model.add_argument("--max-masks", type=int, default=64, help="ARES exact mode: distinct inputs per step.")
    model.add_argument("--prune-mass", type=float, default=None, help="ARES exact-mode pruning (default: AresConfig's).")
    run_group = parser.add_argument_group("run")
    run_group.add_argument("--batch-size", type=int, default=32, help="Chains per backbone wave (and cache save).")
    run_group.add_argument("--cache-dir", default=None, help="Score cache folder (default eval/cache).")
    run_group.add_argument("--no-cache", action="store_true", help="Neither read nor write cached scores.")
    run_group.add_argument("--refresh", action="store_true", help="Re-score every chain and overwrite the cache.")
    run_group.add_argument("--out", default=None, help="Results folder (default eval/results/raw).")
    run_group.add_argument("--name", default=None, help="Results file stem (default: task key + backbone).")
    run_group.add_argument("--no-progress", action="store_true", help="No progress bars.")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval", help="Evaluate on a benchmark with the paper's protocol (from a source checkout).",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)


def find_checkout() -> Path:
    """The source checkout that holds ``eval/runner.py``: beside this package, else the working directory."""
    here = Path(__file__).resolve().parents[2]
    for root in (here, Path.cwd()):
        if (root / "eval" / "runner.py").is_file() and (root / "eval" / "__init__.py").is_file():
            return root
    raise SystemExit(
        "ares-rerank eval runs the evaluation harness in eval/, which ships with the source repository, not with "
        "the installed package. Run it from a checkout: `git clone <ares-rerank repo> && cd ares-rerank && "
        "ares-rerank eval ...` (or `python -m eval.runner ...`)."
    )


def run(args: argparse.Namespace) -> int:
    root = str(find_checkout())
    if root not in sys.path:
        sys.path.insert(0, root)
    from eval.runner import run_from_args

    return run_from_args(args)

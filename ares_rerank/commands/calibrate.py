"""``ares-rerank calibrate``: fit the temperature of an entailment head on held-out pairs and save it beside it.

Examples:
    ares-rerank calibrate path/to/head --pairs heldout.jsonl --plot reliability.png
    ares-rerank calibrate path/to/head --config training/configs/default_head.yaml --split val   # from a checkout
    ares-rerank calibrate default --pairs heldout.jsonl --evaluate-only                          # ECE only

Pairs are JSON lines ``{"premises": [claim, ...], "hypothesis": str, "label": 1 | 0}`` (1 = entailed; the head's own
premise selection is applied to ``premises``, as at inference); ``"premise": str`` stands for one claim. For a head
with more than two classes give ``"class"`` (the class index) instead of ``"label"``. ``--config`` rebuilds the
held-out chains of a training config (split by chain id, as in training). The fitted temperature minimizes the NLL
of the pairs; ECE before / after and a reliability diagram are reported, and ``ares_calibration.json`` beside the
weights is updated (other keys kept) unless ``--dry-run`` or ``--evaluate-only``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="Fit an entailment head's temperature on held-out pairs (ECE, reliability diagram).",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("head", help="Head folder (model or peft adapter), or 'default' for the shipped head.")
    data = parser.add_mutually_exclusive_group(required=True)
    data.add_argument("--pairs", help="JSON-lines file of held-out pairs.")
    data.add_argument("--config", help="A training YAML: rebuild its held-out split (needs a source checkout).")
    parser.add_argument("--split", default="val", choices=["val", "test"], help="Split of --config (default val).")
    parser.add_argument("--bins", type=int, default=15, help="ECE bins.")
    parser.add_argument("--plot", default=None, help="Write a reliability diagram (PNG) here.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--dry-run", action="store_true", help="Fit and report, but do not write the temperature.")
    parser.add_argument("--evaluate-only", action="store_true", help="Report ECE at the head's current temperature.")


def _read_pairs(path: str) -> list[dict[str, Any]]:
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        if not line.strip():
            continue
        row = json.loads(line)
        if "premise" in row and "premises" not in row:
            row["premises"] = [row["premise"]] if row["premise"] else []
        if "premises" not in row or "hypothesis" not in row or not ({"label", "class"} & set(row)):
            raise ValueError(
                f"--pairs {path} line {i + 1}: needs premises (or premise), hypothesis and label (or class)."
            )
        rows.append(row)
    if not rows:
        raise ValueError(f"--pairs {path} holds no pairs.")
    return rows


def _config_pairs(config: str, split: str) -> list[dict[str, Any]]:
    """The raw (unselected) held-out pairs of a training config, split by chain id exactly as training splits."""
    from .train import find_training_checkout

    root = str(find_training_checkout())
    if root not in sys.path:
        sys.path.insert(0, root)
    from training.train_head import _oracle_for, parse_args
    from training.mix import training_chains
    from training.pairs import build_pairs, split_chains

    mix, _ = parse_args([config])
    parts = split_chains(training_chains(mix), {"val": mix.val_fraction, "test": mix.test_fraction}, seed=mix.mix_seed)
    return build_pairs(parts[split], "all", _oracle_for, mix.subsets_per_step, mix.mix_seed)


def _classes(rows: list[dict[str, Any]], head: Any) -> list[int]:
    num_labels = int(head.model.config.num_labels)
    if all("class" in r for r in rows):
        return [int(r["class"]) for r in rows]
    if num_labels != 2:
        raise ValueError(f"this head has {num_labels} classes: give each pair a 'class' index, not a 0/1 'label'.")
    return [head.label_index if int(r["label"]) == 1 else 1 - head.label_index for r in rows]


def run(args: argparse.Namespace) -> int:
    from ..backbones.loading import DEFAULT_HEAD_DIR, load_backbone
    from ..calibration import calibrate, entailment_probs_from_logits, reliability_diagram, write_calibration

    folder = DEFAULT_HEAD_DIR if args.head == "default" else Path(args.head)
    head = load_backbone(args.head, kind="nli", batch_size=args.batch_size)
    rows = _read_pairs(args.pairs) if args.pairs else _config_pairs(args.config, args.split)
    logits = head.logits([r["premises"] for r in rows], [r["hypothesis"] for r in rows])
    classes = _classes(rows, head)
    report = calibrate(logits, classes, positive_index=head.label_index, n_bins=args.bins,
                       temperature=head.temperature if args.evaluate_only else None)
    if args.plot:
        entailed = [int(c == head.label_index) for c in classes]
        reliability_diagram(entailment_probs_from_logits(logits, head.label_index), entailed, args.plot,
                            entailment_probs_from_logits(logits, head.label_index, report.temperature), args.bins)
    print(json.dumps(report.to_dict(), indent=2))
    if not (args.dry_run or args.evaluate_only):
        source = args.pairs or f"{args.config} ({args.split} split)"
        path = write_calibration(folder, {"temperature": report.temperature, "calibrated_on": source,
                                          "calibration": report.to_dict()})
        print(f"wrote temperature {report.temperature:.4f} to {path}")
    return 0

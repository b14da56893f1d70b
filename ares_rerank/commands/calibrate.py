"""``ares-rerank calibrate``: fit the calibration of an entailment head on held-out pairs and save it beside it.

Examples:
    ares-rerank calibrate path/to/head --pairs heldout.jsonl --plot reliability.png      # updates path/to/head
    ares-rerank calibrate path/to/head --pairs heldout.jsonl --output-dir calibrated-head  # a calibrated copy
    ares-rerank calibrate default --pairs heldout.jsonl --output-dir my-default            # the shipped head: a copy
    ares-rerank calibrate path/to/head --config my_training.yaml --split val               # a training config's split
    ares-rerank calibrate default --pairs heldout.jsonl --evaluate-only                    # ECE only
    ares-rerank calibrate path/to/head --pairs heldout.jsonl --method platt                # temperature and bias

Pairs are JSON lines ``{"premises": [claim, ...], "hypothesis": str, "label": 1 | 0}`` (1 = entailed; the head's own
premise selection is applied to ``premises``, as at inference); ``"premise": str`` stands for one claim. For a head
with more than two classes give ``"class"`` (the class index) instead of ``"label"``. ``--config`` rebuilds the
held-out pairs of a training config exactly as training built them (split by chain id or recipe graph, the config's
premise selection and pair kinds, minimal pairs included when it asks for them), so ``--split test`` measures the
head on its own test split. The fit minimizes the NLL of the pairs: ``--method temperature`` (default) fits one
scale, which never changes a decision; ``--method platt`` also fits a bias on the entailment logit, for pairs that
are entailed less (or more) often than the head says (it can move decisions: ``accuracy_after`` reports it). ECE
before / after and a reliability diagram are reported. Unless ``--dry-run`` or ``--evaluate-only``, the temperature
and bias are written to ``ares_calibration.json`` (other keys kept): in a copy of the head made in
``--output-dir``, or else in the head folder itself. The shipped default head is never modified: calibrating it
needs ``--output-dir``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..calibration import CALIBRATION_METHODS
from ..utils.io import atomic_folder, check_output_dir, check_outside_package, check_output_path, read_jsonl


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="Fit an entailment head's calibration on held-out pairs (ECE, reliability diagram).",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("head", help="Head folder (model or peft adapter), or 'default' for the shipped head.")
    data = parser.add_mutually_exclusive_group(required=True)
    data.add_argument("--pairs", help="JSON-lines file of held-out pairs.")
    data.add_argument("--config", help="A training YAML (ares-rerank train head): rebuild its held-out split.")
    parser.add_argument("--split", default="val", choices=["val", "test"], help="Split of --config (default val).")
    parser.add_argument("--method", default="temperature", choices=list(CALIBRATION_METHODS),
                        help="temperature: one scale (default); platt: scale and entailment bias.")
    parser.add_argument("--bins", type=int, default=15, help="ECE bins.")
    parser.add_argument("--plot", default=None, help="Write a reliability diagram here (PNG; or .svg, .pdf, ... by its "
                                                     "suffix), atomically.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output-dir", default=None,
                        help="Copy the head here and write the temperature into the copy (must not exist yet, or be "
                             "empty). Required for 'default'.")
    parser.add_argument("--dry-run", action="store_true", help="Fit and report, but do not write the calibration.")
    parser.add_argument("--evaluate-only", action="store_true",
                        help="Report ECE at the head's current calibration (temperature and bias).")


def read_pairs(path: str) -> list[dict[str, Any]]:
    """The held-out pairs of a JSONL file (see the module docstring), each checked."""
    rows = []
    for lineno, row in read_jsonl(path):
        if isinstance(row, dict) and "premise" in row and "premises" not in row:
            row["premises"] = [row["premise"]] if row["premise"] else []
        if not isinstance(row, dict) or "premises" not in row or "hypothesis" not in row or not (
                {"label", "class"} & set(row)):
            raise ValueError(f"--pairs {path}:{lineno} needs premises (or premise), hypothesis and label (or class).")
        premises, hypothesis = row["premises"], row["hypothesis"]
        if not isinstance(premises, list) or not all(isinstance(p, str) for p in premises):
            raise ValueError(f"--pairs {path}:{lineno} premises={premises!r} must be a list of strings (one per "
                             "claim); use \"premise\" for one string.")
        if not isinstance(hypothesis, str) or not hypothesis.strip():
            raise ValueError(f"--pairs {path}:{lineno} hypothesis={hypothesis!r} must be a non-empty string.")
        if "class" in row:
            if not isinstance(row["class"], int) or isinstance(row["class"], bool) or row["class"] < 0:
                raise ValueError(f"--pairs {path}:{lineno} class={row['class']!r} must be a class index (0, 1, ...).")
        elif row["label"] not in (0, 1):
            raise ValueError(f"--pairs {path}:{lineno} label={row['label']!r} must be 1 (entailed) or 0 (not); give "
                             "\"class\" for a head with more classes.")
        rows.append(row)
    if not rows:
        raise ValueError(f"--pairs {path} holds no pairs.")
    return rows


def config_pairs(config: str, split: str) -> list[dict[str, Any]]:
    """The held-out pairs of a training config's ``split``, exactly as training built them (premises already
    selected by the config's ``premise_selection``; score them with selection ``"all"``)."""
    from ..training import parse_args, split_rows

    mix, args = parse_args([config])
    return split_rows(mix, args.data_dir)[split][1]


def target_folder(head: str, output_dir: str | None) -> Path:
    """Where the temperature is written: a fresh copy in ``output_dir``, else the head's own folder (never the
    shipped default head)."""
    from ..backbones.loading import DEFAULT_HEAD_DIR

    source = DEFAULT_HEAD_DIR if head == "default" else Path(head)
    if output_dir is None:
        if source.resolve() == DEFAULT_HEAD_DIR.resolve():
            raise ValueError(
                f"head={head!r} is the shipped default head, which calibrate never modifies: add "
                "--output-dir my-calibrated-head to write a calibrated copy (then load_backbone('my-calibrated-head'))."
            )
        if not source.is_dir():
            raise FileNotFoundError(f"head={head!r} is not a folder: calibrate writes beside local weights; give "
                                    "--output-dir to calibrate a copy.")
        return source
    target = Path(output_dir)
    check_outside_package(target, flag="--output-dir")
    check_output_dir(target.parent, flag="--output-dir")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"--output-dir={output_dir!r} exists and is not empty: name a new folder.")
    if not source.is_dir():
        raise FileNotFoundError(f"head={head!r} is not a local folder, so it cannot be copied to --output-dir.")
    return target


def _classes(rows: list[dict[str, Any]], head: Any) -> list[int]:
    num_labels = int(head.model.config.num_labels)
    if all("class" in r for r in rows):
        return [int(r["class"]) for r in rows]
    if num_labels != 2:
        raise ValueError(f"this head has {num_labels} classes: give each pair a 'class' index, not a 0/1 'label'.")
    return [head.label_index if int(r["label"]) == 1 else 1 - head.label_index for r in rows]


def run(args: argparse.Namespace) -> int:
    import shutil

    from ..backbones.loading import CALIBRATION_FILE, DEFAULT_HEAD_DIR, load_backbone
    from ..calibration import (
        calibrate, check_bins, entailment_probs_from_logits, plot_format, reliability_diagram, write_calibration,
    )

    check_bins(args.bins, "--bins")
    writes = not (args.dry_run or args.evaluate_only)
    folder = target_folder(args.head, args.output_dir) if writes else None  # checked before any work
    if args.plot:
        check_output_path(args.plot, flag="--plot")
        plot_format(args.plot, flag="--plot")
    rows = read_pairs(args.pairs) if args.pairs else None  # a bad file fails before the head loads
    # --config pairs hold the premises the config's selection kept (as training encoded them): no second selection
    head = load_backbone(args.head, kind="nli", batch_size=args.batch_size,
                         **({} if args.pairs else {"premise_selection": "all"}))
    rows = rows if rows is not None else config_pairs(args.config, args.split)
    logits = head.logits([r["premises"] for r in rows], [r["hypothesis"] for r in rows])
    classes = _classes(rows, head)
    report = calibrate(logits, classes, positive_index=head.label_index, n_bins=args.bins, method=args.method,
                       temperature=head.temperature if args.evaluate_only else None,
                       bias=head.bias if args.evaluate_only else None,
                       # a temperature refit keeps the head's Platt bias (--method platt refits both)
                       fixed_bias=head.bias if args.method == "temperature" and not args.evaluate_only else 0.0)
    if args.plot:
        entailed = [int(c == head.label_index) for c in classes]
        reliability_diagram(entailment_probs_from_logits(logits, head.label_index), entailed, args.plot,
                            entailment_probs_from_logits(logits, head.label_index, report.temperature, report.bias),
                            args.bins)
    print(json.dumps(report.to_dict(), indent=2))
    if writes:
        origin = args.pairs or f"{args.config} ({args.split} split)"
        values = {"temperature": report.temperature, "bias": report.bias, "calibrated_on": origin,
                  "calibration": report.to_dict()}
        if args.output_dir is None:
            path = write_calibration(folder, values)
        else:  # the copy appears whole, calibrated, or not at all
            source = DEFAULT_HEAD_DIR if args.head == "default" else Path(args.head)
            with atomic_folder(folder) as fresh:
                shutil.copytree(source, fresh, dirs_exist_ok=True)
                write_calibration(fresh, values)
            path = folder / CALIBRATION_FILE
        print(f"wrote temperature {report.temperature:.4f} and bias {report.bias:.4f} to {path}")
    return 0

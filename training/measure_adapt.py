"""Measure ``ares-rerank adapt``: the shipped head adapted to 50 chains of an unseen wording, and what it kept.

    python -m training.measure_adapt --out /tmp/adapt-measure --threads 2

Writes 50 labelled ClaimTrees chains in the ``ratified`` wording (:mod:`training.unseen_wordings`; lengths 5-16,
generator indices from 20,000, plus 1,000 per ``--seed``: disjoint from the evaluation's 0..99), adapts the shipped
head on them with the command's defaults (``adapt_head("default", ...)``, timed: wall and CPU seconds), then judges
the shipped head and the adapted one under ARES (prior 1, auto mode; the spec's 5-fold CV threshold and the fixed
threshold 0.5) on: the ``ratified`` wording at L = 7 and 25 (100 held-out chains each), the other unseen
wordings ``cultivated`` and ``kindled`` (L = 10), the paper's wording (ClaimTrees-10) and the held-out recipe graphs.
Prints a table and writes ``results.json`` (after every set, so a stopped run keeps what it measured); the adapted
head's card gets the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ares_rerank.data import load_claimtrees
from ares_rerank.utils.io import write_atomic
from training.unseen_wordings import UNSEEN_WORDINGS


__all__ = ["SETS", "TARGET_SETS", "main", "write_chains"]

TARGET_SETS = ("ratified-7", "ratified-25")
SETS = (*TARGET_SETS, "cultivated-10", "kindled-10", "claimtrees-10", "recipes-heldout", "recipes-heldout-variants")
TRAIN_LENGTHS = (5, 6, 8, 10, 12, 16)
FIRST_INDEX = 20_000


def write_chains(path: Path, n: int = 50, wording: str = "ratified", seed: int = 0) -> Path:
    """``n`` labelled chains in ``wording`` (lengths cycling through TRAIN_LENGTHS), as a user's JSONL: gold labels
    only, no generator metadata. Each ``seed`` draws other chains (generator indices from FIRST_INDEX + 1000 seed)."""
    lines = []
    for i in range(n):
        chain = load_claimtrees(1, TRAIN_LENGTHS[i % len(TRAIN_LENGTHS)], start=FIRST_INDEX + 1000 * seed + i,
                                templates=UNSEEN_WORDINGS[wording])[0]
        lines.append(json.dumps({"id": f"{wording}-{i}", "base_claims": list(chain.base_claims),
                                 "steps": list(chain.steps), "labels": list(chain.labels)}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _table(results: dict[str, Any]) -> str:
    lines = ["| set | shipped head: ARES macro-F1 (at t = 0.5) | adapted: ARES macro-F1 (at t = 0.5) | change at 0.5 |",
             "| --- | --- | --- | --- |"]
    for name, by_head in results.items():
        cells = [f"{r['ares']['f1']:.3f} ({r['ares']['f1_at_0.5']:.3f})" if r else "-"
                 for r in (by_head.get("shipped"), by_head.get("adapted"))]
        both = by_head.get("shipped") and by_head.get("adapted")
        change = f"{by_head['adapted']['ares']['f1_at_0.5'] - by_head['shipped']['ares']['f1_at_0.5']:+.3f}" \
            if both else "-"
        lines.append(f"| {name} ({(by_head.get('adapted') or by_head.get('shipped'))['num_chains']} chains) | "
                     + " | ".join(cells) + f" | {change} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.measure_adapt", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="Folder for the chains, the adapted head and results.json.")
    parser.add_argument("--sets", default=",".join(SETS), help=f"Comma-separated, from {list(SETS)}.")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default).")
    parser.add_argument("--baseline", default=None,
                        help="A results.json of an earlier run whose shipped-head numbers are reused (same sets).")
    parser.add_argument("--head", default=None, help="An adapted head to measure instead of adapting again.")
    parser.add_argument("--seed", type=int, default=0,
                        help="Draws other training chains and is the adaptation's --seed (0 = the README's run).")
    args = parser.parse_args(argv)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    from ares_rerank.backbones.loading import load_backbone
    from ares_rerank.training.adapt import adapt_head
    from training.evaluate_head import DEFAULT_N, check_sets, evaluate_head

    sets = [s for s in args.sets.split(",") if s]
    check_sets(sets)
    out = Path(args.out)
    record: dict[str, Any] = {"sets": sets, "seed": args.seed, "results": {}}
    if args.head is None:
        chains = write_chains(out / "ratified-50.jsonl", seed=args.seed)
        start, cpu = time.time(), time.process_time()
        adapted = adapt_head("default", chains, out / "run", overwrite_output_dir=True, torch_threads=args.threads,
                             seed=args.seed)
        record["adapt"] = {"wall_seconds": round(time.time() - start, 1),
                           "cpu_seconds": round(time.process_time() - cpu, 1),
                           "command": f"ares-rerank adapt default --chains_file {chains} --output_dir {out / 'run'}"
                                      + (f" --seed {args.seed}" if args.seed else ""),
                           "report": adapted.report}
        head_dir = adapted.folder
    else:
        head_dir = Path(args.head)
    print(json.dumps(record.get("adapt", {})), flush=True)
    baseline = json.loads(Path(args.baseline).read_text())["results"] if args.baseline else {}
    heads = {"shipped": load_backbone("default", kind="nli", device="cpu"),
             "adapted": load_backbone(str(head_dir), kind="nli", device="cpu")}
    for name in sets:  # the target sets first: a run stopped early still answers the main question
        record["results"][name] = {}
        for label, backbone in heads.items():
            if label == "shipped" and baseline.get(name, {}).get("shipped"):
                record["results"][name][label] = baseline[name]["shipped"]
                continue
            n = DEFAULT_N.get(name, 100)
            record["results"][name][label] = evaluate_head(backbone, [name], n,
                                                           log=lambda line, who=label: print(who, line, flush=True))[
                name]
            write_atomic(out / "results.json", json.dumps(record, indent=2) + "\n")
    table = _table(record["results"])
    write_atomic(out / "results.md", table + "\n")
    if args.head is None:
        _add_to_card(head_dir, table, record["adapt"]["command"])
    print(table)
    return 0


def _add_to_card(head_dir: Path, table: str, command: str) -> None:
    """Put the measured table into the adapted head's record (``adaptation.measured``) and rewrite its card."""
    from ares_rerank.backbones.card import model_card

    path = head_dir / "ares_calibration.json"
    record = json.loads(path.read_text())
    record["adaptation"]["measured"] = (
        "Measured by `python -m training.measure_adapt` (the checkout's script; the head adapted with `" + command
        + "`), ARES with prior 1 in auto mode, CV macro-F1 and in brackets at the threshold 0.5:\n\n" + table)
    adapter = json.loads((head_dir / "adapter_config.json").read_text())
    write_atomic(path, json.dumps(record, indent=2) + "\n")
    write_atomic(head_dir / "README.md", model_card(record, base_model=adapter.get("base_model_name_or_path"),
                                                    adapter=True, lora_r=adapter.get("r")))


if __name__ == "__main__":
    sys.exit(main())

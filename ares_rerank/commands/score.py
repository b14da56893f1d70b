"""``ares-rerank score``: per-step ARES scores for chains in a JSONL file (the README's main job).

Input lines: ``{"base_claims": [...], "steps": [...]}`` or ``{"prompt": "...", "completion": "..."}``, optionally
with ``"id"`` and ``"labels"`` (1 = unsound step). Output lines: the input id, per-step scores, flags, certificate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import read_jsonl


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("score", help="Score every step of chains in a JSONL file.", description=__doc__)
    parser.add_argument("input", type=Path, help="JSONL file of chains ('-' for standard input).")
    parser.add_argument("--output", type=Path, default=None, help="Write JSONL results here (default: stdout).")
    parser.add_argument("--backbone", default="default", help="'default' (shipped head), a model path / hub id, "
                        "or 'claimtrees-oracle'.")
    parser.add_argument("--kind", default=None, help="Backbone kind: nli, prm, prm-causal, judge (auto if omitted).")
    parser.add_argument("--method", default="ares", help="'ares' or a baseline, e.g. 'entail-prev'.")
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--prior", type=float, default=1.0)
    parser.add_argument("--mode", default="auto", choices=["auto", "exact", "sample"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.5, help="Flag a step unsound iff its score <= this.")
    parser.add_argument("--step-separator", default="\n\n", help="Splits 'completion' into steps.")
    parser.add_argument("--prompt-split", default="none", choices=["none", "sentences", "lines"])


def read_chains(path: Path, step_separator: str, prompt_split: str) -> list:
    from ..chain import Chain

    chains = []
    for lineno, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{lineno} must be a JSON object, got {type(record).__name__}.")
        if "steps" in record:
            chain = Chain(record.get("base_claims", []), record["steps"], labels=record.get("labels"),
                          id=str(record.get("id", lineno)))
        elif "completion" in record:
            chain = Chain.from_text(record.get("prompt", ""), record["completion"], step_separator=step_separator,
                                    prompt_split=prompt_split, labels=record.get("labels"),
                                    id=str(record.get("id", lineno)))
        else:
            raise ValueError(f"{path}:{lineno} needs 'steps' (with 'base_claims') or 'completion' (with 'prompt').")
        chains.append(chain)
    return chains


def run(args: argparse.Namespace) -> int:
    from .. import AresConfig, load_backbone, score_chains

    chains = read_chains(args.input, args.step_separator, args.prompt_split)
    config = AresConfig(eps=args.eps, delta=args.delta, prior=args.prior, mode=args.mode, seed=args.seed,
                        threshold=args.threshold)
    backbone = load_backbone(args.backbone, kind=args.kind)
    results = score_chains(chains, backbone, method=args.method, config=config)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for chain, scores in zip(chains, results):
            record = {"id": chain.id, **scores.to_dict(), "flags": scores.flags(args.threshold)}
            out.write(json.dumps(record) + "\n")
    finally:
        if args.output:
            out.close()
    _summary(chains, results, args, backbone)
    return 0


def _summary(chains, results, args, backbone) -> None:
    """A human-readable table on stderr: one line per chain, 'x' = flagged step, labels beside when known."""
    print(f"backbone: {backbone!r}; method: {args.method}; threshold: {args.threshold}", file=sys.stderr)
    correct = total = 0
    for chain, scores in zip(chains, results):
        marks = "".join("x" if f else "." for f in scores.flags(args.threshold))
        line = f"{chain.id:>24}  flags {marks}"
        if chain.labels is not None:
            line += f"  gold {''.join('x' if y else '.' for y in chain.labels)}"
            correct += sum(int(f) == y for f, y in zip(scores.flags(args.threshold), chain.labels))
            total += chain.num_steps
        cert = f"exact, bound {max(scores.error_bounds):.3g}" if scores.mode == "exact" else (
            f"sampled N={scores.num_samples}, eps={scores.eps}, delta={scores.delta}" if scores.mode == "sample"
            else "direct")
        print(f"{line}  [{cert}; {scores.evaluations} evals]", file=sys.stderr)
    if total:
        print(f"step accuracy vs gold labels: {correct}/{total} = {correct / total:.3f}", file=sys.stderr)

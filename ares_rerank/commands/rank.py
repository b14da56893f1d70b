"""``ares-rerank rank``: rank the candidate completions of each prompt in a JSONL file by their ARES chain score.

Input lines: ``{"prompt": ..., "candidates": [...]}`` (strings or message lists; other fields are kept). Output
lines: the input record plus ``scores`` (one per candidate, input order; ``null`` for an empty candidate),
``step_scores``, ``first_errors``, ``ranking`` (``{"index", "score"}``, best first, cut to ``--top-k``) and
``best_index``. The prompts of ``--batch-size`` lines are scored in one estimator call.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterator, TextIO

from . import read_jsonl


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rank", help="Rank the candidates of each prompt in a JSONL file.", description=__doc__
    )
    parser.add_argument("--input", type=Path, required=True, help="JSONL file of {prompt, candidates} ('-': stdin).")
    parser.add_argument("--output", type=Path, default=None, help="Write JSONL results here (default: stdout).")
    parser.add_argument("--backbone", default="default", help="'default' (shipped head), a model path / hub id, "
                        "or 'claimtrees-oracle'.")
    parser.add_argument("--kind", default=None, help="Backbone kind: nli, prm, prm-causal, judge (auto if omitted).")
    parser.add_argument("--method", default="ares", help="'ares' or a baseline, e.g. 'entail-prev'.")
    parser.add_argument("--aggregate", default="final", choices=["final", "mean", "min", "product"])
    parser.add_argument("--top-k", type=int, default=None, help="Keep the best k in 'ranking' (default: all).")
    parser.add_argument("--batch-size", type=int, default=16, help="Prompts per estimator call.")
    parser.add_argument("--prompt-key", default="prompt")
    parser.add_argument("--candidates-key", default="candidates")
    parser.add_argument("--step-separator", default="\\n\\n",
                        help="Splits a candidate into steps ('\\n' escapes understood; 'sentences' = sentence split).")
    parser.add_argument("--prompt-split", default="none", choices=["none", "sentences", "lines"])
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--prior", type=float, default=1.0)
    parser.add_argument("--mode", default="auto", choices=["auto", "exact", "sample"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.5, help="first_errors: first step with score <= this.")
    parser.add_argument("--no-progress", action="store_true", help="Hide the progress bar.")


def _separator(text: str) -> str | None:
    if text == "sentences":
        return None
    return text.replace("\\n", "\n").replace("\\t", "\t")


def _read(path: Path, prompt_key: str, candidates_key: str) -> list[dict[str, Any]]:
    records = []
    for lineno, record in read_jsonl(path):
        if not isinstance(record, dict) or prompt_key not in record or candidates_key not in record:
            raise ValueError(
                f"{path}:{lineno} needs the keys {prompt_key!r} and {candidates_key!r} (a list of candidates); "
                "rename them with --prompt-key / --candidates-key."
            )
        if not isinstance(record[candidates_key], list):
            raise ValueError(f"{path}:{lineno}: {candidates_key!r} must be a list of candidates.")
        records.append(record)
    return records


def _batches(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _result(record: dict[str, Any], scored: list[dict[str, Any]], top_k: int | None) -> dict[str, Any]:
    from ..rerank import rank_records

    ranking = [{"index": r["index"], "score": r["score"]} for r in rank_records(scored)]
    return {
        **record,
        "scores": [r["score"] for r in scored],
        "step_scores": [r["step_scores"] for r in scored],
        "first_errors": [r["first_error"] for r in scored],
        "ranking": ranking[:top_k],
        "best_index": ranking[0]["index"] if ranking else None,
    }


def _rank_all(args: argparse.Namespace, records: list[dict[str, Any]], out: TextIO) -> None:
    from tqdm.auto import tqdm

    from ..estimator import AresConfig
    from ..rerank import AresReranker, resolve_backbone

    config = AresConfig(eps=args.eps, delta=args.delta, prior=args.prior, mode=args.mode, seed=args.seed,
                        threshold=args.threshold)
    backbone = resolve_backbone(args.backbone, kind=args.kind)
    reranker = AresReranker(backbone, config=config, method=args.method, step_separator=_separator(args.step_separator),
                            prompt_split=args.prompt_split, aggregate=args.aggregate)
    with tqdm(total=len(records), desc="ranking", unit="prompt", disable=args.no_progress, file=sys.stderr) as bar:
        for batch in _batches(records, args.batch_size):
            prompts = [r[args.prompt_key] for r in batch]
            candidates = [r[args.candidates_key] for r in batch]
            for record, scored in zip(batch, reranker.score_batch(prompts, candidates)):
                out.write(json.dumps(_result(record, scored, args.top_k)) + "\n")
            bar.update(len(batch))


def run(args: argparse.Namespace) -> int:
    for name in ("top_k", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"ares-rerank rank: error: --{name.replace('_', '-')}={value} must be a positive integer.",
                  file=sys.stderr)
            return 2
    try:
        records = _read(args.input, args.prompt_key, args.candidates_key)
    except (OSError, ValueError) as err:
        print(f"ares-rerank rank: error: {err}", file=sys.stderr)
        return 2
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        _rank_all(args, records, out)
    except (TypeError, ValueError) as err:
        print(f"ares-rerank rank: error: {err}", file=sys.stderr)
        return 2
    finally:
        if args.output:
            out.close()
    print(f"ranked {len(records)} prompts ({sum(len(r[args.candidates_key]) for r in records)} candidates) with "
          f"method={args.method}, aggregate={args.aggregate}", file=sys.stderr)
    return 0

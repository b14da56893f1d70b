"""``ares-rerank score``: per-step ARES scores for chains in a JSONL file (the README's main job).

Input lines: ``{"base_claims": [...], "steps": [...]}`` or ``{"prompt": "...", "completion": "..."}``, optionally
with ``"id"`` and ``"labels"`` (1 = unsound step). Output lines: the input id, per-step scores, flags, certificate.

Examples:
    ares-rerank score chains.jsonl --backbone default --output scores.jsonl
    ares-rerank score chains.jsonl --backbone path/to/prm --backbone-options '{"trust_remote_code": true}'
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from ..utils.io import record_key

from ..chain import read_chains
from . import options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("score", help="Score every step of chains in a JSONL file.", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_io_arguments(parser, "chains")
    options.add_rerank_arguments(parser, ("method",))
    options.add_chain_text_arguments(parser)
    options.add_backbone_arguments(parser)
    options.add_config_arguments(parser)
    options.add_run_arguments(parser, batch_size=32, unit="Chains")


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from ..scoring import length_error, score_chains

    options.positive(args.batch_size, "--batch-size")
    source = options.input_path(args)
    results = options.open_results(args, source)  # checked (and locked) before any work
    # the results alone on stdout (they may be the JSONL stream): what a user's answer function or backbone
    # prints goes to stderr
    with options.keep_partial_on_failure(results), contextlib.redirect_stdout(sys.stderr):
        chains = read_chains(source, options.step_separator(args.step_separator), args.prompt_split)
        if not chains:
            print(f"input {str(source)!r} holds no chains: nothing to score.", file=sys.stderr)
        keys = [record_key(i, [chain.id, chain.base_claims, chain.steps]) for i, chain in enumerate(chains)]
        done = options.resume_results(results, keys)
        config = options.config_from_args(args)
        threshold = options.rerank_config_from_args(args).threshold
        for number, chain in enumerate(chains, 1):  # before the backbone loads: an over-long chain fails fast
            error = length_error(chain.num_steps, config, chain.id)
            if error:
                raise ValueError(f"{source} record {number}: {error}")
        backbone = options.backbone_from_args(args)
        todo, scored = chains[done:], []
        with tqdm(total=len(chains), initial=done, desc="scoring", unit="chain", disable=args.no_progress,
                  file=sys.stderr) as bar:
            for start in range(0, len(todo), args.batch_size):
                batch = todo[start:start + args.batch_size]
                batch_scores = score_chains(batch, backbone, method=args.method, config=config)
                results.append([{"id": chain.id, **scores.to_dict(), "flags": scores.flags(threshold)}
                                for chain, scores in zip(batch, batch_scores)], keys[done + start:][:len(batch)])
                scored += batch_scores
                bar.update(len(batch))
        results.finish()
    if len(todo) < len(chains):
        print(f"resumed: {len(chains) - len(todo)} chains were already scored by an earlier run", file=sys.stderr)
    _summary(todo, scored, args.method, threshold, backbone)
    notice = options.window_notice(backbone)
    if notice:
        print(notice, file=sys.stderr)
    _check_domain(todo, scored, backbone)
    return 0


def _check_domain(chains, results, backbone) -> None:
    """Say loudly, last on stderr, when the embedded demo head scored text outside its domain (its scores are then
    not meaningful), as the reranker, reward and filter do."""
    from ..backbones.demo import demo_warning_message, is_demo_backbone, off_domain_reason

    if not results or not is_demo_backbone(backbone):
        return
    reason = off_domain_reason([chain.steps for chain in chains], [scores.step_scores for scores in results])
    if reason:
        print(f"WARNING: {demo_warning_message('ares-rerank score', reason)}", file=sys.stderr)


def _summary(chains, results, method, threshold, backbone) -> None:
    """A human-readable table on stderr: one line per chain, 'x' = flagged step, labels beside when known."""
    print(f"backbone: {backbone!r}; method: {method}; threshold: {threshold}", file=sys.stderr)
    correct = total = 0
    for chain, scores in zip(chains, results):
        marks = "".join("x" if f else "." for f in scores.flags(threshold))
        line = f"{chain.id:>24}  flags {marks}"
        if chain.labels is not None:
            line += f"  gold {''.join('x' if y else '.' for y in chain.labels)}"
            correct += sum(int(f) == y for f, y in zip(scores.flags(threshold), chain.labels))
            total += chain.num_steps
        print(f"{line}  [{scores.certificate()}; {scores.evaluations} evals]", file=sys.stderr)
    if total:
        print(f"step accuracy vs gold labels: {correct}/{total} = {correct / total:.3f}", file=sys.stderr)

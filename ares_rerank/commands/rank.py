"""``ares-rerank rank``: rank the candidate completions of each prompt in a JSONL file by their ARES chain score.

Input lines: ``{"prompt": ..., "candidates": [...]}`` (strings or message lists; other fields are kept). Output
lines: the input record plus ``scores`` (one per candidate, input order; ``null`` for an empty candidate),
``step_scores``, ``first_errors``, ``ranking`` (``{"corpus_id", "index", "score"}``, best first, cut to
``--top-k``; ``corpus_id`` as in sentence-transformers' ``CrossEncoder.rank``, ``index`` its alias) and
``best_index`` (``null`` when no candidate was scored). The prompts of ``--batch-size`` lines are scored in one
estimator call.

With an answer-aware ``--selection`` (``majority``, ``weighted``, ``sound-weighted``) the ranking puts the winning
answer's candidates first, each ranking entry has ``answer`` / ``group`` / ``votes``, and the line gains ``answers``
(one per candidate, input order) and ``groups`` (every answer's vote, best first); ``best_index`` is the chosen
candidate.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path
from typing import Any

from ..rerank.answers import AnswerReadWarning
from ..utils.io import read_jsonl, record_key
from . import options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rank", help="Rank the candidates of each prompt in a JSONL file.", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_io_arguments(parser, "{prompt, candidates} records")
    options.add_rerank_arguments(parser, ("method",))
    options.add_aggregate_argument(parser)
    parser.add_argument("--top-k", type=int, default=None, help="Keep the best k in 'ranking' (default: all).")
    options.add_prompt_key_argument(parser)
    parser.add_argument("--candidates-key", default="candidates")
    options.add_selection_arguments(parser)
    options.add_chain_text_arguments(parser)
    options.add_chat_layout_arguments(parser)
    options.add_backbone_arguments(parser)
    options.add_config_arguments(parser)
    options.add_run_arguments(parser, batch_size=16, unit="Prompts")


# Words data sets use for a rank record's two keys (-> the key meant); difflib catches the near misses.
_KEY_WORDS = {"prompt": ("question", "problem", "query", "input", "instruction"),
              "candidates": ("completions", "responses", "outputs", "answers", "samples", "generations")}


def _missing_key(record: dict[str, Any], key: str, flag: str, role: str) -> str | None:
    """Why ``record`` lacks ``key``, naming the key it has instead (``question`` for ``prompt``, ``candidate`` for
    ``candidates``) and both fixes; ``None`` when it has ``key``."""
    import difflib

    if key in record:
        return None
    present = [k for k in record if isinstance(k, str)]
    near = difflib.get_close_matches(key, present, 1, 0.75) or [
        k for k in present if k.lower() in _KEY_WORDS.get(role, ())][:1]
    if near:
        return (f"has the key {near[0]!r} and no {key!r}: rename {near[0]!r} to {key!r}, or pass {flag} "
                f"{near[0]} to read it")
    return f"has no {key!r} ({flag} names the key of the {role})"


def _read(path: Path, prompt_key: str, candidates_key: str) -> list[dict[str, Any]]:
    records = []
    for lineno, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{lineno} must be a JSON object with the keys {prompt_key!r} and "
                             f"{candidates_key!r} (a list of candidates), got {type(record).__name__}.")
        missing = [why for why in (_missing_key(record, prompt_key, "--prompt-key", "prompt"),
                                   _missing_key(record, candidates_key, "--candidates-key", "candidates")) if why]
        if missing:
            raise ValueError(f"{path}:{lineno} {'; and '.join(missing)}.")
        if not isinstance(record[candidates_key], list):
            raise ValueError(f"{path}:{lineno}: {candidates_key!r} must be a list of candidates.")
        _check_texts(path, lineno, record[prompt_key], record[candidates_key], prompt_key, candidates_key)
        records.append(record)
    return records


def _check_texts(path: Path, lineno: int, prompt: Any, candidates: list, prompt_key: str, candidates_key: str) -> None:
    """Each prompt and candidate is text or a conversation, or a ValueError naming the line and the candidate (before
    the backbone loads)."""
    from ..chain import COMPLETION_ROLES, PROMPT_ROLES, message_text

    for value, roles, where in [(prompt, PROMPT_ROLES, prompt_key)] + [
            (candidate, COMPLETION_ROLES, f"{candidates_key}[{i}]") for i, candidate in enumerate(candidates)]:
        try:
            message_text(value, roles, where)
        except TypeError as err:
            raise ValueError(f"{path}:{lineno}: {err}") from err


def _result(record: dict[str, Any], scored: list[dict[str, Any]], top_k: int | None, reranker: Any) -> dict[str, Any]:
    ordered, groups = reranker.order(scored)
    keys = ("corpus_id", "index", "score", "answer", "group", "votes")
    ranking = [{k: v for k, v in {"corpus_id": r["index"], **r}.items() if k in keys} for r in ordered]
    out = {
        **record,
        "scores": [r["score"] for r in scored],
        "step_scores": [r["step_scores"] for r in scored],
        "first_errors": [r["first_error"] for r in scored],
        "ranking": ranking[:top_k],
        "best_index": ranking[0]["index"] if ranking and ranking[0]["score"] is not None else None,  # none scored
    }
    if reranker.selection != "best":  # the keys the help promises, also when no answer was read
        by_index = {r["index"]: r["answer"] for r in ordered}
        out.update(answers=[by_index[r["index"]] for r in scored], groups=groups)
    return out


def _rank_all(args: argparse.Namespace, records: list[dict[str, Any]], results: Any) -> None:

    from ..rerank.reranker import AresReranker

    config = options.config_from_args(args)
    settings = options.rerank_config_from_args(args).reranker_kwargs()  # checked before the backbone loads
    backbone = options.backbone_from_args(args)
    # one estimator call per CLI batch, one bar
    reranker = AresReranker(backbone, config=config, batch_size=None, show_progress_bar=False, **settings)
    keys = [record_key(i, record) for i, record in enumerate(records)]
    done = options.resume_results(results, keys)
    with warnings.catch_warnings():  # the answer check is said once, after the run, in the flags' words
        warnings.simplefilter("ignore", AnswerReadWarning)
        _rank_lines(args, records, results, reranker, keys, done)
    matcher = reranker.answers
    if reranker.selection != "best" and matcher.unread * 2 > matcher.seen:
        print("warning: " + matcher.unread_message("--answer-fn", "--answer-fn module:function"), file=sys.stderr)
    notice = options.window_notice(backbone)
    if notice:
        print(notice, file=sys.stderr)


def _rank_lines(args: argparse.Namespace, records: list[dict[str, Any]], results: Any, reranker: Any,
                keys: list[Any], done: int) -> None:
    from tqdm.auto import tqdm

    with tqdm(total=len(records), initial=done, desc="ranking", unit="prompt", disable=args.no_progress,
              file=sys.stderr) as bar:
        for start in range(done, len(records), args.batch_size):
            batch = records[start:start + args.batch_size]
            prompts = [r[args.prompt_key] for r in batch]
            candidates = [r[args.candidates_key] for r in batch]
            scored = reranker.score_batch(prompts, candidates)
            lines = [_result(record, one, args.top_k, reranker) for record, one in zip(batch, scored)]
            results.append(lines, keys[start:start + len(batch)])
            bar.update(len(batch))


def run(args: argparse.Namespace) -> int:
    options.positive(args.top_k, "--top-k")
    options.positive(args.batch_size, "--batch-size")
    options.answer_fn_from_args(args.answer_fn)  # before any work
    source = options.input_path(args)
    results = options.open_results(args, source)  # checked (and locked) before any work
    # the results alone on stdout (they may be the JSONL stream): what a user's answer function or backbone
    # prints goes to stderr
    with options.keep_partial_on_failure(results), contextlib.redirect_stdout(sys.stderr):
        records = _read(source, args.prompt_key, args.candidates_key)
        _rank_all(args, records, results)
        results.finish()
    print(f"ranked {len(records)} prompts ({sum(len(r[args.candidates_key]) for r in records)} candidates) with "
          f"method={args.method}, aggregate={args.aggregate}, selection={args.selection}", file=sys.stderr)
    return 0

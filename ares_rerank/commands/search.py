"""``ares-rerank search``: step-level search with your own model, each step scored by streaming ARES as it is
written: best-of-N (optionally with early rejection), beam search or DVTS (search-and-learn's definitions).

Input lines (``--problems``): ``{"prompt": ...}``, a string (continued as it is) or a list of messages (rendered with
the model's chat template); other fields are kept. Output lines: the input record plus ``method``, ``completions``
(the final candidates, steps joined by the separator), ``steps``, ``step_scores`` (ARES tau of each step),
``scores`` (chain scores under --aggregate), ``finished`` (the solution ended rather than being stopped or cut),
``stopped`` (by early rejection), ``best_index``, ``best``, ``best_score``, ``selection`` and ``stats``: the
problem's generated ``tokens`` and ``steps`` (lookahead rollouts included), backbone ``evaluations``, ``seconds``
(its share of each wave), candidates ``stopped`` and early rejection's estimated ``tokens_saved``.

--batch-size problems are searched together: their steps share each generation wave and each backbone call. Each
batch is seeded with --generation-seed plus the index of its first problem, so a stopped run resumes with the same
samples.

Examples:
    ares-rerank search Qwen/Qwen2.5-0.5B-Instruct --problems problems.jsonl --approach beam-search --n 8 \
        --output out.jsonl
    ares-rerank search MODEL --problems problems.jsonl --approach best-of-n --rejection hard --n 16 --output out.jsonl
    ares-rerank search MODEL --problems problems.jsonl --approach dvts --n 16 --beam-width 4 --engine vllm
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from ..utils.http import redact
from ..utils.io import check_input_file, read_jsonl, record_key
from . import options


#: ``--method``'s old spellings (deprecated): -> the approach.
_OLD_METHODS = {"best-of-n": "best-of-n", "beam": "beam-search", "dvts": "dvts"}


def register(subparsers: Any) -> None:
    from ..search.config import SearchConfig

    parser = subparsers.add_parser(
        "search", help="Generate with your model step by step, steered by ARES (beam search, DVTS, best-of-N).",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", metavar="MODEL",
                        help="The model that writes the steps: a causal LM folder or hub id (transformers), or what "
                             "vllm.LLM loads with --engine vllm.")
    parser.add_argument("--problems", type=Path, default=None, metavar="JSONL",
                        help="JSONL file of {\"prompt\": ...} records ('-' for standard input).")
    options.add_output_arguments(parser)
    options.add_prompt_key_argument(parser)
    options.add_dataclass_arguments(parser, SearchConfig, "search (SearchConfig fields)")
    # None until parsed, so the deprecated --method can tell when --approach is given too (_resolve_approach then
    # sets SearchConfig's default)
    parser.set_defaults(approach=None)
    parser.add_argument("--method", default=None, choices=list(_OLD_METHODS), help=argparse.SUPPRESS)  # deprecated
    options.add_aggregate_argument(parser)
    options.add_selection_arguments(parser)
    options.add_generator_arguments(parser)
    options.add_chain_text_arguments(parser)
    options.add_backbone_arguments(parser)
    options.add_config_arguments(parser)
    options.add_run_arguments(parser, batch_size=4, unit="Problems")


def _resolve_approach(args: argparse.Namespace) -> None:
    """``args.approach`` from ``--approach``, or from the deprecated ``--method`` (with a warning on stderr)."""
    if args.method is not None:
        if args.approach is not None:
            raise ValueError(f"--method {args.method} and --approach {args.approach} are both given: --method is the "
                             "old name of --approach; drop it.")
        args.approach = _OLD_METHODS[args.method]
        print(f"ares-rerank search: warning: --method is deprecated: use --approach {args.approach}.",
              file=sys.stderr, flush=True)
    if args.approach is None:
        from ..search.config import SearchConfig

        args.approach = SearchConfig.approach  # the field's default


def _search_config(args: argparse.Namespace, config: Any) -> Any:
    """The :class:`~ares_rerank.search.config.SearchConfig` of the flags, checked (one error line naming the flag for
    every setting the search cannot take, before any file is read)."""
    from ..search.config import SearchConfig

    _resolve_approach(args)
    search = options.dataclass_from_args(SearchConfig, args)
    options.positive(args.batch_size, "--batch-size")
    search.check_max_steps(config.max_steps)
    options.check_generator_arguments(args)
    return search


def _separator(args: argparse.Namespace) -> str:
    separator = options.step_separator(args.step_separator)
    if separator is None or separator.startswith("re:"):
        raise ValueError(f"--step-separator={args.step_separator!r}: generation stops each step at a literal string, "
                         "not at sentence ends or a regex; give the text that ends a step, e.g. '\\n\\n'.")
    return separator


def _read(path: Path, key: str, use_chat_template: bool | None) -> tuple[list[dict[str, Any]], list[int]]:
    """The problems, each with a non-empty prompt of one format (strings or message lists), checked line by line,
    and their line numbers."""
    from ..chain import PROMPT_ROLES, message_text

    records, linenos, formats = [], [], {}
    for lineno, record in read_jsonl(path):
        if not isinstance(record, dict) or key not in record:
            raise ValueError(f"{path}:{lineno} needs the key {key!r} (the prompt: a string or a list of messages); "
                             "name another key with --prompt-key.")
        try:
            text = message_text(record[key], PROMPT_ROLES, key)
        except TypeError as err:
            raise ValueError(f"{path}:{lineno}: {err}") from err
        if not text.strip():
            raise ValueError(f"{path}:{lineno}: {key!r} is empty: each problem needs the text its steps follow from.")
        formats.setdefault(isinstance(record[key], str), lineno)
        records.append(record)
        linenos.append(lineno)
    if use_chat_template is False and False in formats:
        raise ValueError(f"{path}:{formats[False]}: the prompt is a list of messages, which --chat-template never "
                         "cannot render: use --chat-template auto, or give string prompts.")
    if len(formats) > 1 and use_chat_template is None:
        raise ValueError(f"{path}: line {formats[True]} has a string prompt and line {formats[False]} a list of "
                         "messages: give one format, or --chat-template always to render strings as user messages.")
    return records, linenos


def _record(record: dict[str, Any], result: Any) -> dict[str, Any]:
    out = result.to_dict()
    del out["prompt"]  # the input record has it
    return {**record, **out}


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from ..rerank.reranker import AresReranker

    config = options.config_from_args(args)
    settings = _search_config(args, config)
    separator = _separator(args)
    matcher = options.answer_fn_from_args(args.answer_fn)
    if args.problems is None:
        raise ValueError("no problems: give --problems FILE.jsonl ({\"prompt\": ...} per line, '-' for standard "
                         "input).")
    check_input_file(args.problems)
    # --batch-size seeds each batch (its first problem's index): a resume with another one would sample others
    results = options.open_results(args, args.problems, sampling=("batch_size",))  # checked and locked first
    totals = {"tokens": 0, "steps": 0, "evaluations": 0, "seconds": 0.0, "stopped": 0}
    searched: list[Any] = []
    # the results alone on stdout (they may be the JSONL stream): what a user's answer function or backbone
    # prints goes to stderr
    with options.keep_partial_on_failure(results), contextlib.redirect_stdout(sys.stderr):
        records, linenos = _read(args.problems, args.prompt_key, options.CHAT_TEMPLATE_CHOICES[args.chat_template])
        if not records:
            print(f"input {str(args.problems)!r} holds no problems: nothing to search.", file=sys.stderr)
        keys = [record_key(i, record) for i, record in enumerate(records)]
        done = options.resume_results(results, keys)
        if done < len(records):
            backbone = options.backbone_from_args(args)
            generator = options.step_generator_from_args(args, separator)
            generator.check_window(generator.render([r[args.prompt_key] for r in records[done:]]), settings.horizon,
                                   "--problems", [f"{args.problems}:{n}" for n in linenos[done:]])
            reranker = AresReranker(backbone, config, step_separator=separator, prompt_split=args.prompt_split,
                                    aggregate=args.aggregate, batch_size=None, show_progress_bar=False,
                                    selection=args.selection, answer_fn=matcher, threshold=args.threshold)
            with tqdm(total=len(records), initial=done, desc=f"search ({args.approach}, n={args.n})", unit="problem",
                      disable=args.no_progress, file=sys.stderr) as bar:
                for start in range(done, len(records), args.batch_size):
                    batch = records[start:start + args.batch_size]
                    found = settings.search(generator, [r[args.prompt_key] for r in batch], reranker,
                                            seed=args.generation_seed + start)
                    results.append([_record(r, f) for r, f in zip(batch, found)], keys[start:start + len(batch)])
                    for f in found:
                        for name in totals:
                            totals[name] += getattr(f.stats, name)
                    searched += found
                    bar.set_postfix(tokens=totals["tokens"], evaluations=totals["evaluations"])
                    bar.update(len(batch))
        results.finish()
    if done:
        print(f"resumed: {done} problems were already searched by an earlier run", file=sys.stderr)
    if searched:
        count = len(searched)
        print(f"searched {count} problems with method={searched[0].method}, n={args.n}, "
              f"backbone={redact(args.backbone)}: "
              f"per problem {totals['tokens'] / count:.0f} generated tokens, {totals['steps'] / count:.1f} steps, "
              f"{totals['evaluations'] / count:.0f} backbone evaluations, {totals['seconds'] / count:.1f} s"
              + (f", {totals['stopped'] / count:.1f} candidates stopped" if args.rejection not in (None, "none")
                 else ""), file=sys.stderr)
        _demo_warning(searched, backbone)
    return 0


def _demo_warning(searched: list[Any], backbone: Any) -> None:
    """Say last on stderr when the embedded demo head scored steps outside its domain (the search then followed
    scores that carry no signal), as ``score`` and the reranker do."""
    from ..backbones.demo import demo_warning_message, is_demo_backbone, off_domain_reason

    if not is_demo_backbone(backbone):
        return
    steps = [s for r in searched for s in r.steps if s]
    scores = [s for r in searched for s, kept in zip(r.step_scores, r.steps) if kept]
    reason = off_domain_reason(steps, scores) if steps else None
    if reason:
        print(f"WARNING: {demo_warning_message('ares-rerank search', reason)}", file=sys.stderr)

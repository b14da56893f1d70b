"""``ares-rerank eval``: run a benchmark with the paper's protocol (:mod:`ares_rerank.evaluation`).

Examples:
    ares-rerank eval --task claimtrees --length 10 --n 100 --backbone claimtrees-oracle --methods ares,entail-prev
    ares-rerank eval --task prmbench --sample 50 --backbone path/to/head --output-dir runs/eval
    ares-rerank eval --task bon --generate claimtrees --backbone claimtrees-oracle
    ares-rerank eval --task bon --path completions.jsonl --answer-fn math-verify --methods ares,given
    ares-rerank eval --task bon --path completions.jsonl --methods given --subsets first

``--task bon`` reports best-of-N accuracy against N (N = 1, 2, 4, ..., mean +- SE over problems) for each method and
selection rule, with pass@N and majority@N, on a candidate file (search-and-learn's or RLHFlow's schema) or a
generated set; it also writes ``<name>.png``, accuracy against N. At N below the most, ``--subsets random`` (default)
averages seeded random subsets of N; ``--subsets first`` takes each problem's first N, as search-and-learn does.

Needs the ``eval`` extra (``pip install 'ares-rerank[eval]'``: scikit-learn, matplotlib). Everything is written under
``--out`` (default ``./ares-eval`` in the working directory): ``<name>.json`` and ``<name>.md``, and the score cache
in ``<out>/cache`` unless ``--cache-dir`` names another folder. PRMBench and BIG-Bench Mistake are read from
``--data-dir`` or ``$ARES_DATA_DIR``. ``--backbone`` defaults to ``default`` (the shipped head), as in every command;
the ClaimTrees tasks also have a perfect rule oracle, ``--backbone claimtrees-oracle``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..backbones.demo import DemoBackboneWarning
from ..utils.http import redact
from . import options


DEFAULT_METHODS = "ares,entail-prev,entail-base,roscoe-li-self,roscoe-li-source,receval-inter"
BON_METHODS = "ares,entail-prev"
DEFAULT_OUT = "ares-eval"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness's options (also used by the checkout's benchmark scripts, e.g. ``eval/bench_perf.py``)."""
    task = parser.add_argument_group("task (options left out use the loader's defaults)")
    task.add_argument("--task", required=True, help="claimtrees, recipes, prmbench, bbm, processbench, or bon "
                                                    "(best-of-N accuracy against N).")
    task.add_argument("--n", type=int, default=None, help="Evaluate the first N examples (default: the loader's).")
    task.add_argument("--sample", type=int, default=None,
                      help="Evaluate K examples drawn at random (seeded by --sample-seed) instead of all (CPU runs).")
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
    # --data_dir too: adapt and train (HfArgumentParser) take both spellings, so eval does as well
    task.add_argument("--data-dir", "--data_dir", dest="data_dir", default=None,
                      help="The folder that holds the benchmark files (default $ARES_DATA_DIR).")
    task.add_argument("--split", default=None, help="prmbench: test, test_p2 or train; processbench hub split.")
    task.add_argument("--classifications", default=None, help="prmbench: comma-separated error types to keep.")
    task.add_argument("--tasks", default=None, help="bbm: comma-separated task names to keep.")
    task.add_argument("--labels", default=None, help="bbm / processbench: propagate (default) or first.")
    task.add_argument("--question", default=None, help="prmbench: paired (default) or question.")
    task.add_argument("--out-of-range", default=None, help="prmbench: skip (default) or ignore.")
    bon = parser.add_argument_group("best-of-N (--task bon)")
    bon.add_argument("--generate", default=None, choices=["claimtrees", "recipes"],
                     help="A generated candidate set instead of --path (ares_rerank.data.bon).")
    bon.add_argument("--schema", default="auto", help="--path's schema: auto, search-and-learn or rlhflow.")
    bon.add_argument("--candidates", type=int, default=16, help="Generated sets: candidates per problem (16).")
    bon.add_argument("--recipes", default="heldout",
                     help="--generate recipes: 'heldout' (graphs the default head never trained on), 'all', or "
                          "comma-separated graph names.")
    bon.add_argument("--selections", default="best,weighted,sound-weighted",
                     help="Selection rules per method (majority needs no verifier and is always reported).")
    options.add_aggregate_argument(bon)  # search-and-learn's 'last' is final
    bon.add_argument("--max-n", type=int, default=None, help="Largest N (default: the fewest candidates).")
    bon.add_argument("--subsets", type=subsets_protocol, default="random",
                     help="Which N candidates accuracy@N reads: random (default: --subset-count seeded random subsets "
                          "of N per problem) or first (the first N of each problem, search-and-learn's protocol).")
    bon.add_argument("--subset-count", type=int, default=None,
                     help="--subsets random: random subsets per problem and N < N_max (32).")
    bon.add_argument("--subset-seed", type=int, default=None, help="--subsets random: seed of the subsets (0).")
    bon.add_argument("--step-separator", default="auto",
                     help="--path: how a candidate splits into steps: auto (Math-Shepherd's 'ки' tag where present, "
                          "else blank lines), a literal, 're:<regex>' or 'none' (sentences).")
    options.add_answer_fn_argument(bon)  # correctness against the gold answer, and the votes
    options.add_backbone_arguments(parser)
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help=f"Comma-separated: ares and/or baselines (--task bon: default {BON_METHODS}; 'given' "
                             "adds the step scores shipped with a search-and-learn file).")
    options.add_config_arguments(parser, exclude=("threshold",))  # thresholds come from cross-validation
    run_group = parser.add_argument_group("run")
    run_group.add_argument("--cache-dir", default=None, help="Score cache folder (default <out>/cache).")
    run_group.add_argument("--no-cache", action="store_true", help="Neither read nor write cached scores.")
    run_group.add_argument("--refresh", action="store_true", help="Re-score every chain and overwrite the cache.")
    run_group.add_argument("--output-dir", default=None, help=f"Results folder (default ./{DEFAULT_OUT}).")
    run_group.add_argument("--out", default=None, help=argparse.SUPPRESS)  # deprecated: --output-dir
    run_group.add_argument("--name", default=None, help="Results file stem (default: task key + backbone).")
    run_group.add_argument("--overwrite", action="store_true",
                           help="Replace an existing results file made with other settings (refused otherwise, "
                                "before any work; a rerun with the same settings replaces it).")
    options.add_run_arguments(parser, batch_size=32, unit="Chains per backbone wave (and cache save):")


def subsets_protocol(value: str) -> str:
    """``--subsets``: ``random`` or ``first`` (an ``argparse`` type: its error names the flag and the fix)."""
    from ..evaluation.bon import SUBSETS

    if value in SUBSETS:
        return value
    hint = f"; the number of random subsets is --subset-count {value}" if value.strip().isdigit() else ""
    raise argparse.ArgumentTypeError(f"{value!r} is neither 'random' (seeded random subsets of N) nor 'first' (the "
                                     f"first N candidates of each problem, search-and-learn's protocol){hint}.")


def subset_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--subsets`` / ``--subset-count`` / ``--subset-seed`` as :func:`~ares_rerank.evaluation.bon.evaluate_bon`
    keyword arguments; the last two only with ``--subsets random`` (the first N take no count and no seed)."""
    from ..evaluation.bon import SUBSET_COUNT

    if args.subsets == "first":
        given = [flag for flag, value in (("--subset-count", args.subset_count), ("--subset-seed", args.subset_seed))
                 if value is not None]
        if given:
            raise ValueError(f"{' and '.join(given)} apply to --subsets random only; --subsets first reads the first N "
                             "candidates of each problem (no draw): drop them, or pass --subsets random.")
        return {"subsets": "first"}
    count = SUBSET_COUNT if args.subset_count is None else args.subset_count
    options.positive(count, "--subset-count")
    return {"subsets": "random", "subset_count": count, "seed": 0 if args.subset_seed is None else args.subset_seed}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval", help="Evaluate on a benchmark with the paper's protocol (needs the 'eval' extra).",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)


def task_options(args: argparse.Namespace) -> dict[str, Any]:
    """The task flags as :func:`ares_rerank.evaluation.load_task` keyword arguments (``None`` = loader default)."""
    split_list = lambda v: [x.strip() for x in v.split(",") if x.strip()] if v else None  # noqa: E731
    return {
        "n": args.n, "start": args.start, "length": args.length, "variant": args.variant, "sources": args.sources,
        "depth": args.depth, "valid": args.valid, "inserted": args.inserted, "paper_compat": args.paper_compat,
        "path": args.path, "data_dir": args.data_dir, "split": args.split,
        "classifications": split_list(args.classifications), "tasks": split_list(args.tasks),
        "labels": args.labels, "question": args.question, "out_of_range": args.out_of_range,
    }


def task_from_args(args: argparse.Namespace) -> Any:
    """The task the flags name: loaded with :func:`task_options`, then ``--sample K`` drawn with ``--sample-seed``."""
    from ..evaluation import load_task

    options.positive(args.sample, "--sample")
    task = load_task(args.task, **task_options(args))
    if args.sample is not None and args.sample >= len(task.chains):
        print(f"--sample {args.sample} is not smaller than {task.name}'s {len(task.chains)} examples: all of them are "
              "evaluated, unsampled.", file=sys.stderr)
    return task if args.sample is None else task.subsample(args.sample, args.sample_seed)


def check_previous_results(path: Path, settings: dict[str, Any]) -> None:
    """Refuse, before any work, to replace a results file whose run had other ``settings`` (the keys of the results
    JSON; ``methods`` compared as a sorted list of names). The same settings again: a rerun, replaced."""
    if not path.exists():
        return
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        earlier = None
    if isinstance(earlier, dict) and isinstance(earlier.get("methods"), dict):
        earlier = {**earlier, "methods": sorted(earlier["methods"])}
    settings = json.loads(json.dumps(settings))  # tuples as lists, as the file holds them
    differ = [key for key, value in settings.items() if not isinstance(earlier, dict) or earlier.get(key) != value]
    if differ:
        raise ValueError(f"--out: {str(path)!r} holds the results of a run with other settings ({', '.join(differ)}): "
                         "pass --name <stem> to keep both, or --overwrite to replace it.")


def check_result_targets(out_dir: Path, stem: str, suffixes: tuple[str, ...]) -> None:
    """Refuse, before any work, a results file name that is a folder (the write failed after the work, naming only
    the temporary file beside it)."""
    for suffix in suffixes:
        target = out_dir / f"{stem}{suffix}"
        if target.is_dir():
            raise ValueError(f"--out: {str(target)!r} is a folder where the results file is to be written: move it "
                             "away, or pass --name <stem> to write other files.")


def _check_run_flags(args: argparse.Namespace) -> None:
    from ..utils.io import check_output_dir

    options.positive(args.batch_size, "--batch-size")
    options.positive(args.sample, "--sample")
    if args.out is not None:
        if args.output_dir is not None:
            raise ValueError(f"--out {args.out} and --output-dir {args.output_dir} are both given: --out is the old "
                             "name of --output-dir; drop it.")
        print("ares-rerank eval: warning: --out is deprecated: use --output-dir.", file=sys.stderr, flush=True)
        args.output_dir = args.out
    if args.output_dir is None:
        args.output_dir = DEFAULT_OUT
    check_output_dir(args.output_dir, flag="--output-dir")  # before any work
    if args.name is not None and (args.name in ("", ".", "..") or Path(args.name).name != args.name):
        raise ValueError(f"--name={args.name!r} must be a file stem inside --output-dir (no folder part), e.g. "
                         "'my-run'.")
    if not args.no_cache and args.cache_dir:
        if Path(args.cache_dir).exists() and not Path(args.cache_dir).is_dir():
            raise ValueError(f"--cache-dir={args.cache_dir!r} is a file: name a folder (default <out>/cache), or "
                             "give --no-cache.")
        check_output_dir(args.cache_dir, flag="--cache-dir")


def bon_task_from_args(args: argparse.Namespace) -> Any:
    """The best-of-N candidate set the flags name (``--path`` or ``--generate``), ``--sample`` drawn."""
    from ..evaluation.tasks.bon import load_bon_file, load_bon_generated
    from ..utils.io import check_input_file

    options.positive(args.candidates, "--candidates")
    if (args.path is None) == (args.generate is None):
        raise ValueError("--task bon needs exactly one of --path FILE (a search-and-learn or RLHFlow candidate file) "
                         "and --generate claimtrees|recipes.")
    if args.generate is not None:
        recipes = None if args.recipes == "all" else args.recipes if args.recipes == "heldout" else [
            r.strip() for r in args.recipes.split(",") if r.strip()]
        task = load_bon_generated(args.generate, n=args.n, candidates=args.candidates, seed=args.sample_seed,
                                  recipes=recipes, data_dir=args.data_dir)
    else:
        separator = "auto" if args.step_separator == "auto" else options.step_separator(args.step_separator)
        check_input_file(args.path)
        task = load_bon_file(args.path, schema=args.schema,
                             answer_fn=options.answer_fn_from_args(args.answer_fn), step_separator=separator, n=args.n)
    return task if args.sample is None else task.subsample(args.sample, args.sample_seed)


def run_bon(args: argparse.Namespace) -> int:
    """``--task bon``: accuracy against N, written as ``<name>.json`` / ``.md`` / ``.png``."""
    from ..evaluation import ScoreCache, backbone_key
    from ..evaluation.bon import bon_markdown, evaluate_bon
    from ..evaluation.plots import plot_accuracy_vs_n
    from ..utils.io import write_atomic

    subsets = subset_options(args)
    options.positive(args.max_n, "--max-n")
    methods = [m.strip() for m in (BON_METHODS if args.methods == DEFAULT_METHODS else args.methods).split(",")
               if m.strip()]
    selections = [s.strip() for s in args.selections.split(",") if s.strip()]
    task = bon_task_from_args(args)
    load_options = options.backbone_options(args)
    config = options.config_from_args(args)
    out_dir = Path(args.output_dir)
    stem = args.name or f"{task.key}__{backbone_key(args.backbone, args.kind)}"
    settings = {"task": task.key, "backbone": redact(args.backbone), "backbone_options": redact(load_options or {}),
                "config": asdict(config), "methods": sorted(methods), "selections": selections,
                **subsets}
    check_result_targets(out_dir, stem, (".json", ".md", ".png"))
    if not args.overwrite:
        check_previous_results(out_dir / f"{stem}.json", {"settings": settings})
    backbone = None if methods == ["given"] else options.backbone_from_args(args)
    cache = None if args.no_cache else ScoreCache(args.cache_dir or out_dir / "cache")
    results, demo = holding_demo_warning(lambda: evaluate_bon(
        task, backbone, methods, config, selections=selections, aggregate=args.aggregate, max_n=args.max_n,
        **subsets, backbone_name=args.backbone, backbone_kind=args.kind,
        backbone_options=load_options, cache=cache, refresh=args.refresh, batch_size=args.batch_size,
        progress=not args.no_progress))
    results["settings"] = settings  # what a rerun is compared by
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / f"{stem}.json", json.dumps(results, indent=1))
    markdown = bon_markdown(results)
    write_atomic(out_dir / f"{stem}.md", markdown + "\n")
    plot_accuracy_vs_n(results, out_dir / f"{stem}.png")
    print(markdown)
    print(f"wrote {out_dir / stem}.json, .md and .png")
    if demo:
        print(f"WARNING: {demo}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    from ..evaluation import ScoreCache, backbone_key, evaluate, task_record, write_results

    _check_run_flags(args)
    if args.task == "bon":
        return run_bon(args)
    task = task_from_args(args)
    load_options = options.backbone_options(args)
    config = options.config_from_args(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    out_dir = Path(args.output_dir)
    stem = args.name or f"{task.key}__{backbone_key(args.backbone, args.kind)}"
    check_result_targets(out_dir, stem, (".json", ".md"))
    if not args.overwrite:
        check_previous_results(out_dir / f"{stem}.json", {
            "task": task_record(task), "backbone": redact(args.backbone),
            "backbone_options": redact(load_options or {}), "config": asdict(config), "methods": sorted(methods)})
    backbone = options.backbone_from_args(args)
    cache = None if args.no_cache else ScoreCache(args.cache_dir or out_dir / "cache")
    results, demo = holding_demo_warning(lambda: evaluate(
        task, backbone, methods, config, backbone_name=args.backbone, backbone_kind=args.kind,
        backbone_options=load_options, cache=cache, refresh=args.refresh, batch_size=args.batch_size,
        progress=not args.no_progress))
    path = write_results(results, out_dir, stem)
    print((path.with_suffix(".md")).read_text(encoding="utf-8"))
    print(f"wrote {path} and {path.with_suffix('.md').name}")
    if demo:  # last on stderr, as `score` says it: the scores above are not meaningful
        print(f"WARNING: {demo}", file=sys.stderr)
    return 0


def holding_demo_warning(run: Any) -> tuple[Any, str | None]:
    """``run()``'s result and the first :class:`DemoBackboneWarning` it raised (held back, so the command can say it
    last on stderr); every other warning is shown as Python would have shown it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DemoBackboneWarning)
        result = run()
    demo = [w for w in caught if issubclass(w.category, DemoBackboneWarning)]
    for other in caught:
        if other not in demo:
            warnings.showwarning(other.message, other.category, other.filename, other.lineno)
    return result, str(demo[0].message) if demo else None

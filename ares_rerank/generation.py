"""Best-of-N generation: sample N completions per prompt with a transformers causal LM or a vLLM ``LLM``, keep the
best by ARES.

Data flow: prompts -> (chat template) -> ``model.generate(num_return_sequences=N)``, or vLLM's
``llm.generate`` / ``llm.chat`` with ``SamplingParams(n=N)`` -> N completions per prompt ->
:meth:`AresReranker.score_batch <ares_rerank.rerank.AresReranker.score_batch>` (all prompts in one estimator call)
-> the best completion per prompt, with every candidate's score.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Sequence

from .aggregate import Aggregate, get_aggregate
from .answers import AnswerFn, answer_matcher
from .utils.checks import check_positive_int, is_int
from .rerank import AresReranker
from .scoring import progress_bar
from .voting import check_selection


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
        selection: The rule that chose ``best`` (``"best"``: the highest chain score; or an answer-aware vote).
        answers: Under a vote, each candidate's final answer (``None``: none found); else ``None``.
        groups: Under a vote, every answer's vote, best first (``answer``, ``size``, ``votes``, ``sound``,
            ``members``); else empty.
    """

    prompt: Any
    best: str
    best_index: int
    best_score: float | None
    candidates: list[str]
    scores: list[float | None]
    records: list[dict[str, Any]] = field(repr=False)
    selection: str = "best"
    answers: list[Any] | None = None
    groups: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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


def _sample_transformers(
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


def _sample_vllm(
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
    selection: str | None = None,
    answer_fn: AnswerFn | None = None,
    **generate_kwargs: Any,
) -> list[BestOfN]:
    """Sample ``n`` completions per prompt and keep the one with the best ARES chain score, or the one an
    answer-aware vote picks (``selection=``).

    With a vLLM ``LLM`` as ``model``, string prompts are sampled by ``llm.generate(prompts, params, use_tqdm=...)``
    and conversations by ``llm.chat(conversations, params, use_tqdm=...)`` (vLLM renders them with the chat template
    and ``add_generation_prompt=True``), all prompts in one call, where ``params`` is ``SamplingParams(n=n,
    max_tokens=max_new_tokens, seed=seed, ...)`` on top of the model's default sampling
    (``llm.get_default_sampling_params()``, its generation_config). The candidates are each
    ``RequestOutput.outputs[i].text``; scoring and selection are the same as with transformers. vllm is imported
    only then (the interface of vLLM 0.33; ``llm.chat`` takes a list of conversations since vLLM 0.6.2).

    Args:
        model: A transformers causal LM (``model.generate``), or a vLLM ``LLM``.
        tokenizer: The causal LM's tokenizer. For a vLLM ``LLM``: ``None`` (it tokenizes with its own), or a
            tokenizer whose ``chat_template`` is passed to ``llm.chat``.
        prompts: Strings, or conversations (lists of ``{"role", "content"}`` messages, rendered with the chat
            template and ``add_generation_prompt=True``). The reranker reads the base claims from the prompt.
        reranker: Scores the candidates (its method, backbone, step splitting and aggregate apply).
        n: Samples per prompt (``num_return_sequences``; vLLM's ``SamplingParams.n``).
        max_new_tokens: Generation length limit (vLLM's ``max_tokens``).
        batch_size: Prompts per ``generate`` call (each yields ``n`` sequences); vLLM takes every prompt in one call.
        use_chat_template: ``None``: only conversational prompts use the chat template; ``True``: string prompts
            are wrapped as one user message too; ``False``: never.
        aggregate: Chain score for selection (default: the reranker's).
        seed: Seeds torch's RNG before generating (reproducible samples); vLLM's ``SamplingParams.seed``.
        show_progress_bar: tqdm bars on stderr over the prompts generated and the chains scored; ``None`` shows
            each for work longer than one batch, ``False`` never, ``True`` always. vLLM's bar is its own
            (``use_tqdm``), shown by the same rule.
        selection: ``"best"`` (the highest chain score), ``"majority"``, ``"weighted"`` or ``"sound-weighted"``
            (votes over the candidates' final answers, :mod:`ares_rerank.voting`); default: the reranker's.
        answer_fn: How final answers are read for the votes (``"standard"``, ``"math-verify"`` or a callable);
            default: the reranker's.
        **generate_kwargs: Passed to ``model.generate`` (``temperature``, ``top_p``, ...); ``do_sample`` defaults
            to True. For vLLM they become ``SamplingParams`` fields: the same names (``temperature``, ``top_p``,
            ``top_k``, ``min_p``, ``repetition_penalty``, or any other field), ``min_new_tokens`` as ``min_tokens``,
            ``stop_strings`` as ``stop``, ``do_sample=False`` as ``temperature=0``; any other is a TypeError naming it.

    Returns:
        One :class:`BestOfN` per prompt, in order. Ties go to the earlier sample.
    """
    if isinstance(prompts, (str, Mapping)) or not isinstance(prompts, Iterable):
        raise TypeError(f"best_of_n(prompts=...) got a {type(prompts).__name__}: pass a list of prompts (strings or "
                        "conversations).")
    vllm = is_vllm_llm(model)
    if not vllm and (not callable(getattr(model, "generate", None)) or not callable(tokenizer)):
        raise TypeError(f"best_of_n(model={type(model).__name__}, tokenizer={type(tokenizer).__name__}) needs a "
                        "transformers causal LM (with .generate) and its tokenizer, e.g. from "
                        "AutoModelForCausalLM.from_pretrained / AutoTokenizer.from_pretrained, or a vllm.LLM.")
    if "num_return_sequences" in generate_kwargs:
        raise TypeError("best_of_n: pass the number of samples per prompt as n=, not num_return_sequences=.")
    if not isinstance(reranker, AresReranker):
        raise TypeError(f"best_of_n(reranker=...) must be an AresReranker, got {type(reranker).__name__}.")
    for name, value in (("n", n), ("max_new_tokens", max_new_tokens), ("batch_size", batch_size)):
        check_positive_int(value, f"best_of_n({name}")
    # checked before any generation (a bad aggregate was refused only once every sample was drawn)
    if aggregate is not None:
        get_aggregate(aggregate)
    if selection is not None:
        selection = check_selection(selection, "best_of_n(selection)")
    if answer_fn is not None:
        answer_fn = answer_matcher(answer_fn)
    if seed is not None and (not is_int(seed) or seed < 0):
        raise ValueError(f"best_of_n(seed={seed!r}) must be a non-negative int, or None.")
    if use_chat_template not in (None, True, False):
        raise ValueError(f"best_of_n(use_chat_template={use_chat_template!r}) must be True, False or None.")
    if show_progress_bar is not None and not isinstance(show_progress_bar, bool):
        raise TypeError(f"best_of_n(show_progress_bar={show_progress_bar!r}) must be True, False or None.")
    if n > 1 and generate_kwargs.get("do_sample") is False:
        raise ValueError(f"best_of_n(n={n}, do_sample=False): greedy decoding gives one answer, not {n} different "
                         "samples: drop do_sample=False (or pass n=1).")
    prompts = list(prompts)
    empty = [i for i, p in enumerate(prompts) if isinstance(p, str) and not p.strip() and not use_chat_template]
    if empty:
        raise ValueError(f"best_of_n: prompts{empty[:5]} are empty strings, which leave a model nothing to continue: "
                         "give each prompt its text (or use_chat_template=True to wrap it as a user message).")
    conversations = prompt_conversations(prompts, use_chat_template)
    if vllm:
        params = sampling_params(model, n, max_new_tokens, seed, generate_kwargs)
        use_tqdm = len(prompts) > batch_size if show_progress_bar is None else show_progress_bar
        candidates = _sample_vllm(model, tokenizer, prompts, conversations, params, use_tqdm)
    else:
        generate_kwargs = {"max_new_tokens": max_new_tokens, **generate_kwargs}
        candidates = _sample_transformers(model, tokenizer, prompts, conversations, n, batch_size, seed,
                                          show_progress_bar, generate_kwargs)
    scored = reranker.score_batch(prompts, candidates, aggregate=aggregate, show_progress_bar=show_progress_bar)
    return [_best(prompt, texts, records, reranker, selection, answer_fn)
            for prompt, texts, records in zip(prompts, candidates, scored)]


def _best(prompt: Any, texts: list[str], records: list[dict[str, Any]], reranker: AresReranker,
          selection: str | None, answer_fn: Any) -> BestOfN:
    scores = [r["score"] for r in records]
    ordered, groups = reranker.order(records, selection, answer_fn)
    best = ordered[0]["index"]
    answers = None
    if groups:
        by_index = {r["index"]: r["answer"] for r in ordered}
        answers = [by_index[i] for i in range(len(records))]
    return BestOfN(prompt, texts[best], best, scores[best], list(texts), scores, records,
                   selection or reranker.selection, answers, groups)

"""Best-of-N generation: sample N completions per prompt with a transformers causal LM or a vLLM ``LLM``, keep the
best by ARES.

Data flow: prompts -> (chat template) -> ``model.generate(num_return_sequences=N)``, or vLLM's
``llm.generate`` / ``llm.chat`` with ``SamplingParams(n=N)`` -> N completions per prompt ->
:meth:`AresReranker.score_batch <ares_rerank.rerank.AresReranker.score_batch>` (all prompts in one estimator call)
-> the best completion per prompt, with every candidate's score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..aggregate import Aggregate, get_aggregate
from ..engines import is_vllm_llm, prompt_conversations, sample_transformers, sample_vllm, sampling_params
from .answers import AnswerFn, answer_matcher
from ..utils.checks import check_positive_int, is_int
from .reranker import AresReranker
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
            (votes over the candidates' final answers, :mod:`ares_rerank.rerank.voting`); default: the reranker's.
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
        candidates = sample_vllm(model, tokenizer, prompts, conversations, params, use_tqdm)
    else:
        generate_kwargs = {"max_new_tokens": max_new_tokens, **generate_kwargs}
        candidates = sample_transformers(model, tokenizer, prompts, conversations, n, batch_size, seed,
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

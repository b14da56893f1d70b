"""Where a generative verifier's model runs (:mod:`~ares_rerank.backbones.generative`): the *engines*, the one
interface every verifier family talks to (``generate`` / ``logprobs`` / ``encode``), so the local and the served
paths cannot drift apart.

- ``generate(prompt, n, sampling)``: ``n`` sampled continuations of a prompt text (the engine tokenizes it with
  special tokens, as vLLM's ``/v1/completions`` and sglang do), cut at the first stop string as vLLM cuts
  (``include_stop_str_in_output`` kept or not); locally (:class:`LocalEngine`) ``model.generate`` with the sampling
  given (top-k 0 and top-p 1 mean off), seeded per call from ``seed``; served, ONE request with ``n=`` (no ``seed``
  is ever sent: a fixed seed would repeat the same samples on every call);
- ``generate_many(requests, sampling, max_tokens=None)`` (optional): ``generate`` for several ``(prompt, n)`` at once
  (one local ``generate`` call over their rows; concurrent requests to a server), ``max_tokens`` a budget per request
  where they differ (GenPRM's output stage); an engine without it is asked one prompt at a time;
- ``logprobs(queries, top)``: for token-id contexts and one next token each, that token's log-probability and the
  top-``top`` ones at that position (raw log-softmax of the logits, as vLLM V1 returns them); locally one forward
  pass per batch; on ``/v1/completions`` (:class:`ServedEngine`), vLLM's ``prompt_logprobs`` on prompts of token
  ids (the context plus the token), as :mod:`~ares_rerank.backbones.vllm_completions` reads them.

**On ``/v1/chat/completions``** (:class:`ChatEngine`, ``api="chat"``). The verifiers render their prompts as text
(the tokenizer's chat template applied, then text appended: ThinkPRM's ``"\\nLet's verify step by step:"``, a
rationale, a verdict prompt); a chat endpoint takes messages and renders them with the served model's template. So a
prompt text is sent as the messages it was rendered from (the verifier tells the engine:
:meth:`ChatEngine.remember_chat`), the text past them as a continued final message (``continue_final_message=True``,
``add_generation_prompt=False``): the last message continued or a new assistant turn, whichever the tokenizer's
template renders back to exactly the same text (a prompt that ends at the generation prompt is sent with
``add_generation_prompt=True`` instead). A text no such messages render (a prompt written without a chat
template, such as ``use_chat_template=False``, or R-PRM's literal ChatML on a tokenizer without a ChatML template) is
refused, naming ``api="completions"``. Generation is ONE request per input with ``n=``, ``add_special_tokens=True``
(the ids ``encode`` gives, as ``/v1/completions`` tokenizes) and ``return_token_ids=True``; a verdict read is a
second request that scores it: the context and the token decoded to text (refused when the text does not encode
back to the same ids), sent as messages with ``max_tokens=1`` and ``prompt_logprobs`` (one read a request, as a chat
request holds one conversation; ``concurrency`` in flight).

What a chat server must answer (vLLM's chat schema; anything else is refused naming the feature):
``continue_final_message`` / ``add_generation_prompt`` / ``add_special_tokens`` (vLLM's chat extra parameters);
``prompt_token_ids`` (``return_token_ids``), compared with the tokenizer's ids of the text, so a server whose chat
template differs from the tokenizer's is refused instead of scoring another input; ``choices[i].token_ids`` (or
``"token_id:<id>"`` tokens in ``logprobs.content``) for the generated ids; ``prompt_logprobs`` on reads (one entry
per prompt token). An OpenAI-style server without them (OpenAI's own API) cannot give the verdict's
log-probability on a given text: use a vLLM server.

One module past 500 lines, because the three engines are one interface (the chat engine is the completions engine
with another request shape) and :func:`load_engine` picks among them.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from ..utils.checks import check_positive_int, is_finite_number, is_int
from .served import (
    DEFAULT_MAX_RESPONSE_BYTES,
    JsonClient,
    ServerResponseError,
    answer_choices,
    check_concurrency,
    finite_number,
    map_bounded,
    model_card,
    served_model_and_window,
)
from .prefix import (
    causal_cache_argument,
    forward_parameters,
    head_states,
    output_logits,
    plan_batches,
    shared_prefix_length,
)
from .tokenization import model_window


__all__ = [
    "ENGINE_APIS",
    "ChatEngine",
    "Generation",
    "LocalEngine",
    "LogprobAnswer",
    "LogprobQuery",
    "Sampling",
    "ServedEngine",
    "cache_layers",
    "cut_at_stop",
    "join_rows",
    "load_engine",
    "plain_cache",
    "softmax_pair",
]

#: A served verifier's endpoint (``api=``): vLLM's ``/v1/completions`` or ``/v1/chat/completions``.
ENGINE_APIS = ("completions", "chat")


@dataclass(frozen=True)
class Sampling:
    """How one generation stage samples (vLLM's ``SamplingParams`` names and meanings).

    Attributes:
        temperature: 0 = greedy (then the verdicts do not vary, and ARES gains nothing from sampling them).
        top_p: Nucleus mass (1 = off).
        top_k: Top-k (0 = off; vLLM's -1).
        max_tokens: Tokens generated at most.
        stop: Strings that end the generation (at the first one found).
        include_stop: Keep the stop string at the end of the text (vLLM's ``include_stop_str_in_output``).
        repetition_penalty: 1 = off.
    """

    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 2048
    stop: tuple[str, ...] = ()
    include_stop: bool = False
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if not is_finite_number(self.temperature) or self.temperature < 0:
            raise ValueError(f"Sampling(temperature={self.temperature!r}) must be a number >= 0, e.g. 0.7.")
        if not is_finite_number(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"Sampling(top_p={self.top_p!r}) must lie in (0, 1] (1 = off), e.g. 0.95.")
        if not is_int(self.top_k) or self.top_k < 0:
            raise ValueError(f"Sampling(top_k={self.top_k!r}) must be a whole number >= 0 (0 = off), e.g. 20.")
        if not is_int(self.max_tokens) or self.max_tokens < 0:
            raise ValueError(f"Sampling(max_tokens={self.max_tokens!r}) must be a whole number >= 0, e.g. 2048.")
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise ValueError(f"Sampling(stop={self.stop!r}) must be a tuple of non-empty strings, e.g. ('</output>',).")
        if not is_finite_number(self.repetition_penalty) or self.repetition_penalty <= 0:
            raise ValueError(f"Sampling(repetition_penalty={self.repetition_penalty!r}) must be > 0 (1 = off).")
        object.__setattr__(self, "stop", tuple(self.stop))

    @classmethod
    def from_value(cls, value: Sampling | dict[str, Any] | None, default: Sampling, name: str = "sampling") -> Sampling:
        """``value`` as a :class:`Sampling`: one as given, ``None`` for ``default``, or a dict of its fields (what
        ``--backbone-options`` JSON gives: ``{"max_tokens": 256, "stop": ["</s>"]}``), the fields it leaves out
        taken from ``default``.

        Raises:
            TypeError: ``value`` is none of these.
            ValueError: a dict names a field :class:`Sampling` does not have, or a field's value is refused.
        """
        if value is None:
            return default
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise TypeError(f"{name}={value!r:.80} must be a Sampling or a dict of its fields, e.g. "
                            f'{{"temperature": 0.7, "max_tokens": 256}}.')
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(k) for k in value if k not in fields)
        if unknown:
            raise ValueError(f"{name}= has the unknown field(s) {unknown}: a Sampling has {fields}.")
        given = dict(value)
        if isinstance(given.get("stop"), list):  # JSON has no tuples
            given["stop"] = tuple(given["stop"])
        return replace(default, **given)


@dataclass
class Generation:
    """One sampled continuation: its text (cut at the stop string) and the token ids the model generated."""

    text: str
    token_ids: list[int]


@dataclass
class LogprobQuery:
    """Read ``token`` after the token ids ``context``: its log-probability and the top ones at that position."""

    context: list[int]
    token: int


@dataclass
class LogprobAnswer:
    """``logprob`` of the query's token, and ``top``: token id -> log-probability of the top ones there."""

    logprob: float
    top: dict[int, float] = field(default_factory=dict)


def softmax_pair(yes: float, no: float) -> float:
    """``exp(yes) / (exp(yes) + exp(no))`` for two log-probabilities, without overflow (0.5 when both are -inf)."""
    if yes == no:
        return 0.5
    diff = yes - no
    if math.isnan(diff):
        return 0.5
    return 1.0 / (1.0 + math.exp(-diff)) if diff >= 0 else math.exp(diff) / (1.0 + math.exp(diff))


def cut_at_stop(text: str, stop: Sequence[str], include: bool) -> tuple[str, bool]:
    """``(text cut at the first stop string, whether one was found)``, as vLLM cuts: the earliest match wins (the
    longest at one place), kept with ``include``."""
    best = None
    for s in stop:
        i = text.find(s)
        if i >= 0 and (best is None or i < best[0] or (i == best[0] and len(s) > len(best[1]))):
            best = (i, s)
    if best is None:
        return text, False
    i, s = best
    return (text[: i + len(s)] if include else text[:i]), True


def cache_layers(cache: Any) -> list[tuple[Any, Any]] | None:
    """``(keys, values)`` per layer of a ``DynamicCache`` made of plain dynamic layers (``(rows, kv heads, length,
    head dim)`` each); ``None`` for any other layout (sliding windows, hybrid or quantized caches)."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # another cache layout: the caller runs the rows whole
        return None
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


def plain_cache(model: Any) -> bool:
    """Whether ``model``'s KV cache is made of plain dynamic layers (:func:`cache_layers`), read from its config
    without a pass: the layout whose prompt states can be stored and joined."""
    from transformers import DynamicCache

    config = getattr(model, "config", None)
    try:
        return config is not None and cache_layers(DynamicCache(config=config)) is not None
    except (TypeError, ValueError, AttributeError):  # a config DynamicCache cannot read: run the rows whole
        return False


def join_rows(states: Sequence[list[tuple[Any, Any]]], repeats: Sequence[int], pads: Sequence[int], config: Any) -> Any:
    """One ``DynamicCache`` holding ``repeats[i]`` copies of the one-row ``states[i]`` (:func:`cache_layers`), in
    order, each left-padded with ``pads[i]`` zero positions (masked by the caller's attention mask). New tensors:
    the states given are never changed, so a stored prompt's can be joined again."""
    import torch
    from transformers import DynamicCache

    joined = DynamicCache(config=config)
    for index in range(len(states[0])):
        keys = [torch.nn.functional.pad(layers[index][0], (0, 0, pad, 0)).expand(n, -1, -1, -1)
                for layers, n, pad in zip(states, repeats, pads)]
        values = [torch.nn.functional.pad(layers[index][1], (0, 0, pad, 0)).expand(n, -1, -1, -1)
                  for layers, n, pad in zip(states, repeats, pads)]
        joined.update(torch.cat(keys), torch.cat(values), index)
    return joined


def check_budgets(max_tokens: Sequence[int] | None, requests: Sequence[Any], sampling: Sampling) -> list[int]:
    """The generation budget of each of ``requests``: ``max_tokens``' entries (one per request, each a whole number
    >= 0), or ``sampling.max_tokens`` for all."""
    if max_tokens is None:
        return [sampling.max_tokens] * len(requests)
    budgets = list(max_tokens)
    if len(budgets) != len(requests) or not all(is_int(b) and b >= 0 for b in budgets):
        raise ValueError(f"max_tokens={budgets[:8]!r}: give one whole number >= 0 per request ({len(requests)} "
                         "requests), or None for sampling.max_tokens.")
    return budgets


# -- engines ----------------------------------------------------------------------------------------------------------
class LocalEngine:
    """A transformers causal LM as the verifier's engine (see the module docstring).

    Args:
        model: A loaded causal LM (eval mode).
        tokenizer: Its tokenizer.
        seed: Seeds the sampler: the ``c``-th ``generate`` call of this engine samples under seed ``(seed, c)``, so a
            run is reproducible and no two calls repeat each other's draws (reads of log-probabilities draw nothing
            and do not move it).
        batch_size: Sequences per forward pass when reading log-probabilities.
        max_model_len: The window (prompt and generated tokens together); ``None``: the model's (its position table
            and config, :func:`~ares_rerank.backbones.tokenization.model_window`).
        generate_rows: Rows (samples, over the prompts of one :meth:`generate_many`) per ``generate`` call: bounds
            the KV cache one call holds.
        prompt_store_tokens: Prompt positions whose KV states are kept (one row each, least recently used dropped
            first), so the verdict reads of a prompt's samples do not run it again (:meth:`prompt_states`).
    """

    def __init__(self, model: Any, tokenizer: Any, *, seed: int = 0, batch_size: int = 8,
                 max_model_len: int | None = None, generate_rows: int = 64, prompt_store_tokens: int = 8192) -> None:
        if not is_int(seed) or seed < 0:
            raise ValueError(f"seed={seed!r} must be a whole number >= 0.")
        check_positive_int(batch_size, "batch_size", 8)
        check_positive_int(generate_rows, "generate_rows", 64)
        check_positive_int(prompt_store_tokens, "prompt_store_tokens", 8192)
        self.generate_rows, self.prompt_store_tokens = generate_rows, prompt_store_tokens
        self.prompts: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()
        self.stored_tokens = 0
        self.max_model_len = model_window(model, tokenizer, max_model_len)
        self.model, self.tokenizer = model, tokenizer
        self.cache_argument = causal_cache_argument(model)  # None: no shared prompt states (every row run whole)
        self.joinable = self.cache_argument is not None and plain_cache(model)  # prompts' states stored and joined
        params = forward_parameters(model)
        self.position_ids, self.keep_logits = "position_ids" in params, "logits_to_keep" in params
        self.seed, self.calls, self.draws, self.batch_size = int(seed), 0, 0, batch_size
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_id = int(pad) if pad is not None else 0

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def encode(self, text: str) -> list[int]:
        """The ids an engine reads for a prompt text: the tokenizer's, special tokens included (vLLM, sglang)."""
        return list(self.tokenizer.encode(text))

    def window(self) -> int:
        """The most positions the model attends to, prompt and generated tokens together."""
        return self.max_model_len

    def generate(self, prompt: str, n: int, sampling: Sampling) -> list[Generation]:
        """``n`` sampled continuations of ``prompt`` in one ``generate`` call; a causal decoder runs the prompt once
        and its ``n`` rows continue from that KV cache (vLLM's prefix caching, locally)."""
        return self.generate_many([(prompt, n)], sampling)[0]

    def generate_many(self, requests: Sequence[tuple[str, int]], sampling: Sampling,
                      max_tokens: Sequence[int] | None = None) -> list[list[Generation]]:
        """For each ``(prompt, n)``, ``n`` sampled continuations; the rows of several prompts are sampled together
        in one ``generate`` call (at most ``generate_rows`` rows a call; a prompt with more samples goes alone), as
        a server batches concurrent requests. A causal decoder runs each prompt once: its rows continue from its KV
        cache, the prompts' caches left-padded into one (:meth:`prompt_batch`). ``max_tokens`` gives each request
        its own budget in place of ``sampling.max_tokens``: a call samples up to its largest and cuts each row at
        its own (a row's first ``k`` sampled tokens are a sample with budget ``k``)."""
        budgets = check_budgets(max_tokens, requests, sampling)
        if max(budgets, default=0) == 0:
            return [[Generation("", []) for _ in range(n)] for _, n in requests]
        encoded = [self.encode(prompt) for prompt, _ in requests]
        chunks: list[list[int]] = []
        for i, (_, n) in enumerate(requests):
            if chunks and sum(requests[j][1] for j in chunks[-1]) + n <= self.generate_rows:
                chunks[-1].append(i)
            else:
                chunks.append([i])
        out: list[list[Generation]] = [[] for _ in requests]
        for chunk in chunks:
            counts = [requests[i][1] for i in chunk]
            rows = self.sample_rows([encoded[i] for i in chunk], counts, sampling,
                                    [budgets[i] for i, n in zip(chunk, counts) for _ in range(n)])
            at = 0
            for i in chunk:
                out[i] = rows[at : at + requests[i][1]]
                at += requests[i][1]
        return out

    def sample_rows(self, prompts: Sequence[list[int]], counts: Sequence[int], sampling: Sampling,
                    budgets: Sequence[int] | None = None) -> list[Generation]:
        """One seeded ``generate`` call: ``counts[i]`` rows continuing ``prompts[i]``, in that order, each cut at its
        ``budgets`` entry (default: ``sampling.max_tokens`` for all; the call samples up to the largest)."""
        import torch

        budgets = list(budgets) if budgets is not None else [sampling.max_tokens] * sum(counts)
        kwargs: dict[str, Any] = {"max_new_tokens": max(budgets), "pad_token_id": self.pad_id,
                                  "repetition_penalty": sampling.repetition_penalty}
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
        else:
            kwargs.update(do_sample=False, num_beams=1)
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        eos = self.model.generation_config.eos_token_id if getattr(self.model, "generation_config", None) else None
        eos = {eos} if isinstance(eos, int) else set(eos or []) | ({self.tokenizer.eos_token_id} - {None})
        self.calls += 1
        self.draws += 1
        with torch.inference_mode():
            ids, mask, cache = self.prompt_batch(prompts, counts)
            if cache is not None:  # generate runs only what the cache lacks: the last prompt token, then new ones
                kwargs[self.cache_argument] = cache
            with torch.random.fork_rng(devices=[] if ids.device.type == "cpu" else [ids.device]):
                torch.manual_seed(hash((self.seed, self.draws)) % 2**63)
                out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        generations = []
        for row, budget in zip(out[:, ids.shape[1]:].tolist(), budgets):
            row = row[:budget]
            end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))  # the eos ends it (kept, as vLLM)
            row = row[:end]
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            text, _ = cut_at_stop(text, sampling.stop, sampling.include_stop)
            generations.append(Generation(text, row))
        return generations

    def prompt_batch(self, prompts: Sequence[list[int]], counts: Sequence[int]) -> tuple[Any, Any, Any]:
        """``(input_ids, attention_mask, cache)`` of ``counts[i]`` rows per prompt, left-padded to the longest.

        A causal decoder runs each prompt but its last token once, or not at all when its states are stored
        (:meth:`prompt_states`); the states are repeated to the prompt's rows, left-padded with masked zeros and
        joined along the rows (:func:`join_rows`), so each row's keys keep the positions they were computed at and
        generate's positions (from the attention mask) continue them. ``cache`` is ``None`` (every row run whole)
        for another model, a one-token prompt, or several prompts whose cache layers are not plain dynamic ones
        (sliding windows, hybrid models; one such prompt gets its own cache repeated to its rows)."""
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((sum(counts), width), self.pad_id, dtype=torch.long, device=self.device)
        mask = torch.zeros_like(ids)
        at = 0
        for prompt, n in zip(prompts, counts):
            ids[at : at + n, width - len(prompt):] = torch.tensor(prompt, device=self.device)
            mask[at : at + n, width - len(prompt):] = 1
            at += n
        if self.cache_argument is None or min(len(p) for p in prompts) < 2:
            return ids, mask, None
        if not self.joinable:  # a cache layout that cannot be joined: one prompt's own cache, repeated to its rows
            if len(prompts) > 1:
                return ids, mask, None
            head = torch.tensor([prompts[0][:-1]], device=self.device)
            ran = head_states(self.model, {"input_ids": head, "attention_mask": torch.ones_like(head)},
                              self.cache_argument, counts[0], logits=False)
            return ids, mask, None if ran is None else ran[1]
        states = [self.prompt_states(prompt[:-1]) for prompt in prompts]
        if any(state is None for state in states):  # the model filled no cache
            return ids, mask, None
        return ids, mask, join_rows(states, counts, [width - len(p) for p in prompts], self.model.config)

    def prompt_states(self, ids: Sequence[int]) -> list[tuple[Any, Any]] | None:
        """The one-row KV states after the token ids ``ids`` (:func:`cache_layers`), from the store of recent
        prompts or one pass (then stored, the least recently used dropped past ``prompt_store_tokens``): a prompt
        whose samples were just generated is not run again when their verdicts are read. Called for a plain cache
        layout only (``joinable``); ``None`` when the model filled no cache."""
        import torch

        key = tuple(int(t) for t in ids)
        if key in self.prompts:
            self.prompts.move_to_end(key)
            return self.prompts[key]
        head = torch.tensor([list(key)], device=self.device)
        ran = head_states(self.model, {"input_ids": head, "attention_mask": torch.ones_like(head)},
                          self.cache_argument, 1, logits=False)
        states = None if ran is None else cache_layers(ran[1])
        if states is not None and len(key) <= self.prompt_store_tokens:
            self.prompts[key] = states
            self.stored_tokens += len(key)
            while self.stored_tokens > self.prompt_store_tokens:
                dropped, _ = self.prompts.popitem(last=False)
                self.stored_tokens -= len(dropped)
        return states

    def stored_head(self, contexts: Sequence[Sequence[int]], shared: int) -> tuple[int, Any]:
        """The longest stored prompt that starts every one of ``contexts`` within their ``shared`` head: ``(its
        length, its states)``, or ``(0, None)``."""
        first = contexts[0]
        best: tuple[int, Any] = (0, None)
        for key, states in self.prompts.items():
            if best[0] < len(key) <= shared and tuple(first[: len(key)]) == key:
                best = (len(key), states)
        if best[1] is not None:
            self.prompts.move_to_end(tuple(first[: best[0]]))
        return best

    def logprobs(self, queries: Sequence[LogprobQuery], top: int = 20) -> list[LogprobAnswer]:
        """Each query's token log-probability after its context (log-softmax of the logits) and the top ``top``.

        Batches are planned as the PRMs' are (:func:`~ares_rerank.backbones.prefix.plan_batches`): the reads of one
        prompt's samples (the prompt, then each its rationale and verdict prompt) share a head, which a causal
        decoder runs once with a KV cache while only each row's own tokens run after it; so a read costs what its
        rationale costs, not its whole prompt again. Queries with the same context (a verdict's "Yes" and "No") are
        one row."""
        import torch

        out: list[LogprobAnswer | None] = [None] * len(queries)
        asked: dict[tuple[int, ...], list[int]] = {}  # a verdict reads "Yes" and "No" after one context: run it once
        for i, q in enumerate(queries):
            asked.setdefault(tuple(q.context), []).append(i)
        contexts = [list(c) for c in asked]
        readers = list(asked.values())
        causal = self.cache_argument is not None
        for batch in plan_batches(contexts, self.batch_size, shared_heads=causal):
            head = shared_prefix_length([contexts[i] for i in batch]) if causal else 0
            width = max(len(contexts[i]) for i in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long, device=self.device)
            mask = torch.zeros((len(batch), width), dtype=torch.long, device=self.device)
            for row, i in enumerate(batch):  # right padding: a causal model's real positions never see it
                ids[row, : len(contexts[i])] = torch.tensor(contexts[i])
                mask[row, : len(contexts[i])] = 1
            with torch.inference_mode():
                stored, states = self.stored_head([contexts[i] for i in batch], head) if head else (0, None)
                if states is not None:  # a prompt just sampled from: its states, the rest of the head run per row
                    head, cache = stored, join_rows([states], [len(batch)], [0], self.model.config)
                else:
                    ran = head_states(self.model, {"input_ids": ids[:1, :head], "attention_mask": mask[:1, :head]},
                                      self.cache_argument, len(batch), logits=False) if head else None
                    cache = None if ran is None else ran[1]
                if cache is None:
                    head, rest = 0, {"input_ids": ids, "attention_mask": mask}
                else:  # the suffixes on the head's cache; positions continue after it
                    rest = {"input_ids": ids[:, head:], "attention_mask": mask, self.cache_argument: cache}
                    if self.position_ids:
                        rest["position_ids"] = torch.arange(head, width, device=self.device).expand(len(batch), -1)
                at = [len(contexts[i]) - head - 1 for i in batch]  # where each row's next token is read
                column = {p: p for p in at}
                if self.keep_logits:  # the LM head at the read positions only (a few distinct ones per batch)
                    kept = sorted(set(at))
                    rest["logits_to_keep"] = torch.tensor(kept, device=self.device)
                    column = {p: k for k, p in enumerate(kept)}
                logits = output_logits(self.model(**rest))
            self.calls += 1
            for row, i in enumerate(batch):
                logp = torch.log_softmax(logits[row, column[at[row]]].float(), dim=-1)
                values, index = torch.topk(logp, min(top, logp.numel())) if top else (logp[:0], logp[:0].long())
                best = dict(zip(index.tolist(), values.tolist()))
                for q in readers[i]:
                    out[q] = LogprobAnswer(float(logp[queries[q].token]), dict(best))
        return out  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"LocalEngine({type(self.model).__name__}, seed={self.seed})"


class ServedEngine:
    """An OpenAI-compatible server (vLLM) as the verifier's engine (see the module docstring).

    Args:
        base_url: The server, e.g. ``"http://127.0.0.1:8000"``.
        tokenizer: The served model's tokenizer (object): read positions and verdict tokens are found in its ids.
        model: The served model name; ``None`` takes the first one ``/v1/models`` lists (on first use).
        batch_size: Prompts per log-probability request.
        concurrency: Requests in flight at once (log-probability requests).
        timeout, max_retries, backoff, api_key, total_timeout, max_response_bytes: See
            :class:`~ares_rerank.utils.http.JsonClient` (a rationale takes long: 600 s per attempt by default).
        extra_body: Extra request fields for every request (e.g. vLLM's ``{"min_p": 0.05}``); never ``seed``.
        max_model_len: The served window (prompt and generated tokens together); ``None``: the server's
            ``max_model_len`` from ``/v1/models`` (vLLM lists it), else the tokenizer's ``model_max_length``.
    """

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, *, batch_size: int = 64,
                 concurrency: int = 4, timeout: float = 600.0, max_retries: int = 3, backoff: float = 0.5,
                 api_key: str | None = None, total_timeout: float = 1800.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES, extra_body: dict[str, Any] | None = None,
                 max_model_len: int | None = None) -> None:
        check_positive_int(batch_size, "batch_size", 64)
        if max_model_len is not None:
            check_positive_int(max_model_len, "max_model_len", 4096)
        self.max_model_len, self._window_known = max_model_len, max_model_len is not None
        check_concurrency(concurrency, 4)
        if tokenizer is None or not callable(getattr(tokenizer, "encode", None)):
            raise ValueError("a served generative verifier needs tokenizer=: the served model's tokenizer (a folder, "
                             "a hub id or a tokenizer object), so verdict tokens and read positions are found in its "
                             "ids.")
        extra = dict(extra_body or {})
        if "seed" in extra:
            raise ValueError("extra_body={'seed': ...}: a fixed seed makes every request draw the same samples, so "
                             "verdicts would repeat across trajectories and the guarantee would not hold; drop it.")
        self.client = JsonClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff, api_key=api_key,
                                 total_timeout=total_timeout, max_response_bytes=max_response_bytes)
        self.tokenizer, self.model = tokenizer, model
        self.batch_size, self.concurrency, self.extra_body = batch_size, concurrency, extra
        self.calls = 0
        self.counting = threading.Lock()  # requests run concurrently (generate_many, reads)

    def resolve_model(self) -> None:
        """Take the first model ``/v1/models`` lists when none was given (on first use)."""
        if self.model is None:
            self.model = model_card(self.client, None, "pass model='<served name>'.")["id"]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text))

    def window(self) -> int | None:
        """The served window: ``max_model_len`` as given, else the smaller of the server's (``/v1/models``) and the
        tokenizer's; ``None`` when neither says (the server then refuses an overlong request itself)."""
        if not self._window_known:
            limit = getattr(self.tokenizer, "model_max_length", None)
            limit = int(limit) if is_int(limit) and 0 < limit < 10_000_000 else 10_000_000
            self.model, window = served_model_and_window(self.client, self.model, limit, False)
            self.max_model_len = window if window < 10_000_000 else None
            self._window_known = True
        return self.max_model_len

    def generate(self, prompt: str, n: int, sampling: Sampling) -> list[Generation]:
        """ONE ``/v1/completions`` request with ``n=``: the samples of one prompt together (prefix caching pays)."""
        self.resolve_model()
        if sampling.max_tokens == 0:
            return [Generation("", []) for _ in range(n)]
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "logprobs": 0}
        answer, choices, url = self.post_samples("/v1/completions", body, n, sampling)
        out = []
        for choice in choices:
            text = choice.get("text")
            if not isinstance(text, str):
                raise ServerResponseError(f"{url} answered a choice without text: {str(choice)[:200]}", url)
            text, _ = cut_at_stop(text, sampling.stop, sampling.include_stop)  # a server that ignores stop= too
            out.append(Generation(text, self.token_ids_of(choice, text)))
        return out

    def generate_many(self, requests: Sequence[tuple[str, int]], sampling: Sampling,
                      max_tokens: Sequence[int] | None = None) -> list[list[Generation]]:
        """:meth:`generate` for each ``(prompt, n)``, ``concurrency`` requests in flight (the server batches them);
        ``max_tokens`` gives each request its own budget in place of ``sampling.max_tokens``."""
        budgets = check_budgets(max_tokens, requests, sampling)
        self.resolve_model()
        asks = [(prompt, n, replace(sampling, max_tokens=b)) for (prompt, n), b in zip(requests, budgets)]
        return map_bounded(lambda ask: self.generate(*ask), asks, self.concurrency)

    def post_samples(self, path: str, body: dict[str, Any], n: int,
                     sampling: Sampling) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """POST ``body`` plus the ``n`` samples' settings to ``path``; the answer, its ``n`` choices in index order
        and the URL (a server answering another number of choices is refused, naming the endpoint)."""
        body = {**body, "n": n, "max_tokens": sampling.max_tokens, "temperature": sampling.temperature,
                "top_p": sampling.top_p, "return_tokens_as_token_ids": True}
        if sampling.stop:
            body.update(stop=list(sampling.stop), include_stop_str_in_output=sampling.include_stop)
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if sampling.repetition_penalty != 1.0:
            body["repetition_penalty"] = sampling.repetition_penalty
        body.update(self.extra_body)
        answer = self.client.post(path, body)
        with self.counting:
            self.calls += 1
        url = self.client.root + path
        choices = answer_choices(answer, n, url, f"n={n}", f"is this an OpenAI-compatible {path} (vLLM)?")
        return answer, choices, url

    def token_ids_of(self, choice: dict[str, Any], text: str) -> list[int]:
        """The generated ids: vLLM's ``"token_id:<id>"`` tokens (``return_tokens_as_token_ids``), else the text's."""
        logprobs = choice.get("logprobs")
        tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
        if isinstance(tokens, list) and tokens and all(isinstance(t, str) and t.startswith("token_id:")
                                                        for t in tokens):
            try:
                return [int(t[len("token_id:"):]) for t in tokens]
            except ValueError:
                pass
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def logprobs(self, queries: Sequence[LogprobQuery], top: int = 20) -> list[LogprobAnswer]:
        """``prompt_logprobs=top`` on prompts of token ids (context + token), ``batch_size`` prompts a request."""
        self.resolve_model()
        prompts = [list(q.context) + [q.token] for q in queries]
        batches = [list(range(s, min(s + self.batch_size, len(prompts)))) for s in range(0, len(prompts),
                                                                                          self.batch_size)]
        answers = map_bounded(lambda idx: self._logprob_request([prompts[i] for i in idx], top), batches,
                              self.concurrency)
        self.calls += len(batches)
        return [a for batch in answers for a in batch]

    def _logprob_request(self, prompts: list[list[int]], top: int) -> list[LogprobAnswer]:
        body = {"model": self.model, "prompt": prompts, "max_tokens": 1, "temperature": 0.0,
                "prompt_logprobs": top, **{k: v for k, v in self.extra_body.items() if k != "n"}}
        answer = self.client.post("/v1/completions", body)
        url = self.client.root + "/v1/completions"
        choices = answer_choices(answer, len(prompts), url, f"{len(prompts)} prompts",
                                 "is this vLLM's /v1/completions?")
        return [self.last_prompt_logprob(choice, prompt, top, url) for choice, prompt in zip(choices, prompts)]

    def last_prompt_logprob(self, holder: dict[str, Any], prompt: list[int], top: int, url: str) -> LogprobAnswer:
        """The prompt's last token's log-probability and the top ``top`` there, from ``holder["prompt_logprobs"]``
        (vLLM's: one entry per prompt token, keyed by token id; a completions choice or a chat answer)."""
        rows = holder.get("prompt_logprobs")
        last = rows[-1] if isinstance(rows, list) and len(rows) == len(prompt) else None
        table: dict[int, float] = {}
        for key, entry in (last.items() if isinstance(last, dict) else []):
            value = finite_number(entry.get("logprob")) if isinstance(entry, dict) else None
            if value is None or value > 1e-6 or not str(key).lstrip("-").isdigit():
                raise ServerResponseError(f"{url} returned the prompt log-probability entry {str(key)[:30]!r}: "
                                          f"{str(entry)[:100]}, not a finite number <= 0 keyed by token id.", url)
            table[int(key)] = min(value, 0.0)
        if prompt[-1] not in table:
            raise ServerResponseError(
                f"{url} returned no prompt log-probability of token {prompt[-1]} at the last of {len(prompt)} "
                f"positions ({str(holder)[:200]}): serve the model with vLLM >= 0.5.5, which answers "
                "\"prompt_logprobs\" with one entry per prompt token.", url)
        own = table[prompt[-1]]
        ranked = sorted(table.items(), key=lambda kv: -kv[1])[:top]
        return LogprobAnswer(own, dict(ranked))

    def __repr__(self) -> str:
        return f"ServedEngine({self.client.root!r}, model={self.model!r})"


_SENTINEL = "ARES_CHAT_CONTINUATION_7f3a9c"  # marks where a continued message's content starts in a rendering
_REMEMBERED = 4096  # rendered prompts kept (the verifier renders each input's prompt right before it is used)


class ChatEngine(ServedEngine):
    """A served generative verifier over ``/v1/chat/completions`` (``api="chat"``; see the module docstring).

    Takes :class:`~ares_rerank.backbones.generative.ServedEngine`'s arguments; ``batch_size`` is unused (one read a
    request), ``concurrency`` bounds the reads in flight.
    """

    api = "chat"

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, tokenizer, model, **kwargs)
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("api='chat' needs the served model's chat template in tokenizer= (this tokenizer has "
                             "none), to send each prompt as the messages it was rendered from: use "
                             "api='completions', or a tokenizer with its chat template.")
        self._chats: OrderedDict[str, list[dict[str, str]]] = OrderedDict()
        self._lead = list(tokenizer.encode(""))  # what encode adds before any text (a BOS): sent as add_special_tokens

    def remember_chat(self, text: str, messages: Sequence[dict[str, str]]) -> None:
        """Record that ``text`` is the rendering of ``messages`` (the verifier calls it as it renders a prompt)."""
        self._chats[text] = [dict(m) for m in messages]
        self._chats.move_to_end(text)
        while len(self._chats) > _REMEMBERED:
            self._chats.popitem(last=False)

    def _render(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False,
                                                  continue_final_message=True)

    def messages_for(self, text: str) -> tuple[list[dict[str, str]], bool]:
        """``(messages, generation prompt)``: the messages whose rendering is exactly ``text``, with the generation
        prompt added (``text`` is a remembered prompt as rendered) or else their final one continued (module
        docstring).

        Raises:
            ValueError: No remembered prompt starts ``text``, or none of the layouts renders back to it.
        """
        base = next((self._chats[key] for key in reversed(self._chats) if text.startswith(key)), None)
        if base is None:
            raise ValueError(f"api='chat': the prompt {text[:80]!r}... was not rendered from chat messages (a "
                             "prompt written as text, e.g. use_chat_template=False or R-PRM's literal ChatML), so a "
                             "chat endpoint cannot be sent it exactly: use api='completions'.")
        if text in self._chats and self.tokenizer.apply_chat_template(
                base, tokenize=False, add_generation_prompt=True) == text:
            return [dict(m) for m in base], True  # the generation prompt itself, nothing written after it
        layouts = [base[:-1] + [{"role": base[-1]["role"], "content": _SENTINEL}],
                   base + [{"role": "assistant", "content": _SENTINEL}]]
        for layout in layouts:
            try:
                head = self._render(layout)
            except Exception:  # noqa: BLE001 - a template that cannot continue this layout: try the next one
                continue
            head = head[: head.rfind(_SENTINEL)] if _SENTINEL in head else None
            if head is None or not text.startswith(head) or len(text) == len(head):
                continue
            messages = layout[:-1] + [{"role": layout[-1]["role"], "content": text[len(head):]}]
            try:
                if self._render(messages) == text:
                    return messages, False
            except Exception:  # noqa: BLE001 - as above
                continue
        raise ValueError(f"api='chat': no messages render, their final one continued, to exactly the prompt "
                         f"{text[-80:]!r} (the end shown) with this tokenizer's chat template (a template that "
                         "trims or rewrites the final message, e.g. a trailing space), so a chat endpoint would read "
                         "another input: use api='completions'.")

    def _chat_body(self, text: str) -> dict[str, Any]:
        ids = self.encode(text)
        if ids[: len(self._lead)] != self._lead:
            raise ValueError(f"api='chat': the tokenizer's ids of the prompt do not start with {self._lead} (what "
                             "it adds to any text), so add_special_tokens cannot reproduce them: use "
                             "api='completions'.")
        messages, generation_prompt = self.messages_for(text)
        return {"model": self.model, "messages": messages, "add_generation_prompt": generation_prompt,
                "continue_final_message": not generation_prompt, "add_special_tokens": bool(self._lead),
                "return_token_ids": True}

    def _check_prompt_ids(self, answer: dict[str, Any], expected: list[int], url: str) -> None:
        got = answer.get("prompt_token_ids")
        if not isinstance(got, list):
            raise ServerResponseError(f"{url} answered without prompt_token_ids ({str(answer)[:200]}): api='chat' "
                                      "needs a vLLM that answers return_token_ids, to check the server rendered the "
                                      "chat as the tokenizer does; use api='completions' otherwise.", url)
        if got != expected:
            at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
            raise ServerResponseError(
                f"{url} read the prompt as {len(got)} tokens, the tokenizer as {len(expected)} (first difference at "
                f"position {at}): the server's chat template differs from tokenizer='s, so it would score another "
                "input. Serve the model with this tokenizer's template (vLLM --chat-template), pass the served "
                "model's tokenizer, or use api='completions'.", url)

    def generate(self, prompt: str, n: int, sampling: Sampling) -> list[Generation]:
        """ONE ``/v1/chat/completions`` request with ``n=`` (module docstring)."""
        self.resolve_model()
        if sampling.max_tokens == 0:
            return [Generation("", []) for _ in range(n)]
        body = {**self._chat_body(prompt), "logprobs": True, "top_logprobs": 0}
        answer, choices, url = self.post_samples("/v1/chat/completions", body, n, sampling)
        self._check_prompt_ids(answer, self.encode(prompt), url)
        out = []
        for choice in choices:
            message = choice.get("message")
            text = message.get("content") if isinstance(message, dict) else None
            if not isinstance(text, str):
                raise ServerResponseError(f"{url} answered a choice without message.content: {str(choice)[:200]}",
                                          url)
            text, _ = cut_at_stop(text, sampling.stop, sampling.include_stop)
            out.append(Generation(text, self._generated_ids(choice, text)))
        return out

    def _generated_ids(self, choice: dict[str, Any], text: str) -> list[int]:
        """``token_ids`` (``return_token_ids``), else ``"token_id:<id>"`` tokens of ``logprobs.content``, else the
        text's ids."""
        ids = choice.get("token_ids")
        if isinstance(ids, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            return list(ids)
        content = choice.get("logprobs", {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
        if isinstance(content, list):
            tokens = [c.get("token") if isinstance(c, dict) else None for c in content]
            return self.token_ids_of({"logprobs": {"tokens": tokens}}, text)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def logprobs(self, queries: Sequence[LogprobQuery], top: int = 20) -> list[LogprobAnswer]:
        """One ``max_tokens=1`` request with ``prompt_logprobs=top`` per query, ``concurrency`` in flight."""
        self.resolve_model()
        answers = map_bounded(lambda q: self._read(list(q.context) + [q.token], top), list(queries),
                              self.concurrency)
        self.calls += len(queries)
        return answers

    def _read(self, ids: list[int], top: int) -> LogprobAnswer:
        text = self.tokenizer.decode(ids[len(self._lead):] if ids[: len(self._lead)] == self._lead else ids,
                                     skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if self.encode(text) != ids:
            raise ValueError(f"api='chat': a verdict read's token ids do not come back from their text "
                             f"({text[-60:]!r}, the end shown), and a chat endpoint takes text: use "
                             "api='completions', which reads token-id prompts.")
        body = self._chat_body(text)
        body.update(max_tokens=1, temperature=0.0, prompt_logprobs=top,
                    **{k: v for k, v in self.extra_body.items() if k != "n"})
        answer = self.client.post("/v1/chat/completions", body)
        url = self.client.root + "/v1/chat/completions"
        if not isinstance(answer, dict):
            raise ServerResponseError(f"{url} answered {str(answer)[:200]}, not a chat completion.", url)
        self._check_prompt_ids(answer, ids, url)
        if not isinstance(answer.get("prompt_logprobs"), list):
            raise ServerResponseError(f"{url} answered without prompt_logprobs ({str(answer)[:200]}): a verdict is "
                                      "read from the prompt's log-probabilities, which vLLM's chat endpoint returns "
                                      "with prompt_logprobs=; use a vLLM server, or api='completions'.", url)
        return self.last_prompt_logprob(answer, ids, top, url)

    def __repr__(self) -> str:
        return f"ChatEngine({self.client.root!r}, model={self.model!r})"


def load_engine(name_or_path: str | Path, *, tokenizer: Any = None, model: str | None = None, seed: int = 0,
                device: Any = "auto", dtype: Any = "auto", trust_remote_code: bool = False,
                engine_kwargs: dict[str, Any] | None = None, api: str = "completions",
                max_model_len: int | None = None, **hub: Any) -> Any:
    """The engine a verifier's ``from_pretrained`` runs on: for an ``http(s)://`` URL (its ``tokenizer=`` a folder,
    hub id or object, required) a :class:`ServedEngine` (``api="completions"``: ``/v1/completions``) or a
    :class:`ChatEngine` (``api="chat"``: ``/v1/chat/completions``), else a
    :class:`LocalEngine` on the causal LM loaded from the folder or hub id (``device``, ``dtype``,
    ``trust_remote_code`` and hub options as every backbone takes); ``max_model_len`` is the engine's window
    (prompt and generated tokens together; ``None``: the model's or the server's)."""
    name = str(name_or_path)
    engine_kwargs = dict(engine_kwargs or {})
    if max_model_len is not None:
        engine_kwargs["max_model_len"] = max_model_len
    if api not in ENGINE_APIS:
        raise ValueError(f"api={api!r} is unknown: use 'completions' (/v1/completions, the default) or 'chat' "
                         "(/v1/chat/completions).")
    if api != "completions" and not name.startswith(("http://", "https://")):
        raise ValueError(f"api={api!r} is for a server URL; {name!r} is loaded locally: drop api=.")
    if name.startswith(("http://", "https://")):
        if hub:
            raise TypeError(f"a served verifier takes no {sorted(hub)} (they are for loading a local model).")
        if tokenizer is None:
            raise ValueError(f"{name!r} is a server: pass tokenizer= (the served model's folder, hub id or tokenizer "
                             "object), so verdict tokens and read positions are found in its ids.")
        if isinstance(tokenizer, (str, Path)):
            from transformers import AutoTokenizer

            from .hub import check_model_files

            check_model_files(tokenizer)
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer), trust_remote_code=trust_remote_code)
        if api == "chat":
            return ChatEngine(name, tokenizer, model, **engine_kwargs)
        return ServedEngine(name, tokenizer, model, **engine_kwargs)
    from .hub import load_model_and_tokenizer

    loaded, loaded_tokenizer, _ = load_model_and_tokenizer(name_or_path, "AutoModelForCausalLM", device=device,
                                                           dtype=dtype, trust_remote_code=trust_remote_code,
                                                           calibrated=False, **hub)
    return LocalEngine(loaded, tokenizer or loaded_tokenizer, seed=seed, **engine_kwargs)

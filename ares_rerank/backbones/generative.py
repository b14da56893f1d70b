"""Generative verifiers as ARES backbones: for a (premises, step) input, sample a rationale, then read the verdict's
``P(Yes | rationale)`` from log-probabilities (``kind="generative"``, and the published families in
:mod:`~ares_rerank.backbones.verifiers`: GenPRM, ThinkPRM, R-PRM).

**A verdict is a random variable.** ``P(Yes | rationale)`` is bounded in [0, 1] and its mean over sampled rationales
is the input's entailment probability. So a verifier is a *sampled* backbone (``sampled = True``,
:class:`~ares_rerank.backbones.base.SampledBackbone`): ``sample_probs(premises, hypotheses, n)`` draws ``n[i]``
fresh verdicts for pair ``i`` (its ``n[i]`` samples asked together: ``n=`` in one request to a server, where prefix
caching pays), nothing is cached, and ARES gives every trajectory its own verdict in sample mode (exact and auto
modes refuse: :func:`~ares_rerank.estimator.batch.check_sampled_mode`). ``entailment_probs`` (for baselines) is the
mean of ``num_samples`` fresh verdicts, as the families' own code averages them: not a fixed function.

**What ARES's masks mean here.** The included base claims are the question (joined by ``question_separator``), the
included earlier steps are the previous steps, the judged step is the last: the verifier's input for the chain made
of the subset, as the discriminative PRM families read it (:mod:`~ares_rerank.backbones.prms.base`).

**Where the model runs** (an *engine*, the one interface the verifiers use; :class:`LocalEngine`,
:class:`ServedEngine`):

- ``generate(prompt, n, sampling)``: ``n`` sampled continuations of a prompt text (the engine tokenizes it with
  special tokens, as vLLM's ``/v1/completions`` and sglang do), cut at the first stop string as vLLM cuts
  (``include_stop_str_in_output`` kept or not); locally ``model.generate`` with the sampling given (top-k 0 and
  top-p 1 mean off), seeded per call from ``seed``; served, ONE ``/v1/completions`` request with ``n=`` (no
  ``seed`` is ever sent: a fixed seed would repeat the same samples on every call);
- ``logprobs(queries, top)``: for token-id contexts and one next token each, that token's log-probability and the
  top-``top`` ones at that position (raw log-softmax of the logits, as vLLM V1 returns them); locally one forward
  pass per batch; served, vLLM's ``prompt_logprobs`` on prompts of token ids (the context plus the token), as
  :mod:`~ares_rerank.backbones.vllm_completions` reads them.

**Cost** (:class:`~ares_rerank.backbones.base.SampledVerdicts`, then the chain's certificate): generated tokens per
pair (every stage of every sample), and requests (served) or model calls (local) per pair; the one call that reads
the verdicts of a whole batch of pairs is counted on its first pair.

**Your own verifier** (:class:`GenerativeVerifier`, ``kind="generative"``): a prompt template with ``{question}``,
``{previous_steps}`` and ``{step}`` (or a function), an optional chat template, the sampling, stop strings, and a
verdict parser: a function from the rationale to the text placed after the prompt before the answer token is read
(default: the rationale followed by ``verdict_prompt``), the answer read as ``P(yes) / (P(yes) + P(no))`` of the two
answer tokens.

One module past 500 lines, because the two engines and the verifier base are one interface: every family (and every
test's recording engine) talks to ``generate`` / ``logprobs`` / ``encode`` only, so the local and the served paths
cannot drift apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..utils.checks import check_positive_int, is_finite_number, is_int
from .base import SampledVerdicts, check_pairs, check_sample_counts
from .served import (
    DEFAULT_MAX_RESPONSE_BYTES,
    JsonClient,
    ServerResponseError,
    check_concurrency,
    finite_number,
    map_bounded,
    model_card,
)


__all__ = [
    "DEFAULT_PROMPT",
    "Generation",
    "GenerativeVerifier",
    "LocalEngine",
    "LogprobAnswer",
    "LogprobQuery",
    "PendingVerdict",
    "Sampling",
    "ServedEngine",
    "Verdict",
    "cut_at_stop",
    "load_engine",
    "softmax_pair",
]

DEFAULT_PROMPT = (
    "Question:\n{question}\n\nPrevious steps:\n{previous_steps}\n\nStep to verify:\n{step}\n\n"
    "Is the step to verify correct, given the question and the previous steps? Think it through, then answer."
)
NO_PREVIOUS_STEPS = "(none)"


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


@dataclass
class Generation:
    """One sampled continuation: its text (cut at the stop string) and the token ids the model generated."""

    text: str
    token_ids: list[int]


@dataclass
class Verdict:
    """One sampled verdict of a verifier (:meth:`GenerativeVerifier.verify`).

    Attributes:
        prompt: The prompt text the rationale was sampled from (its first stage's).
        rationale: The generated text the verdict was read after (every stage, as the family joins them).
        verdict_text: What the family parsed as its verdict (e.g. ``"Yes"``), ``""`` when it found none.
        prob: ``P(Yes | rationale)``, in [0, 1].
        generated_tokens: Tokens generated for this sample (all stages).
        requests: Generation requests (served) or calls (local) this sample took.
    """

    prompt: str
    rationale: str
    verdict_text: str
    prob: float
    generated_tokens: int = 0
    requests: int = 0


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
    """

    def __init__(self, model: Any, tokenizer: Any, *, seed: int = 0, batch_size: int = 8) -> None:
        if not is_int(seed) or seed < 0:
            raise ValueError(f"seed={seed!r} must be a whole number >= 0.")
        check_positive_int(batch_size, "batch_size", 8)
        self.model, self.tokenizer = model, tokenizer
        self.seed, self.calls, self.draws, self.batch_size = int(seed), 0, 0, batch_size
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_id = int(pad) if pad is not None else 0

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def encode(self, text: str) -> list[int]:
        """The ids an engine reads for a prompt text: the tokenizer's, special tokens included (vLLM, sglang)."""
        return list(self.tokenizer.encode(text))

    def generate(self, prompt: str, n: int, sampling: Sampling) -> list[Generation]:
        """``n`` sampled continuations of ``prompt`` in one ``generate`` call (the prompt's states shared)."""
        import torch

        ids = self.encode(prompt)
        if sampling.max_tokens == 0:
            return [Generation("", []) for _ in range(n)]
        kwargs: dict[str, Any] = {"max_new_tokens": sampling.max_tokens, "num_return_sequences": n,
                                  "pad_token_id": self.pad_id, "repetition_penalty": sampling.repetition_penalty}
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
        else:
            kwargs.update(do_sample=False, num_beams=1)
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        eos = self.model.generation_config.eos_token_id if getattr(self.model, "generation_config", None) else None
        eos = {eos} if isinstance(eos, int) else set(eos or []) | ({self.tokenizer.eos_token_id} - {None})
        tensor = torch.tensor([ids], device=self.device)
        self.calls += 1
        self.draws += 1
        with torch.random.fork_rng(devices=[] if tensor.device.type == "cpu" else [tensor.device]):
            torch.manual_seed(hash((self.seed, self.draws)) % 2**63)
            with torch.inference_mode():
                out = self.model.generate(input_ids=tensor, attention_mask=torch.ones_like(tensor), **kwargs)
        generations = []
        for row in out[:, len(ids):].tolist():
            end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))  # the eos ends it (kept, as vLLM)
            row = row[:end]
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            text, _ = cut_at_stop(text, sampling.stop, sampling.include_stop)
            generations.append(Generation(text, row))
        return generations

    def logprobs(self, queries: Sequence[LogprobQuery], top: int = 20) -> list[LogprobAnswer]:
        """Each query's token log-probability after its context (log-softmax of the logits) and the top ``top``."""
        import torch

        out: list[LogprobAnswer | None] = [None] * len(queries)
        order = sorted(range(len(queries)), key=lambda i: len(queries[i].context))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(queries[i].context) for i in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):  # right padding: a causal model's real positions never see it
                context = queries[i].context
                ids[row, : len(context)] = torch.tensor(context)
                mask[row, : len(context)] = 1
            with torch.inference_mode():
                logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            self.calls += 1
            for row, i in enumerate(batch):
                logp = torch.log_softmax(logits[row, len(queries[i].context) - 1].float(), dim=-1)
                values, index = torch.topk(logp, min(top, logp.numel())) if top else (logp[:0], logp[:0].long())
                out[i] = LogprobAnswer(float(logp[queries[i].token]), dict(zip(index.tolist(), values.tolist())))
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
    """

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, *, batch_size: int = 64,
                 concurrency: int = 4, timeout: float = 600.0, max_retries: int = 3, backoff: float = 0.5,
                 api_key: str | None = None, total_timeout: float = 1800.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES, extra_body: dict[str, Any] | None = None,
                 ) -> None:
        check_positive_int(batch_size, "batch_size", 64)
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

    def _resolve(self) -> None:
        if self.model is None:
            self.model = model_card(self.client, None, "pass model='<served name>'.")["id"]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text))

    def generate(self, prompt: str, n: int, sampling: Sampling) -> list[Generation]:
        """ONE ``/v1/completions`` request with ``n=``: the samples of one prompt together (prefix caching pays)."""
        self._resolve()
        if sampling.max_tokens == 0:
            return [Generation("", []) for _ in range(n)]
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "n": n, "max_tokens": sampling.max_tokens,
                                "temperature": sampling.temperature, "top_p": sampling.top_p,
                                "logprobs": 0, "return_tokens_as_token_ids": True}
        if sampling.stop:
            body.update(stop=list(sampling.stop), include_stop_str_in_output=sampling.include_stop)
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if sampling.repetition_penalty != 1.0:
            body["repetition_penalty"] = sampling.repetition_penalty
        body.update(self.extra_body)
        answer = self.client.post("/v1/completions", body)
        self.calls += 1
        url = self.client.root + "/v1/completions"
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or len(choices) != n or not all(isinstance(c, dict) for c in choices):
            got = len(choices) if isinstance(choices, list) else "no"
            raise ServerResponseError(f"{url} answered {got} choices for n={n} ({str(answer)[:200]}): is this an "
                                      "OpenAI-compatible /v1/completions (vLLM)?", url)
        if all(isinstance(c.get("index"), int) for c in choices):
            choices = sorted(choices, key=lambda c: c["index"])
        out = []
        for choice in choices:
            text = choice.get("text")
            if not isinstance(text, str):
                raise ServerResponseError(f"{url} answered a choice without text: {str(choice)[:200]}", url)
            text, _ = cut_at_stop(text, sampling.stop, sampling.include_stop)  # a server that ignores stop= too
            out.append(Generation(text, self._token_ids(choice, text)))
        return out

    def _token_ids(self, choice: dict[str, Any], text: str) -> list[int]:
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
        self._resolve()
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
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or len(choices) != len(prompts):
            got = len(choices) if isinstance(choices, list) else "no"
            raise ServerResponseError(f"{url} answered {got} choices for {len(prompts)} prompts "
                                      f"({str(answer)[:200]}): is this vLLM's /v1/completions?", url)
        if all(isinstance(c, dict) and isinstance(c.get("index"), int) for c in choices):
            choices = sorted(choices, key=lambda c: c["index"])
        out = []
        for choice, prompt in zip(choices, prompts):
            rows = choice.get("prompt_logprobs") if isinstance(choice, dict) else None
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
                    f"positions ({str(choice)[:200]}): serve the model with vLLM >= 0.5.5, which answers "
                    "\"prompt_logprobs\" with one entry per prompt token.", url)
            own = table[prompt[-1]]
            ranked = sorted(table.items(), key=lambda kv: -kv[1])[:top]
            out.append(LogprobAnswer(own, dict(ranked)))
        return out

    def __repr__(self) -> str:
        return f"ServedEngine({self.client.root!r}, model={self.model!r})"


def load_engine(name_or_path: str | Path, *, tokenizer: Any = None, model: str | None = None, seed: int = 0,
                device: Any = "auto", dtype: Any = "auto", trust_remote_code: bool = False,
                engine_kwargs: dict[str, Any] | None = None, **hub: Any) -> Any:
    """The engine a verifier's ``from_pretrained`` runs on: a :class:`ServedEngine` for an ``http(s)://`` URL (its
    ``tokenizer=`` a folder, hub id or object, required), else a :class:`LocalEngine` on the causal LM loaded from
    the folder or hub id (``device``, ``dtype``, ``trust_remote_code`` and hub options as every backbone takes)."""
    name = str(name_or_path)
    engine_kwargs = dict(engine_kwargs or {})
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
        return ServedEngine(name, tokenizer, model, **engine_kwargs)
    from .hub import load_model_and_tokenizer

    loaded, loaded_tokenizer, _ = load_model_and_tokenizer(name_or_path, "AutoModelForCausalLM", device=device,
                                                           dtype=dtype, trust_remote_code=trust_remote_code,
                                                           calibrated=False, **hub)
    return LocalEngine(loaded, tokenizer or loaded_tokenizer, seed=seed, **engine_kwargs)


# -- the verifier -----------------------------------------------------------------------------------------------------
@dataclass
class PendingVerdict:
    """A rationale being judged: what the family generated, and how its verdict is read."""

    prompt: str
    rationale: str = ""
    verdict_text: str = ""
    tokens: int = 0
    requests: int = 0
    queries: list[LogprobQuery] = field(default_factory=list)
    read: Callable[[list[LogprobAnswer]], float] | None = None  # None: the family found no verdict (its value below)
    fixed: float = 0.5


class GenerativeVerifier:
    """A generative verifier as a sampled ARES backbone (``kind="generative"``; see the module docstring).

    Args:
        engine: Where the model runs (:class:`LocalEngine`, :class:`ServedEngine`).
        prompt: A template with ``{question}``, ``{previous_steps}`` and ``{step}``, or a function
            ``(question, previous_steps: list[str], step) -> str`` (default :data:`DEFAULT_PROMPT`).
        system_prompt: A system turn (with ``use_chat_template``).
        use_chat_template: Wrap the prompt as a user turn in the tokenizer's chat template, generation prompt added
            (default: when the tokenizer has one).
        sampling: The rationale's :class:`Sampling` (default temperature 0.7, 1,024 tokens).
        verdict_prompt: Placed after the rationale before the answer is read (default ``"\\nVerdict (Yes or
            No):"``).
        verdict_parser: ``rationale -> text`` placed after the prompt before the answer token is read (overrides
            ``verdict_prompt``; e.g. cut the rationale at your own marker).
        answers: The ``(yes, no)`` answer strings, each one token (default ``(" Yes", " No")``).
        previous_separator: Joins the previous steps into ``{previous_steps}`` (default a newline).
        question_separator: Joins the included base claims into the question.
        num_samples: Samples ``entailment_probs`` averages (baselines; ARES asks its own counts).
    """

    sampled = True
    kind = "generative"
    #: Hub ids of the family's published models (``load_backbone`` picks the family from them, any case).
    hub_ids: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    #: How many top log-probabilities a verdict read needs besides its own token's (GenPRM's rule reads 20).
    verdict_top = 0

    def __init__(
        self,
        engine: Any,
        *,
        prompt: str | Callable[[str, list[str], str], str] = DEFAULT_PROMPT,
        system_prompt: str | None = None,
        use_chat_template: bool | None = None,
        sampling: Sampling | None = None,
        verdict_prompt: str = "\nVerdict (Yes or No):",
        verdict_parser: Callable[[str], str] | None = None,
        answers: tuple[str, str] = (" Yes", " No"),
        previous_separator: str = "\n",
        question_separator: str = "\n",
        num_samples: int = 10,
    ) -> None:
        self._init_common(engine, question_separator, num_samples)
        if not (callable(prompt) or isinstance(prompt, str)):
            raise TypeError(f"prompt={prompt!r:.60} must be a template string or a function (question, "
                            "previous_steps, step) -> str.")
        if isinstance(prompt, str):
            missing = [k for k in ("{question}", "{step}") if k not in prompt]
            if missing:
                raise ValueError(f"prompt= lacks {missing}: a template needs {{question}} and {{step}} (and may "
                                 "use {previous_steps}).")
        if verdict_parser is not None and not callable(verdict_parser):
            raise TypeError("verdict_parser= must be a function rationale -> the text read after the prompt.")
        self.prompt, self.system_prompt = prompt, system_prompt
        has_template = getattr(self.tokenizer, "chat_template", None) is not None
        self.chat = has_template if use_chat_template is None else bool(use_chat_template)
        if self.chat and not has_template:
            raise ValueError("use_chat_template=True, but the tokenizer has no chat template: pass False.")
        self.sampling = sampling or Sampling(max_tokens=1024)
        self.verdict_prompt, self.verdict_parser = verdict_prompt, verdict_parser
        self.previous_separator = previous_separator
        self.answer_ids = self.single_tokens(answers, "answers")

    def _init_common(self, engine: Any, question_separator: str, num_samples: int) -> None:
        if not callable(getattr(engine, "generate", None)) or not callable(getattr(engine, "logprobs", None)):
            raise TypeError(f"engine={engine!r:.60} must be a LocalEngine or ServedEngine (generate and logprobs).")
        if not isinstance(question_separator, str):
            raise TypeError(f"question_separator={question_separator!r} must be a string, e.g. '\\n'.")
        check_positive_int(num_samples, "num_samples", 10)
        self.engine, self.tokenizer = engine, engine.tokenizer
        self.question_separator, self.num_samples = question_separator, num_samples

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, *, tokenizer: Any = None, model: str | None = None,
                        seed: int = 0, device: Any = "auto", dtype: Any = "auto", trust_remote_code: bool = False,
                        engine_kwargs: dict[str, Any] | None = None, revision: str | None = None,
                        token: str | bool | None = None, cache_dir: str | Path | None = None,
                        local_files_only: bool = False, **kwargs: Any) -> GenerativeVerifier:
        """``load_backbone(name_or_path, kind=...)``: a local causal LM (folder or hub id), or a server URL with
        ``tokenizer=`` (:func:`load_engine`); ``kwargs`` go to the constructor."""
        hub = {k: v for k, v in (("revision", revision), ("token", token), ("cache_dir", cache_dir)) if v is not None}
        if local_files_only:
            hub["local_files_only"] = True
        engine = load_engine(name_or_path, tokenizer=tokenizer, model=model, seed=seed, device=device, dtype=dtype,
                             trust_remote_code=trust_remote_code, engine_kwargs=engine_kwargs, **hub)
        verifier = cls(engine, **kwargs)
        verifier.source = str(name_or_path)
        return verifier

    # -- helpers the families share -------------------------------------------------------------------------------
    def single_tokens(self, answers: Sequence[str], name: str) -> list[int]:
        """Each answer string's one token id (without special tokens), or a ValueError naming ``name``."""
        if isinstance(answers, str) or len(answers) != 2 or not all(isinstance(a, str) and a for a in answers):
            raise ValueError(f"{name}={answers!r} must be two non-empty strings (yes, no).")
        ids = []
        for text in answers:
            encoded = self.tokenizer.encode(text, add_special_tokens=False)
            if len(encoded) != 1:
                raise ValueError(f"{name}={answers!r}: {text!r} is {len(encoded)} tokens for this tokenizer; the "
                                 "verdict is read from one next-token distribution, so pass answers that are one "
                                 "token each.")
            ids.append(int(encoded[0]))
        if ids[0] == ids[1]:
            raise ValueError(f"{name}={answers!r} tokenize identically: pass distinguishable answers.")
        return ids

    def split(self, premises: Sequence[str], hypothesis: str, num_base: int | None) -> tuple[list[str], list[str]]:
        """``(base claims, steps)`` of one pair: the first ``num_base`` premises are base claims (all of them without
        ``num_base``), the rest earlier steps, and the judged step last."""
        premises = list(premises)
        k = len(premises) if num_base is None else int(num_base)
        return premises[:k], premises[k:] + [hypothesis]

    def question(self, base_claims: Sequence[str]) -> str:
        return self.question_separator.join(base_claims)

    def chat_prompt(self, user_text: str) -> str:
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": user_text})
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def next_token_read(self, sample: PendingVerdict, text: str, yes: int, no: int) -> None:
        """Read ``P(yes) / (P(yes) + P(no))`` after the prompt text ``text`` (tokenized as the engine tokenizes)."""
        context = self.engine.encode(text)
        sample.queries = [LogprobQuery(context, yes), LogprobQuery(context, no)]
        sample.read = lambda answers: softmax_pair(answers[0].logprob, answers[1].logprob)

    # -- what a family implements ---------------------------------------------------------------------------------
    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        """The prompt text the rationale is sampled from (the last step is the judged one)."""
        question, previous, step = self.question(base_claims), list(steps[:-1]), steps[-1]
        if callable(self.prompt):
            text = self.prompt(question, previous, step)
            if not isinstance(text, str):
                raise TypeError(f"prompt function returned {type(text).__name__}: return the prompt text.")
        else:
            joined = self.previous_separator.join(previous) if previous else NO_PREVIOUS_STEPS
            text = self.prompt.format(question=question, previous_steps=joined, step=step)
        return self.chat_prompt(text) if self.chat else text

    def sample(self, base_claims: Sequence[str], steps: Sequence[str], n: int) -> list[PendingVerdict]:
        """``n`` rationales for one input, each with how its verdict is read (one generation stage here)."""
        prompt = self.render(base_claims, steps)
        samples = []
        for gen in self.engine.generate(prompt, n, self.sampling):
            sample = PendingVerdict(prompt, gen.text, tokens=len(gen.token_ids))
            after = self.verdict_parser(gen.text) if self.verdict_parser else gen.text + self.verdict_prompt
            if not isinstance(after, str):
                raise TypeError(f"verdict_parser returned {type(after).__name__}: return the text read after the "
                                "prompt.")
            self.next_token_read(sample, prompt + after, *self.answer_ids)
            samples.append(sample)
        if samples:
            samples[0].requests = 1
        return samples

    # -- the sampled-backbone protocol ------------------------------------------------------------------------------
    def verify(self, base_claims: Sequence[str], steps: Sequence[str], n: int = 1) -> list[Verdict]:
        """``n`` fresh verdicts on the last of ``steps`` (the others are its previous steps), with their texts."""
        check_positive_int(n, "n", 10)
        return self._verdicts([(list(base_claims), list(steps))], [n])[0]

    def sample_verdicts(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str], n: Sequence[int] | int,
                        num_base: Sequence[int] | None = None) -> SampledVerdicts:
        """``n[i]`` fresh verdict probabilities for pair ``i``, with what they cost (see the module docstring)."""
        premises, hypotheses = check_pairs(premises, hypotheses, f"{type(self).__name__}.sample_verdicts")
        counts = check_sample_counts(n, len(hypotheses), f"{type(self).__name__}.sample_verdicts")
        if num_base is not None and len(num_base) != len(hypotheses):
            raise ValueError(f"num_base has {len(num_base)} entries for {len(hypotheses)} pairs: pass one per pair.")
        inputs = [self.split(p, h, None if num_base is None else num_base[i])
                  for i, (p, h) in enumerate(zip(premises, hypotheses))]
        verdicts = self._verdicts(inputs, counts)
        return SampledVerdicts([np.array([v.prob for v in vs]) for vs in verdicts],
                               [sum(v.generated_tokens for v in vs) for vs in verdicts],
                               [sum(v.requests for v in vs) for vs in verdicts])

    def sample_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str], n: Sequence[int] | int,
                     num_base: Sequence[int] | None = None) -> list[np.ndarray]:
        """``n[i]`` fresh verdict probabilities for pair ``i`` (never cached: every call samples anew)."""
        return self.sample_verdicts(premises, hypotheses, n, num_base).probs

    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str],
                         num_base: Sequence[int] | None = None) -> list[float]:
        """The mean of ``num_samples`` fresh verdicts per pair (as the families average theirs); NOT a fixed
        function: ARES scores this backbone in sample mode, with a fresh verdict per trajectory."""
        probs = self.sample_probs(premises, hypotheses, self.num_samples, num_base)
        return [float(p.mean()) for p in probs]

    def _verdicts(self, inputs: list[tuple[list[str], list[str]]], counts: list[int]) -> list[list[Verdict]]:
        samples = [self.sample(base, steps, n) for (base, steps), n in zip(inputs, counts)]
        for group, n in zip(samples, counts):
            if len(group) != n:
                raise RuntimeError(f"{type(self).__name__} drew {len(group)} samples where {n} were asked.")
        queries = [q for group in samples for s in group for q in s.queries]
        calls_before = self.engine.calls
        answers = self.engine.logprobs(queries, top=self.verdict_top) if queries else []
        read_calls = self.engine.calls - calls_before
        out, at = [], 0
        for group in samples:
            verdicts = []
            for s in group:
                mine = answers[at : at + len(s.queries)]
                at += len(s.queries)
                prob = s.fixed if s.read is None else float(s.read(mine))
                if not 0.0 <= prob <= 1.0:  # a family's reader must give a probability; clipped rounding only
                    if not -1e-9 <= prob <= 1.0 + 1e-9:
                        raise RuntimeError(f"{type(self).__name__} read P(Yes) = {prob!r}, outside [0, 1].")
                    prob = min(1.0, max(0.0, prob))
                verdicts.append(Verdict(s.prompt, s.rationale, s.verdict_text, prob, s.tokens, s.requests))
            out.append(verdicts)
        if out and out[0]:
            out[0][0] = replace(out[0][0], requests=out[0][0].requests + read_calls)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.engine!r})"

"""Step-level generation: the next step of many partial solutions at once, each stopped at the step separator.

Data flow: prompts -> :meth:`StepGenerator.render` (once: the text a model continues) -> per wave,
:meth:`StepGenerator.next_steps` (contexts = rendered prompt + the steps so far, ``k`` continuations each) ->
:class:`GeneratedStep` (the step's text, the tokens it cost, whether the solution ended).

Three generators share that interface:

- :class:`PolicyStepGenerator`: a plain Python callable ``policy(prompt, steps, rng)``, so the search algorithms
  run (and are tested) without a model; its cost is counted in characters unless it reports tokens itself.
- :class:`TransformersStepGenerator`: ``model.generate`` on left-padded contexts with ``stop_strings=[separator]``
  (transformers' per-row stopping criterion), ``num_return_sequences=k``.
- :class:`VLLMStepGenerator`: one ``llm.generate`` per wave with ``SamplingParams(n=k, stop=[separator])`` per
  context; vLLM schedules every context itself.

A continuation *ends the solution* (``finished``) when it stops for any reason but the separator: the end of
sequence, the per-step length limit, an empty step, or the policy saying so (search-and-learn's ``EOS`` /
``length`` / empty ``next_texts``).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..utils.checks import is_int
from ..engines import generate_new_tokens, is_vllm_llm, prompt_conversations, sampling_params


__all__ = ["GeneratedStep", "PolicyStepGenerator", "StepGenerator", "StepPolicy", "TransformersStepGenerator",
           "VLLMStepGenerator", "step_generator"]


@dataclass(frozen=True)
class GeneratedStep:
    """One generated continuation of a partial solution.

    Attributes:
        text: The step, stripped, without the separator (``""``: the solution ended with no new step).
        tokens: What generating it cost: new tokens for a model, characters (or the policy's own count) for a policy.
        finished: The solution ended with this continuation (no separator reached).
    """

    text: str
    tokens: int
    finished: bool


#: ``policy(prompt, steps, rng) -> next step``: a string (a step, more to come), a :class:`GeneratedStep`, or
#: ``None`` (the solution is over). ``rng`` is a :class:`random.Random` seeded per continuation by the search, so a
#: seeded policy is reproducible whatever the algorithm asks of it.
StepPolicy = Callable[[Any, list[str], random.Random], "str | GeneratedStep | None"]


class StepGenerator:
    """The interface the search algorithms use (subclass it, or use :func:`step_generator`).

    Attributes:
        separator: The literal text that ends a step.
    """

    separator: str = "\n\n"

    def start(self, seed: int | None) -> None:
        """Called once at the start of a search run (seeds a model's sampling)."""

    def render(self, prompts: Sequence[Any]) -> list[Any]:
        """What :meth:`next_steps` continues, one per prompt (a policy gets the prompts as given)."""
        return list(prompts)

    def window(self) -> int | None:
        """The most positions (tokens) the model attends to, prompt and generated text together; ``None`` when
        unknown or unbounded (a policy)."""
        return None

    def count_tokens(self, contexts: Sequence[Any]) -> list[int] | None:
        """How many tokens each rendered context is to the model (``None``: not counted, a policy)."""
        return None

    def check_window(self, contexts: Sequence[Any], steps: int, where: str,
                     names: Sequence[str] | None = None) -> None:
        """Refuse, before anything is generated, a context that cannot take ``steps`` steps of
        ``max_step_tokens`` within :meth:`window`: past its positions a model with a learned table crashes and one
        with rotary positions writes text that no longer depends on the prompt, scored as if it did.

        Raises:
            ValueError: Naming the context (``names[i]``, else ``prompts[i]``), its tokens, what the steps may add,
                the window and the fixes.
        """
        window, step_tokens = self.window(), getattr(self, "max_step_tokens", None)
        if window is None or not is_int(step_tokens):
            return
        budget = step_tokens * steps
        # A cheap bound first: a context of more characters than window x _MAX_CHARS_PER_TOKEN cannot fit, and is
        # refused without tokenizing it (hundreds of megabytes would take a while even for a fast tokenizer).
        lengths = [len(c) if isinstance(c, str) else 0 for c in contexts]
        counts = [None if n > window * _MAX_CHARS_PER_TOKEN else 0 for n in lengths]
        short = [i for i, c in enumerate(counts) if c is not None]
        counted = self.count_tokens([contexts[i] for i in short]) if short else []
        if counted is None:
            return
        for i, count in zip(short, counted):
            counts[i] = count
        for i, count in enumerate(counts):
            if count is None or count + budget > window:
                label = names[i] if names is not None else f"prompts[{i}]"
                size = (f"{lengths[i]:,} characters (more than {_MAX_CHARS_PER_TOKEN} per token of the window)"
                        if count is None else f"{count:,} tokens")
                raise ValueError(
                    f"{where}: {label} is {size}, and {steps} steps of at most max_step_tokens={step_tokens} "
                    f"(--max-step-tokens x --num-iterations, lookahead included) may add {budget:,} more: past the "
                    f"model's window of {window:,} positions, where its steps would no longer read the prompt. "
                    "Shorten the prompt, or lower --max-step-tokens / --num-iterations"
                    + (f" (at most {max(window - count, 0) // steps} tokens a step for this prompt)"
                       if count is not None and count < window else "") + ", or use a model with a longer window."
                )

    def next_steps(self, contexts: Sequence[Any], prefixes: Sequence[Sequence[str]], k: int, keys: Sequence[str],
                   greedy: bool = False) -> list[list[GeneratedStep]]:
        """``k`` continuations of each ``(contexts[i], prefixes[i])``, one list per context.

        Args:
            contexts: Rendered prompts (:meth:`render`).
            prefixes: The steps each partial solution has so far.
            k: Continuations per context.
            keys: One string per context (its lineage) that, with the prefix's length, seeds its continuations
                (policies; vLLM when seeded): a candidate samples the same steps whatever else the search does.
            greedy: The most likely continuation (search-and-learn's lookahead rolls out at temperature 0); then
                ``k`` must be 1.
        """
        raise NotImplementedError


# More characters than this per token of the window: too long to fit, whatever the tokenizer (long merges of
# repeated characters stay well under it).
_MAX_CHARS_PER_TOKEN = 64


def _seed_of(key: str) -> int:
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16)


def _check_separator(separator: Any, where: str) -> str:
    if not isinstance(separator, str) or not separator:
        raise ValueError(f"{where}(separator={separator!r}) must be a non-empty literal string, e.g. '\\n\\n'.")
    if separator.startswith("re:"):
        raise ValueError(f"{where}(separator={separator!r}): generation stops at a literal string, not a regex; pass "
                         "the literal text that ends a step (e.g. '\\n\\n').")
    return separator


def _check_k(k: int, greedy: bool, where: str) -> None:
    if not is_int(k) or k < 1:
        raise ValueError(f"{where}.next_steps(k={k!r}) must be a positive int.")
    if greedy and k != 1:
        raise ValueError(f"{where}.next_steps(k={k}, greedy=True): a greedy rollout has one continuation; pass k=1.")


class PolicyStepGenerator(StepGenerator):
    """Steps from a Python callable (see :data:`StepPolicy`); ``greedy`` is not passed on (a policy samples as it
    likes from the ``rng`` it is given)."""

    def __init__(self, policy: StepPolicy, separator: str = "\n\n") -> None:
        if not callable(policy):
            raise TypeError(f"PolicyStepGenerator(policy={policy!r:.60}) must be callable: policy(prompt, steps, rng).")
        self.policy, self.separator = policy, _check_separator(separator, "PolicyStepGenerator")

    def __repr__(self) -> str:
        return f"PolicyStepGenerator({getattr(self.policy, '__name__', type(self.policy).__name__)})"

    def next_steps(self, contexts: Sequence[Any], prefixes: Sequence[Sequence[str]], k: int, keys: Sequence[str],
                   greedy: bool = False) -> list[list[GeneratedStep]]:
        _check_k(k, greedy, "PolicyStepGenerator")
        return [[self._one(context, list(prefix), random.Random(f"{key}/{len(prefix)}/{j}")) for j in range(k)]
                for context, prefix, key in zip(contexts, prefixes, keys)]

    def _one(self, prompt: Any, steps: list[str], rng: random.Random) -> GeneratedStep:
        out = self.policy(prompt, steps, rng)
        if out is None:
            return GeneratedStep("", 0, True)
        if isinstance(out, GeneratedStep):
            return GeneratedStep(out.text.strip(), out.tokens, out.finished or not out.text.strip())
        if not isinstance(out, str):
            raise TypeError(f"the step policy returned {type(out).__name__}; return a step string, a GeneratedStep "
                            "or None (the solution is over).")
        return GeneratedStep(out.strip(), len(out), not out.strip())


def _cut(text: str, separator: str) -> tuple[str, bool]:
    """A continuation cut at the first separator: ``(step, reached the separator)``."""
    at = text.find(separator)
    return (text, False) if at < 0 else (text[:at], True)


class TransformersStepGenerator(StepGenerator):
    """Steps from a transformers causal LM: ``model.generate(stop_strings=[separator], tokenizer=...)`` on
    left-padded contexts, ``batch_size`` contexts a call (each yields ``k`` sequences).

    Args:
        model: A causal LM with ``generate``.
        tokenizer: Its tokenizer (``chat_template`` for conversational prompts).
        separator: The literal text that ends a step.
        max_step_tokens: New tokens per step at most; a step that reaches it ends the solution.
        batch_size: Contexts per ``generate`` call.
        use_chat_template: As :func:`~ares_rerank.rerank.best_of_n.best_of_n`.
        **generate_kwargs: Passed to ``model.generate`` (``temperature``, ``top_p``, ...).
    """

    def __init__(self, model: Any, tokenizer: Any, separator: str = "\n\n", max_step_tokens: int = 256,
                 batch_size: int = 8, use_chat_template: bool | None = None, **generate_kwargs: Any) -> None:
        if not callable(getattr(model, "generate", None)) or not callable(tokenizer):
            raise TypeError(f"TransformersStepGenerator(model={type(model).__name__}, tokenizer="
                            f"{type(tokenizer).__name__}) needs a causal LM with .generate and its tokenizer.")
        for name, value in (("max_step_tokens", max_step_tokens), ("batch_size", batch_size)):
            if not is_int(value) or value < 1:
                raise ValueError(f"TransformersStepGenerator({name}={value!r}) must be a positive int.")
        for name in ("num_return_sequences", "stop_strings", "max_new_tokens"):
            if name in generate_kwargs:
                raise TypeError(f"TransformersStepGenerator({name}=...) is set by the search: drop it (the step "
                                "length limit is max_step_tokens=, the stop string is separator=).")
        self.model, self.tokenizer = model, tokenizer
        self.separator = _check_separator(separator, "TransformersStepGenerator")
        self.max_step_tokens, self.batch_size = int(max_step_tokens), int(batch_size)
        self.use_chat_template, self.generate_kwargs = use_chat_template, generate_kwargs
        self.templated = False

    def start(self, seed: int | None) -> None:
        if seed is not None:
            import torch

            torch.manual_seed(seed)

    def render(self, prompts: Sequence[Any]) -> list[str]:
        conversations = prompt_conversations(list(prompts), self.use_chat_template, "TransformersStepGenerator")
        self.templated = conversations is not None
        if conversations is None:
            return list(prompts)
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError("TransformersStepGenerator: the tokenizer has no chat_template for conversational "
                             "prompts; pass string prompts, or set tokenizer.chat_template.")
        return [self.tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
                for c in conversations]

    def window(self) -> int | None:
        from ..backbones.tokenization import model_window

        return model_window(self.model, self.tokenizer, None)

    def count_tokens(self, contexts: Sequence[Any]) -> list[int]:
        ids = self.tokenizer(list(contexts), add_special_tokens=not self.templated)["input_ids"]
        return [len(row) for row in ids]

    def next_steps(self, contexts: Sequence[Any], prefixes: Sequence[Sequence[str]], k: int, keys: Sequence[str],
                   greedy: bool = False) -> list[list[GeneratedStep]]:
        _check_k(k, greedy, "TransformersStepGenerator")
        texts = [c + "".join(s + self.separator for s in p) for c, p in zip(contexts, prefixes)]
        kwargs = {**self.generate_kwargs, "max_new_tokens": self.max_step_tokens, "stop_strings": [self.separator],
                  "tokenizer": self.tokenizer}
        if greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        out: list[list[GeneratedStep]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            new = generate_new_tokens(self.model, self.tokenizer, batch, self.templated, k, **kwargs)
            steps = [self._parse(row) for row in new.tolist()]
            out += [steps[i * k : (i + 1) * k] for i in range(len(batch))]
        return out

    def _parse(self, ids: list[int]) -> GeneratedStep:
        """One row of new ids: after a stop, transformers pads the row (with eos when the tokenizer has no pad)."""
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        step, stopped = _cut(text, self.separator)
        length = ids.index(pad) if pad in ids else len(ids)
        if not stopped and length < len(ids):
            length += 1  # the end-of-sequence token that ended the row was generated too
        return GeneratedStep(step.strip(), length, not stopped or not step.strip())


class VLLMStepGenerator(StepGenerator):
    """Steps from a vLLM ``LLM``: one ``llm.generate(texts, [SamplingParams(n=k, stop=[separator], ...)])`` per
    wave (the model's default sampling, then ``generate_kwargs`` by vLLM's names, as
    :func:`~ares_rerank.rerank.best_of_n`). With a ``seed``, each context gets its own seed derived from its key
    (identical contexts must still sample differently).

    Args:
        llm: A ``vllm.LLM``.
        tokenizer: ``None`` (``llm.get_tokenizer()`` renders conversations) or a tokenizer with a chat template.
        separator, max_step_tokens, use_chat_template: As :class:`TransformersStepGenerator`.
        **generate_kwargs: ``SamplingParams`` fields (``temperature``, ``top_p``, ...).
    """

    def __init__(self, llm: Any, tokenizer: Any = None, separator: str = "\n\n", max_step_tokens: int = 256,
                 use_chat_template: bool | None = None, **generate_kwargs: Any) -> None:
        if not is_vllm_llm(llm):
            raise TypeError(f"VLLMStepGenerator(llm={type(llm).__name__}) must be a vllm.LLM.")
        if not is_int(max_step_tokens) or max_step_tokens < 1:
            raise ValueError(f"VLLMStepGenerator(max_step_tokens={max_step_tokens!r}) must be a positive int.")
        for name in ("stop_strings", "stop", "n", "seed"):
            if name in generate_kwargs:
                raise TypeError(f"VLLMStepGenerator({name}=...) is set by the search: drop it (separator= stops a "
                                "step, the search's seed= seeds it).")
        sampling_params(llm, 1, 1, None, generate_kwargs, "VLLMStepGenerator")  # every name checked now
        self.llm, self.tokenizer = llm, tokenizer
        self.separator = _check_separator(separator, "VLLMStepGenerator")
        self.max_step_tokens, self.use_chat_template = int(max_step_tokens), use_chat_template
        self.generate_kwargs, self.seed = generate_kwargs, None

    def start(self, seed: int | None) -> None:
        self.seed = seed

    def render(self, prompts: Sequence[Any]) -> list[str]:
        conversations = prompt_conversations(list(prompts), self.use_chat_template, "VLLMStepGenerator")
        if conversations is None:
            return list(prompts)
        tokenizer = self.tokenizer if self.tokenizer is not None else self.llm.get_tokenizer()
        return [tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in conversations]

    def window(self) -> int | None:
        config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        length = getattr(config, "max_model_len", None)
        return int(length) if is_int(length) and length > 0 else None

    def count_tokens(self, contexts: Sequence[Any]) -> list[int] | None:
        tokenizer = self.tokenizer if self.tokenizer is not None else self.llm.get_tokenizer()
        if not callable(tokenizer):
            return None
        return [len(row) for row in tokenizer(list(contexts))["input_ids"]]

    def next_steps(self, contexts: Sequence[Any], prefixes: Sequence[Sequence[str]], k: int, keys: Sequence[str],
                   greedy: bool = False) -> list[list[GeneratedStep]]:
        _check_k(k, greedy, "VLLMStepGenerator")
        texts = [c + "".join(s + self.separator for s in p) for c, p in zip(contexts, prefixes)]
        kwargs = {**self.generate_kwargs, "stop_strings": [self.separator]}
        if greedy:
            kwargs["do_sample"] = False
        params = [sampling_params(self.llm, k, self.max_step_tokens,
                                  None if self.seed is None else _seed_of(f"{self.seed}/{key}/{len(prefix)}"), kwargs,
                                  "VLLMStepGenerator") for key, prefix in zip(keys, prefixes)]
        outputs = self.llm.generate(texts, params, use_tqdm=False) if texts else []
        if len(outputs) != len(texts):
            raise RuntimeError(f"VLLMStepGenerator: vLLM returned {len(outputs)} outputs for {len(texts)} prompts.")
        return [[self._parse(sample) for sample in output.outputs] for output in outputs]

    def _parse(self, sample: Any) -> GeneratedStep:
        """vLLM: ``finish_reason`` ``"stop"`` with ``stop_reason`` the stop string (the separator, cut from the
        text) or ``None`` (end of sequence); ``"length"`` at the step limit."""
        by_separator = sample.finish_reason == "stop" and sample.stop_reason is not None
        step, found = _cut(sample.text, self.separator)  # a stop string kept in the output is cut too
        ended = not (by_separator or found) or not step.strip()
        return GeneratedStep(step.strip(), len(sample.token_ids), ended)


def step_generator(model: Any, tokenizer: Any = None, *, separator: str = "\n\n", max_step_tokens: int = 256,
                   batch_size: int = 8, use_chat_template: bool | None = None, **generate_kwargs: Any) -> StepGenerator:
    """The step generator for ``model``: a :class:`StepGenerator` as is; a vLLM ``LLM``; a transformers causal LM
    (with its ``tokenizer``); or a callable step policy (:data:`StepPolicy`)."""
    if isinstance(model, StepGenerator):
        return model
    if is_vllm_llm(model):
        return VLLMStepGenerator(model, tokenizer, separator, max_step_tokens, use_chat_template, **generate_kwargs)
    if callable(getattr(model, "generate", None)):
        return TransformersStepGenerator(model, tokenizer, separator, max_step_tokens, batch_size, use_chat_template,
                                         **generate_kwargs)
    if callable(model):
        if generate_kwargs:
            raise TypeError(f"step_generator: a step policy takes no generation arguments ({sorted(generate_kwargs)}).")
        return PolicyStepGenerator(model, separator)
    raise TypeError(f"step_generator(model={type(model).__name__}) must be a transformers causal LM (with its "
                    "tokenizer), a vllm.LLM, a StepGenerator, or a callable policy(prompt, steps, rng).")

"""Generative verifiers as ARES backbones: for a (premises, step) input, sample a rationale, then read the verdict's
``P(Yes | rationale)`` from log-probabilities (``kind="generative"``, and the published families in
:mod:`~ares_rerank.backbones.verifiers`: GenPRM, ThinkPRM, R-PRM).

**A verdict is a random variable.** ``P(Yes | rationale)`` is bounded in [0, 1] and its mean over sampled rationales
is the input's entailment probability. So a verifier is a *sampled* backbone (``sampled = True``,
:class:`~ares_rerank.backbones.base.SampledBackbone`): ``sample_probs(premises, hypotheses, n)`` draws ``n[i]`` fresh
verdicts for pair ``i`` (its ``n[i]`` samples asked together: ``n=`` in one request to a server, where prefix caching
pays; locally from one pass over the prompt, and the first stages of several inputs in one ``generate`` call:
:meth:`GenerativeVerifier.sample_all`), nothing is cached, and ARES gives every trajectory its own verdict in sample
mode (exact and auto modes refuse: :func:`~ares_rerank.estimator.batch.check_sampled_mode`). ``entailment_probs``
(for baselines) is the mean of ``num_samples`` fresh verdicts, as the families' own code averages them: not a fixed
function.

**What ARES's masks mean here.** The included base claims are the question (joined by ``question_separator``), the
included earlier steps are the previous steps, the judged step is the last: the verifier's input for the chain made
of the subset, as the discriminative PRM families read it (:mod:`~ares_rerank.backbones.prms.base`).

**Where the model runs**: an *engine* (:mod:`~ares_rerank.backbones.verifier_engines`: :class:`LocalEngine`,
:class:`ServedEngine` on ``/v1/completions``, :class:`ChatEngine` on ``/v1/chat/completions``), the one interface
the verifiers use: ``generate(prompt, n, sampling)``, ``logprobs(queries, top)``, ``encode(text)``; a verifier tells
an engine that sends messages which messages each prompt it renders came from
(:meth:`GenerativeVerifier.rendered_from`).

**Cost** (:class:`~ares_rerank.backbones.base.SampledVerdicts`, then the chain's certificate): generated tokens per
pair (every stage of every sample), and requests (served) or model calls (local) per pair; the one call that reads
the verdicts of a whole batch of pairs is counted on its first pair.

**Your own verifier** (:class:`GenerativeVerifier`, ``kind="generative"``): a prompt template with ``{question}``,
``{previous_steps}`` and ``{step}`` (or a function), an optional chat template, the sampling, stop strings, and a
verdict parser: a function from the rationale to the text placed after the prompt before the answer token is read
(default: the rationale followed by ``verdict_prompt``), the answer read as ``P(yes) / (P(yes) + P(no))`` of the two
answer tokens.

Every family (and every test's recording engine) talks to ``generate`` / ``logprobs`` / ``encode`` only, so the
local and the served paths cannot drift apart.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..utils.checks import check_positive_int
from .base import SampledVerdicts, check_pairs, check_sample_counts
from .cache import ScoringStats
from .verifier_engines import (
    ENGINE_APIS,
    ChatEngine,
    Generation,
    LocalEngine,
    LogprobAnswer,
    LogprobQuery,
    Sampling,
    ServedEngine,
    cut_at_stop,
    load_engine,
    softmax_pair,
)
from .window import TokenWindow, check_window


__all__ = [
    "ChatEngine",
    "DEFAULT_PROMPT",
    "ENGINE_APIS",
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
#: Prompts whose samples one ``generate_many`` asks together (bounds what one call renders and holds).
PROMPTS_PER_CALL = 64
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


class GenerativeVerifier(TokenWindow):
    """A generative verifier as a sampled ARES backbone (``kind="generative"``; see the module docstring).

    Args:
        engine: Where the model runs (:class:`LocalEngine`, :class:`ServedEngine`).
        prompt: A template with ``{question}``, ``{previous_steps}`` and ``{step}``, or a function
            ``(question, previous_steps: list[str], step) -> str`` (default :data:`DEFAULT_PROMPT`).
        system_prompt: A system turn (with ``use_chat_template``).
        use_chat_template: Wrap the prompt as a user turn in the tokenizer's chat template, generation prompt added
            (default: when the tokenizer has one).
        sampling: The rationale's :class:`Sampling` (default temperature 0.7, 1,024 tokens), or a dict of its
            fields (``--backbone-options '{"sampling": {"max_tokens": 256}}'``), the others kept at the default.
        verdict_prompt: Placed after the rationale before the answer is read (default ``"\\nVerdict (Yes or
            No):"``).
        verdict_parser: ``rationale -> text`` placed after the prompt before the answer token is read (overrides
            ``verdict_prompt``; e.g. cut the rationale at your own marker).
        answers: The ``(yes, no)`` answer strings, each one token (default ``(" Yes", " No")``).
        previous_separator: Joins the previous steps into ``{previous_steps}`` (default a newline).
        question_separator: Joins the included base claims into the question.
        num_samples: Samples ``entailment_probs`` averages (baselines; ARES asks its own counts).
        window: When an input's prompt plus what a sample may add (:meth:`new_tokens`) passes the engine's window
            (:meth:`fit`): ``"refuse"`` (default: a ValueError with the counts, naming this option),
            ``"truncate"`` (drop the earliest premises first, the longest suffix that fits) or ``"relevant"``
            (keep the premises most relevant to the step that fit); the judged step is never cut.
    """

    sampled = True
    kind = "generative"
    overlong_steps = "error"  # TokenWindow's: the judged step is never cut (fit refuses first)
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
        sampling: Sampling | dict[str, Any] | None = None,
        verdict_prompt: str = "\nVerdict (Yes or No):",
        verdict_parser: Callable[[str], str] | None = None,
        answers: tuple[str, str] = (" Yes", " No"),
        previous_separator: str = "\n",
        question_separator: str = "\n",
        num_samples: int = 10,
        window: str = "refuse",
    ) -> None:
        self._init_common(engine, question_separator, num_samples, window)
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
        self.sampling = Sampling.from_value(sampling, Sampling(max_tokens=1024))
        self.verdict_prompt, self.verdict_parser = verdict_prompt, verdict_parser
        self.previous_separator = previous_separator
        self.answer_ids = self.single_tokens(answers, "answers")

    def _init_common(self, engine: Any, question_separator: str, num_samples: int, window: str = "refuse") -> None:
        if not callable(getattr(engine, "generate", None)) or not callable(getattr(engine, "logprobs", None)):
            raise TypeError(f"engine={engine!r:.60} must be a LocalEngine or ServedEngine (generate and logprobs).")
        if not isinstance(question_separator, str):
            raise TypeError(f"question_separator={question_separator!r} must be a string, e.g. '\\n'.")
        check_positive_int(num_samples, "num_samples", 10)
        self.engine, self.tokenizer = engine, engine.tokenizer
        self.question_separator, self.num_samples = question_separator, num_samples
        self.window, self.stats, self._window_warned = check_window(window), ScoringStats(), False

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, *, tokenizer: Any = None, model: str | None = None,
                        seed: int = 0, device: Any = "auto", dtype: Any = "auto", trust_remote_code: bool = False,
                        engine_kwargs: dict[str, Any] | None = None, revision: str | None = None,
                        token: str | bool | None = None, cache_dir: str | Path | None = None,
                        local_files_only: bool = False, api: str = "completions", max_model_len: int | None = None,
                        **kwargs: Any) -> GenerativeVerifier:
        """``load_backbone(name_or_path, kind=...)``: a local causal LM (folder or hub id), or a server URL with
        ``tokenizer=`` and ``api=`` (:func:`load_engine`; ``max_model_len`` its window); ``kwargs`` go to the
        constructor."""
        hub = {k: v for k, v in (("revision", revision), ("token", token), ("cache_dir", cache_dir)) if v is not None}
        if local_files_only:
            hub["local_files_only"] = True
        engine = load_engine(name_or_path, tokenizer=tokenizer, model=model, seed=seed, device=device, dtype=dtype,
                             trust_remote_code=trust_remote_code, engine_kwargs=engine_kwargs, api=api,
                             max_model_len=max_model_len, **hub)
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
        return self.rendered_from(messages, self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                                               add_generation_prompt=True))

    def rendered_from(self, messages: list[dict[str, str]], text: str) -> str:
        """``text``, after telling an engine that sends messages (``api="chat"``) that it renders ``messages``."""
        remember = getattr(self.engine, "remember_chat", None)
        if remember is not None:
            remember(text, messages)
        return text

    def next_token_read(self, sample: PendingVerdict, text: str, yes: int, no: int) -> None:
        """Read ``P(yes) / (P(yes) + P(no))`` after the prompt text ``text`` (tokenized as the engine tokenizes)."""
        context = self.engine.encode(text)
        sample.queries = [LogprobQuery(context, yes), LogprobQuery(context, no)]
        sample.read = lambda answers: softmax_pair(answers[0].logprob, answers[1].logprob)

    # -- the window -------------------------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone (no special tokens): what a fixed string appended to a prompt costs."""
        return len(self.tokenizer.encode(text, add_special_tokens=False)) if text else 0

    def new_tokens(self) -> int:
        """The most tokens a sample may add to its prompt before the verdict is read: the generation budget and
        the text appended for the read (families with more stages count theirs)."""
        return self.sampling.max_tokens + self.count_tokens(self.verdict_prompt) + 1

    def fit(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[list[str], list[str]]:
        """``(base claims, steps)`` whose prompt plus :meth:`new_tokens` fits the engine's window, as ``window``
        says (:class:`~ares_rerank.backbones.window.TokenWindow`'s policy, the premises being the base claims then
        the earlier steps; drops counted in ``stats``, warned once); the input itself when it fits or the engine
        does not know its window.

        Raises:
            ValueError: ``window="refuse"`` and it does not fit, or the judged step alone does not.
        """
        base_claims, steps = list(base_claims), list(steps)
        window = self.engine.window() if callable(getattr(self.engine, "window", None)) else None
        if window is None:
            return base_claims, steps
        reserve, num_base = self.new_tokens(), len(base_claims)
        claims, hypothesis = base_claims + steps[:-1], steps[-1]

        def render(claims: list[str], roles: Any, hypothesis: str, kept: list[int]) -> dict[str, Any]:
            kept_base = [claims[i] for i in kept if i < num_base]
            kept_steps = [claims[i] for i in kept if i >= num_base] + [hypothesis]
            ids = self.engine.encode(self.render(kept_base, kept_steps))
            return {"input_ids": ids, "kept": (kept_base, kept_steps)}

        full = len(render(claims, None, hypothesis, list(range(len(claims))))["input_ids"])
        if full + reserve <= window:
            return base_claims, steps
        bare = len(render(claims, None, hypothesis, [])["input_ids"])
        budget = (f"a sample may add {reserve:,} (its generation budget and the verdict read's text: lower the "
                  "family's max_tokens / max_length / sampling to add fewer)")
        if bare + reserve > window:
            raise ValueError(f"{type(self).__name__}: the step {hypothesis[:80]!r} is a prompt of {bare:,} tokens "
                             f"with no premises, and {budget}: past the window of {window:,} positions, and the "
                             "judged step is never cut. Split the step, add fewer tokens, or pass a longer "
                             "max_model_len if the model takes it.")
        if self.window == "refuse":
            raise ValueError(f"{type(self).__name__}: the input for the step {hypothesis[:80]!r} is a prompt of "
                             f"{full:,} tokens with its {len(claims)} premises ({bare:,} with none), and {budget}: "
                             f"past the window of {window:,} positions, and window='refuse' drops none. Pass "
                             "window='truncate' (drop the earliest premises first) or window='relevant' (keep the "
                             "most relevant that fit), add fewer tokens, or pass a longer max_model_len if the model "
                             "takes it.")
        self.max_length = window  # what TokenWindow fits into (less reserve)
        dropped = self.stats.premises_dropped
        item = self.fit_window(claims, None, hypothesis, reserve=reserve, render=render)
        if not self._window_warned:
            self._window_warned = True
            warnings.warn(f"{self!r}: an input did not fit the window of {window:,} tokens with {reserve:,} for the "
                          f"sample, so {self.stats.premises_dropped - dropped} of its {len(claims)} premises were "
                          f"left out (window={self.window!r}; counted in .stats.premises_dropped / "
                          ".pairs_windowed, said once per verifier).", UserWarning, stacklevel=3)
        return item["kept"]

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

    def first_stage(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, Sampling]:
        """The prompt an input's rationales are sampled from and how (its first generation stage); a family with a
        prompt suffix or stop strings of its own overrides this."""
        return self.render(base_claims, steps), self.sampling

    def finish(self, base_claims: Sequence[str], steps: Sequence[str], prompt: str,
               generations: Sequence[Generation]) -> list[PendingVerdict]:
        """The pending verdicts of an input from its first stage's ``generations`` of ``prompt`` (a family with
        further stages runs them here, counting their tokens and requests on each sample; the first stage's are
        counted by the caller)."""
        return self.pending(prompt, generations)

    def finish_many(self, items: Sequence[tuple[Sequence[str], Sequence[str], str, Sequence[Generation]]]) -> list[
            list[PendingVerdict]]:
        """:meth:`finish` for several ``(base_claims, steps, prompt, generations)`` asked together; a family whose
        later stages can be asked together too (GenPRM's output) overrides this."""
        return [self.finish(*item) for item in items]

    def sample(self, base_claims: Sequence[str], steps: Sequence[str], n: int) -> list[PendingVerdict]:
        """``n`` rationales for one input, each with how its verdict is read: the first stage's ``n`` samples in one
        ``generate`` call, then :meth:`finish`."""
        prompt, sampling = self.first_stage(base_claims, steps)
        samples = self.finish(base_claims, steps, prompt, self.engine.generate(prompt, n, sampling))
        if samples:
            samples[0].requests += 1
        return samples

    def pending(self, prompt: str, generations: Sequence[Generation]) -> list[PendingVerdict]:
        """The one-stage verdicts of ``prompt``'s sampled ``generations``: each read after the rationale and the
        verdict prompt (or ``verdict_parser``'s text)."""
        samples = []
        for gen in generations:
            sample = PendingVerdict(prompt, gen.text, tokens=len(gen.token_ids))
            after = self.verdict_parser(gen.text) if self.verdict_parser else gen.text + self.verdict_prompt
            if not isinstance(after, str):
                raise TypeError(f"verdict_parser returned {type(after).__name__}: return the text read after the "
                                "prompt.")
            self.next_token_read(sample, prompt + after, *self.answer_ids)
            samples.append(sample)
        return samples

    def sample_all(self, inputs: Sequence[tuple[list[str], list[str]]], counts: Sequence[int]) -> list[list[
            PendingVerdict]]:
        """:meth:`sample` for every input. With an engine that takes several prompts at once (``generate_many``),
        the first stages of inputs sampled alike (the same :class:`Sampling`: ThinkPRM's stops depend on the step's
        number) are asked together, :data:`PROMPTS_PER_CALL` prompts at a time: one local ``generate`` call over
        their rows, or concurrent requests to a server; the calls are counted on each group's first input. Later
        stages (GenPRM's output) then run in :meth:`finish_many`, over the group."""
        many = getattr(self.engine, "generate_many", None)
        if many is None or len(inputs) < 2:
            return [self.sample(*self.fit(base, steps), n) for (base, steps), n in zip(inputs, counts)]
        fitted = [self.fit(base, steps) for base, steps in inputs]
        stages = [self.first_stage(base, steps) for base, steps in fitted]
        alike: dict[Sampling, list[int]] = {}
        for i, (_, sampling) in enumerate(stages):
            alike.setdefault(sampling, []).append(i)
        out: list[list[PendingVerdict]] = [[] for _ in inputs]
        for sampling, members in alike.items():
            for start in range(0, len(members), PROMPTS_PER_CALL):
                group = members[start : start + PROMPTS_PER_CALL]
                calls_before = self.engine.calls
                generated = many([(stages[i][0], counts[i]) for i in group], sampling)
                calls = self.engine.calls - calls_before
                finished = self.finish_many([(*fitted[i], stages[i][0], gens) for i, gens in zip(group, generated)])
                for i, samples in zip(group, finished):
                    out[i] = samples
                first = next((out[i] for i in group if out[i]), None)
                if first:
                    first[0].requests += calls
        return out

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
        samples = self.sample_all(inputs, counts)
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

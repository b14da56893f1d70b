"""What every step-level search shares: partial solutions with their streaming ARES state, one generation wave and
one scoring wave for all problems at a time, per-problem counters, and the selection of the answer.

Counters (:class:`SearchStats`, per problem): generated tokens (characters for a policy) and steps, backbone
evaluations (distinct inputs the new steps asked, :attr:`AresStream.evaluations
<ares_rerank.estimator.stream.AresStream.evaluations>` split by problem) and seconds. The waves serve every problem at
once, so a problem's seconds are its share of each wave: generation time by its tokens, scoring time by its
evaluations.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from ..aggregate import Aggregate, aggregate_scores, get_aggregate
from ..rerank.answers import AnswerFn, answer_matcher
from ..chain import split_prompt
from ..utils.checks import is_int
from ..chain import message_text
from ..rerank.reranker import AresReranker
from ..estimator.stream import AresStream, StreamState
from ..rerank.voting import check_selection, order_by_vote
from .generators import GeneratedStep, StepGenerator


__all__ = ["Partial", "SearchResult", "SearchRun", "SearchStats"]


@dataclass
class SearchStats:
    """One problem's cost.

    Attributes:
        tokens: Generated tokens (a policy: characters, or its own count), lookahead rollouts included.
        steps: Generated steps, lookahead rollouts included.
        evaluations: Backbone evaluations the problem's new steps asked (memo misses).
        seconds: The problem's share of the generation and scoring waves.
        stopped: Candidates stopped by early rejection.
        tokens_saved: Early rejection: an estimate of the tokens the stopped candidates would still have cost (per
            stopped candidate, the mean length of the problem's finished candidates minus what it had spent, at
            least 0); exact savings need the same samples generated to the end (the evaluation does that).
    """

    tokens: int = 0
    steps: int = 0
    evaluations: int = 0
    seconds: float = 0.0
    stopped: int = 0
    tokens_saved: float = 0.0


@dataclass
class SearchResult:
    """The outcome of a search for one prompt.

    Attributes:
        prompt: The prompt as given.
        method: ``"best-of-n"``, ``"early-rejection"``, ``"beam-search"`` or ``"dvts"``.
        completions: The final candidates' text (steps joined by the separator).
        steps: Their steps.
        step_scores: ARES tau of each step (streamed).
        scores: Chain scores under the aggregate (``None``: no step).
        finished: Per candidate, whether the solution ended (``False``: stopped or cut at the iteration limit).
        stopped: Per candidate, whether early rejection stopped it.
        best_index: The selected candidate (among the unstopped ones while any exists).
        best: Its text.
        best_score: Its chain score.
        selection: The rule that selected it.
        stats: The problem's cost.
    """

    prompt: Any
    method: str
    completions: list[str]
    steps: list[list[str]]
    step_scores: list[list[float]]
    scores: list[float | None]
    finished: list[bool]
    stopped: list[bool]
    best_index: int
    best: str
    best_score: float | None
    selection: str
    stats: SearchStats = field(default_factory=SearchStats)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "stats": asdict(self.stats)}


@dataclass
class Partial:
    """A partial solution: its steps, ARES state, cost and status (internal to the algorithms)."""

    state: StreamState
    key: str
    tokens: int = 0
    finished: bool = False
    stopped: bool = False

    @property
    def steps(self) -> list[str]:
        return self.state.steps

    def fork(self, key: str) -> "Partial":
        return Partial(self.state.fork(), key, self.tokens, self.finished, self.stopped)


def check_positive(where: str, **values: Any) -> None:
    for name, value in values.items():
        if not is_int(value) or value < 1:
            raise ValueError(f"{where}({name}={value!r}) must be a positive int.")


class SearchRun:
    """One search over many prompts: the stream, the rendered prompts, the counters (see the module docstring).

    Args:
        where: The calling function's name (error messages).
        generator: The step generator.
        prompts: Strings or conversations; the reranker reads the base claims from them.
        reranker: Its backbone, ARES config, prompt splitting, aggregate, selection and answer_fn apply; its method
            must be ``"ares"`` (streaming scores are ARES's).
        horizon: The most steps a partial solution may reach.
        aggregate, selection, answer_fn: Overrides of the reranker's.
        seed: Seeds the generator (:meth:`StepGenerator.start`) and keys every continuation.
    """

    def __init__(self, where: str, generator: StepGenerator, prompts: Sequence[Any], reranker: AresReranker,
                 horizon: int, aggregate: Aggregate | None, selection: str | None, answer_fn: AnswerFn | None,
                 seed: int | None) -> None:
        if not isinstance(generator, StepGenerator):
            raise TypeError(f"{where}(generator={type(generator).__name__}) must be a StepGenerator: build one with "
                            "ares_rerank.search.step_generator(model, tokenizer) or from a policy callable.")
        if isinstance(prompts, (str, dict)) or not isinstance(prompts, Sequence):
            raise TypeError(f"{where}(prompts=...) got a {type(prompts).__name__}: pass a list of prompts.")
        if not isinstance(reranker, AresReranker) or reranker.method != "ares":
            raise TypeError(f"{where}(reranker={reranker!r:.80}) must be an AresReranker with method='ares' (the "
                            "search scores partial solutions with streaming ARES).")
        if seed is not None and (not is_int(seed) or seed < 0):
            raise ValueError(f"{where}(seed={seed!r}) must be a non-negative int, or None.")
        self.aggregate = reranker.aggregate if aggregate is None else aggregate
        get_aggregate(self.aggregate)
        self.selection = check_selection(selection or reranker.selection, f"{where}(selection)")
        self.answers = reranker.answers if answer_fn is None else answer_matcher(answer_fn)
        self.where, self.generator, self.reranker, self.seed = where, generator, reranker, seed
        self.prompts = list(prompts)
        self.base_claims = [split_prompt(message_text(p, reranker.prompt_roles, "prompt"), reranker.prompt_split)
                            for p in self.prompts]
        empty = [i for i, claims in enumerate(self.base_claims) if not claims]
        if empty:
            raise ValueError(f"{where}: prompts{empty[:5]} have no text to read base claims from; give each its text.")
        self.stream = AresStream(reranker.backbone, reranker.config, horizon)
        generator.start(seed)
        self.contexts = generator.render(self.prompts)
        generator.check_window(self.contexts, horizon, where)  # before anything is generated
        self.stats = [SearchStats() for _ in self.prompts]

    def start(self, problem: int, key: str) -> Partial:
        return Partial(self.stream.start(self.base_claims[problem]), f"{self.seed}/{problem}/{key}")

    def generate(self, items: Sequence[tuple[int, Partial]], k: int = 1,
                 greedy: bool = False) -> list[list[GeneratedStep]]:
        """``k`` continuations of each partial solution, one generator call; counted per problem."""
        if not items:
            return []
        began = time.perf_counter()
        out = self.generator.next_steps([self.contexts[p] for p, _ in items], [c.steps for _, c in items], k,
                                        [c.key for _, c in items], greedy)
        elapsed = time.perf_counter() - began
        if len(out) != len(items) or any(len(steps) != k for steps in out):
            raise RuntimeError(f"{self.where}: the generator returned {[len(s) for s in out]} continuations for "
                               f"{len(items)} contexts x {k}.")
        costs = [sum(s.tokens for s in steps) for steps in out]
        for (p, _), steps, cost in zip(items, out, costs):
            self.stats[p].tokens += cost
            self.stats[p].steps += sum(1 for s in steps if s.text)
            self.stats[p].seconds += elapsed * (cost / sum(costs) if sum(costs) else 1.0 / len(items))
        return out

    def extend(self, items: Sequence[tuple[int, Partial]], steps: Sequence[str]) -> list[float]:
        """Each partial solution's state takes its new step (one backbone call for all); returns each new tau."""
        if not items:
            return []
        began = time.perf_counter()
        taus = self.stream.extend([c.state for _, c in items], list(steps))
        elapsed = time.perf_counter() - began
        spent = [c.state.evaluations_per_step[-1] for _, c in items]
        for (p, _), evaluations in zip(items, spent):
            self.stats[p].evaluations += evaluations
            self.stats[p].seconds += elapsed * (evaluations / sum(spent) if sum(spent) else 1.0 / len(items))
        return taus

    def score(self, step_scores: Sequence[float]) -> float | None:
        return aggregate_scores(list(step_scores), self.aggregate) if step_scores else None

    def result(self, problem: int, method: str, candidates: Sequence[Partial],
               step_scores: Sequence[Sequence[float]] | None = None) -> SearchResult:
        """The problem's outcome; ``step_scores`` overrides the candidates' own (DVTS scores with lookahead)."""
        sep = self.generator.separator
        texts = [sep.join(c.steps) for c in candidates]
        per_step = [list(s) for s in step_scores] if step_scores is not None else [list(c.state.step_scores)
                                                                                    for c in candidates]
        scores = [self.score(s) for s in per_step]
        eligible = [i for i, c in enumerate(candidates) if not c.stopped and c.steps] or list(range(len(candidates)))
        groups, answers = self.answers.group([texts[i] for i in eligible])
        sound = [candidates[i].state.first_error() == -1 for i in eligible]
        order, _ = order_by_vote([scores[i] for i in eligible], groups, answers, self.selection, sound)
        best = eligible[order[0]] if eligible else 0
        return SearchResult(self.prompts[problem], method, texts, [list(c.steps) for c in candidates], per_step,
                            scores, [c.finished for c in candidates], [c.stopped for c in candidates], best,
                            texts[best] if texts else "", scores[best] if scores else None, self.selection,
                            self.stats[problem])

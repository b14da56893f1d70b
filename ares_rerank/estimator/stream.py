"""ARES while a chain is written: a state per chain prefix, extended one step at a time, forkable.

Data flow: base claims -> :meth:`AresStream.start` -> a :class:`StreamState` (the premise-mask distribution after k
steps) -> :meth:`AresStream.extend` (the new step of many states, ONE backbone call) -> tau of each new step; a
state :meth:`~StreamState.fork`\\ s so that many continuations of one prefix share it.

A step's score depends only on the claims before it, so extending a chain costs the new step's backbone
evaluations only: the masks (exact) or trajectories (sampled) of the prefix are kept, and each new step is judged
on them, as :mod:`~ares_rerank.estimator.batch` does in one pass over a finished chain; both share the mask
bookkeeping of :mod:`~ares_rerank.estimator.masks` (grouping into backbone inputs, pruning, splitting, the cap).

Modes (``AresConfig.mode``), and how they compare with scoring the finished chain
(:func:`~ares_rerank.estimator.ares_scores`):

- ``exact``: the same enumeration, pruning and hard bounds, step by step. Scores are identical to the finished
  chain's whenever the backbone has no planned premise selection (and, with one, as long as the masks stay under
  the row cap: the batch pass also merges masks no later step reads, which a stream cannot know).
- ``sample``: ``N = ceil(ln(2H / delta) / (2 eps^2))`` trajectories drawn at the start for a *horizon* of H steps
  (the union bound covers every step up to H, so the guarantee holds whatever length the chain reaches within it;
  a stream refuses step H + 1). The draws are seeded by the base claims, so a state gives the same scores whether
  it was forked or streamed alone.
- ``auto``: exact while the mass the pruning leaves stays within the hard budget (2 eps, bound eps); past it, the
  state switches to sample mode once: its trajectories are drawn from the start and run through the prefix (new
  backbone evaluations only where the memo lacks a value, counted on the step that switched). The finished chain's
  auto mode samples only the dropped masks (a stratified tail), which needs the whole chain.

Every state reports the same certificate as a finished chain (:meth:`StreamState.result`): hard per-step bounds
while exact, ``eps`` / ``delta`` / ``N`` once sampled.

Backbone values are memoized per stream by the text the backbone reads (selected premises, step), so forks and
states of one problem never ask the same input twice; :meth:`AresStream.clear` empties the memo.

Bounds: the memo holds at most :data:`MEMO_MAX_ENTRIES` values and :data:`MEMO_MAX_REFERENCES` premise references
(its keys hold the premises' texts by reference: a 4,096-step chain in sample mode kept ~2.3 M keys of up to 4,096
references, tens of GB); past either it is emptied at the next :meth:`AresStream.extend` (values asked again are
recomputed, counted in :attr:`AresStream.memo_resets`). One ``extend`` may ask at most :data:`MEMO_MAX_ENTRIES`
inputs (trajectories or masks of all its states, e.g. 500 forks x 358 trajectories): more is refused before any
state changes, naming how many states fit. ``max_evaluations`` bounds each state's evaluations (``None``: no bound
on them; the memory bounds hold still). A step is checked as a :class:`~ares_rerank.chain.Chain` checks it: text
that cannot be UTF-8 encoded (a lone surrogate) or longer than ``MAX_CLAIM_CHARS`` is refused.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Sequence

import numpy as np

from ..backbones.base import Backbone, PairBatch, is_sampled, premise_selector
from ..chain import Chain, ChainScores
from .config import AresConfig, check_sample_size, flag_threshold
from ..utils.checks import is_int
from .batch import check_evaluations
from .masks import exact_step, group_inputs, keep_heaviest, prune_groups, split_masks


__all__ = ["AresStream", "StreamState"]

DEFAULT_HORIZON = 64
#: The most values a stream's memo keeps before it is emptied (and the most inputs one ``extend`` may ask).
MEMO_MAX_ENTRIES = 500_000
#: The most premise references the memo's keys may hold together before it is emptied (~8 bytes each).
MEMO_MAX_REFERENCES = 16_000_000


class StreamState:
    """ARES after ``k`` steps of one chain (made by :meth:`AresStream.start`, extended by
    :meth:`AresStream.extend`).

    Attributes:
        base_claims: The chain's base claims.
        steps: The steps so far.
        step_scores: tau of each step so far.
        evaluations_per_step: Distinct backbone inputs each step asked (the switch to sampling, in auto mode, is
            counted on the step that made it).
        mode: ``"exact"`` or ``"sample"``.
    """

    def __init__(self, stream: "AresStream", base_claims: Sequence[str]) -> None:
        self.stream = stream
        self.base_claims = tuple(base_claims)
        self.steps: list[str] = []
        self.step_scores: list[float] = []
        self.bounds: list[float] = []
        self.evaluations_per_step: list[int] = []
        self.plans: list[Any] = []
        config = stream.config
        self.priors = config.priors_for(Chain(list(self.base_claims), ["-"]))  # one per base claim
        self.mode = "sample" if config.mode == "sample" else "exact"
        if self.mode == "sample":
            self._start_sampling()
        else:
            self._start_exact()

    # -- the public reading of a state ------------------------------------------------------------------------
    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def claims(self) -> list[str]:
        return list(self.base_claims) + self.steps

    @property
    def evaluations(self) -> int:
        return sum(self.evaluations_per_step)

    def first_error(self, threshold: float | None = None) -> int:
        """The first step with tau <= threshold (default: :data:`~ares_rerank.chain.DEFAULT_THRESHOLD`, or a
        deprecated ``AresConfig(threshold=)``'s), or -1."""
        limit = flag_threshold(self.stream.config) if threshold is None else threshold
        return next((k for k, tau in enumerate(self.step_scores) if tau <= limit), -1)

    def fork(self) -> "StreamState":
        """An independent copy: extending it leaves this state as it is (the stream and its memo are shared)."""
        clone = copy.copy(self)
        for name in ("steps", "step_scores", "bounds", "evaluations_per_step", "plans"):
            setattr(clone, name, list(getattr(self, name)))
        clone.rows = self.rows.copy()
        if self.mode == "exact":
            clone.weights = self.weights.copy()
        else:
            clone.rng = copy.deepcopy(self.rng)
        return clone

    def result(self) -> ChainScores:
        """The scores so far with their certificate, as :func:`~ares_rerank.estimator.ares_scores` reports a finished
        chain."""
        config, sampled = self.stream.config, self.mode == "sample"
        return ChainScores(
            step_scores=list(self.step_scores),
            evaluations=self.evaluations,
            evaluations_per_step=list(self.evaluations_per_step),
            method="ares",
            mode=self.mode,
            eps=config.eps if sampled else None,
            delta=config.delta if sampled else None,
            num_samples=self.n_samples if sampled else None,
            error_bounds=None if sampled else list(self.bounds),
        )

    def __repr__(self) -> str:
        scores = [round(s, 3) for s in self.step_scores]
        return f"StreamState(steps={self.num_steps}, mode={self.mode!r}, scores={scores})"

    # -- exact mode: the batch estimator's enumeration, one step at a time -------------------------------------
    def _start_exact(self) -> None:
        self.dropped = 0.0
        self.rows = np.zeros((1, len(self.base_claims)), dtype=bool)
        self.weights = np.ones(1)
        for j, p in enumerate(self.priors):
            self._split(j, np.full(len(self.weights), float(p)))

    def _split(self, bit: int, q: np.ndarray) -> None:
        """Each mask -> (claim ``bit`` accepted, ``w*q``) and (rejected, ``w*(1-q)``); the heaviest ``16 *
        max_masks`` are kept, the rest adds to the dropped mass."""
        if bit >= self.rows.shape[1]:
            self.rows = np.concatenate([self.rows, np.zeros((len(self.rows), 1), dtype=bool)], axis=1)
        rows, weights = split_masks(self.rows, self.weights, bit, q)
        rows, weights, _, light_weights = keep_heaviest(rows, weights, 16 * self.stream.config.mask_budget)
        self.dropped += float(light_weights.sum())
        self.rows, self.weights = rows, weights

    def _prune(self, groups: "_Groups", memo: dict) -> None:
        """Leave the lightest groups that need a backbone call unevaluated while the dropped mass stays within the
        budget (one group is always kept), then any beyond ``max_masks`` groups (as the batch estimator does)."""
        need = [g for g, key in enumerate(groups.keys) if key not in memo]
        out, self.dropped = prune_groups(groups.inverse, self.weights, len(groups.keys), need, self.dropped,
                                         self.stream.config)
        if out is not None:
            self.rows, self.weights = self.rows[~out], self.weights[~out]

    # -- sample mode -------------------------------------------------------------------------------------------
    def _seed(self) -> list[int]:
        digest = hashlib.sha256("\x00".join(self.base_claims).encode("utf-8", "surrogatepass")).hexdigest()
        return [self.stream.config.seed, int(digest[:15], 16), 2]

    def _start_sampling(self) -> None:
        config, horizon = self.stream.config, self.stream.horizon
        self.n_samples = check_sample_size(horizon, config)
        self.rng = np.random.default_rng(self._seed())
        self.rows = np.zeros((self.n_samples, len(self.base_claims) + horizon), dtype=bool)
        self.rows[:, : len(self.base_claims)] = self.rng.random((self.n_samples, len(self.base_claims))) < self.priors

    def _switch_to_sampling(self) -> None:
        """Auto mode past its hard budget: sample mode from the start, the prefix's steps judged again on the
        trajectories (memoized values reused); the prefix's scores are replaced by the sampled ones."""
        self.mode = "sample"
        self._start_sampling()
        steps = self.steps
        self.steps, self.step_scores, self.bounds, self.plans = [], [], [], []
        for step in steps:
            self.steps.append(step)
            self.plans.append(self.stream.plan(self.claims[:-1], step))
            self.stream.run_sample_step(self)


class _Groups:
    """The distinct backbone inputs of one state's current step: ``keys`` (memo keys: the read premises' texts,
    the step and how many of them are base claims), ``included`` (a representative row's claim indices, what the
    backbone is sent) and ``inverse`` (the group of every row)."""

    def __init__(self, state: StreamState) -> None:
        rows = state.rows
        k, n = state.num_steps - 1, len(state.base_claims)
        upto, claims, step = n + k, state.claims, state.steps[k]
        groups = group_inputs(rows, upto, state.plans[k])
        index: dict[Any, int] = {}
        self.keys: list[Any] = []
        self.included: list[list[int]] = []
        merged = np.empty(len(groups.selected), dtype=np.int64)  # inputs of equal text (repeated claims) are one
        for g, (chosen, r) in enumerate(zip(groups.selected, groups.representative)):
            key = (tuple(claims[i] for i in chosen), step, sum(1 for i in chosen if i < n))
            if key not in index:
                index[key] = len(self.keys)
                self.keys.append(key)
                self.included.append(np.flatnonzero(rows[r, :upto]).tolist())
            merged[g] = index[key]
        self.inverse = merged[groups.inverse]


class AresStream:
    """Streaming ARES on one backbone (see the module docstring).

    Args:
        backbone: An object with ``entailment_probs(premises, hypotheses)``.
        config: Estimator settings (``AresConfig()`` when ``None``); ``max_evaluations`` applies per state.
        horizon: The most steps a state may reach (sample mode's union bound covers them all); at most
            ``config.max_steps``.

    Attributes:
        calls: Backbone calls made.
        evaluations: Distinct backbone inputs asked (memo misses).

    Example:
        >>> from ares_rerank import FunctionBackbone
        >>> stream = AresStream(FunctionBackbone(lambda P, H: [float(h[-1] in "".join(p)) for p, h in zip(P, H)]),
        ...                     AresConfig(mode="exact"))
        >>> state = stream.start(["a"])
        >>> stream.extend([state], ["so a"]), stream.extend([state], ["so b"])
        ([1.0], [0.0])
    """

    def __init__(self, backbone: Backbone, config: AresConfig | None = None, horizon: int = DEFAULT_HORIZON) -> None:
        if is_sampled(backbone):  # the stream memoizes one value per input: a sampled verdict would be shared
            raise ValueError(
                f"AresStream(backbone={backbone!r:.60}) samples its verdicts (a generative verifier): a stream "
                "memoizes one value per input, which would share one sampled verdict across trajectories and break the "
                "guarantee. Score finished chains with ares_scores(..., AresConfig(mode='sample')) instead."
            )
        if not callable(getattr(backbone, "entailment_probs", None)):
            raise TypeError(f"AresStream(backbone={backbone!r:.60}) has no entailment_probs(premises, hypotheses).")
        if config is not None and not isinstance(config, AresConfig):
            raise TypeError(f"AresStream(config=...) must be an AresConfig, got {type(config).__name__}.")
        self.config = config or AresConfig()
        limit = self.config.max_steps
        if not is_int(horizon) or horizon < 1 or (limit is not None and horizon > limit):
            raise ValueError(f"AresStream(horizon={horizon!r}) must be a positive int, at most max_steps="
                             f"{self.config.max_steps} (the most steps a streamed chain may reach).")
        if self.config.mode == "sample":
            check_sample_size(horizon, self.config)  # the trajectory count is bounded before the first state
        self.backbone, self.horizon = backbone, int(horizon)
        selector = premise_selector(backbone)
        planner = getattr(selector, "plan", None) if selector is not None else None
        self.planner = planner if callable(planner) else None
        self.memo: dict[Any, float] = {}
        self.memo_references = 0  # premise references held by the memo's keys
        self.memo_resets = 0  # times the memo was emptied for its bounds
        self.calls = 0
        self.evaluations = 0

    def __repr__(self) -> str:
        return f"AresStream(backbone={self.backbone!r}, mode={self.config.mode!r}, horizon={self.horizon})"

    def clear(self) -> None:
        """Forget the memoized backbone values (states stay valid; a value asked again is recomputed)."""
        self.memo.clear()
        self.memo_references = 0

    def plan(self, claims: Sequence[str], step: str) -> Any:
        return None if self.planner is None else self.planner(list(claims), step)

    def start(self, base_claims: Sequence[str]) -> StreamState:
        """A state before the first step."""
        if isinstance(base_claims, str) or not all(isinstance(c, str) for c in base_claims):
            raise TypeError("AresStream.start(base_claims=...) takes a list of claim strings, e.g. [prompt].")
        return StreamState(self, base_claims)

    def score(self, base_claims: Sequence[str], steps: Sequence[str]) -> ChainScores:
        """A whole chain streamed step by step (what :meth:`extend` gives, as one result)."""
        state = self.start(base_claims)
        for step in steps:
            self.extend([state], [step])
        return state.result()

    def extend(self, states: Sequence[StreamState], steps: Sequence[str]) -> list[float]:
        """Add one step to each state (in place) and return each new step's tau; all the inputs the new steps need
        go to the backbone in ONE call.

        Raises:
            ValueError: A step is blank, a state is at the horizon, or a state passed ``max_evaluations``.
        """
        if len(states) != len(steps):
            raise ValueError(f"AresStream.extend got {len(states)} states for {len(steps)} steps: one step each.")
        for state, step in zip(states, steps):
            if not isinstance(state, StreamState) or state.stream is not self:
                raise TypeError("AresStream.extend: every state must come from this stream's start() (or a fork).")
            if not isinstance(step, str) or not step.strip():
                raise ValueError(f"AresStream.extend: step {step!r:.60} is not a non-blank string.")
            if state.num_steps >= self.horizon:
                raise ValueError(f"AresStream.extend: a state already has horizon={self.horizon} steps; start the "
                                 "stream with a larger horizon (sample mode's guarantee is sized by it).")
        for i, step in enumerate(steps):
            try:  # the rule a Chain's steps follow: UTF-8 text, at most MAX_CLAIM_CHARS
                Chain([], [step])
            except ValueError as err:
                raise ValueError(f"AresStream.extend: steps[{i}]: {err}") from None
        if len({id(s) for s in states}) != len(states):
            raise ValueError("AresStream.extend: a state appears twice; fork it to extend two continuations.")
        rows = sum(len(s.rows) for s in states)  # at most this many distinct inputs this call
        if rows > MEMO_MAX_ENTRIES:
            each = max(1, rows // len(states))
            raise ValueError(f"AresStream.extend: {len(states)} states of up to {each:,} masks or trajectories each "
                             f"may ask {rows:,} backbone inputs in one call, more than MEMO_MAX_ENTRIES="
                             f"{MEMO_MAX_ENTRIES:,}: extend at most {max(1, MEMO_MAX_ENTRIES // each):,} states at a "
                             "time (no state was changed).")
        if len(self.memo) > MEMO_MAX_ENTRIES or self.memo_references > MEMO_MAX_REFERENCES:
            self.clear()  # bounded memory; only repeated inputs are asked again
            self.memo_resets += 1
        for state, step in zip(states, steps):
            state.steps.append(step)
            state.plans.append(self.plan(state.claims[:-1], step))
            state.evaluations_per_step.append(0)
        groups = [_Groups(s) for s in states]
        for state, group in zip(states, groups):
            if state.mode == "exact":
                state._prune(group, self.memo)
        groups = [_Groups(s) if s.mode == "exact" else g for s, g in zip(states, groups)]
        self._evaluate(list(zip(states, groups)))
        out = []
        for state, group in zip(states, groups):
            if state.mode == "exact":
                self._advance_exact(state, group)
                if self.config.mode == "auto" and state.dropped > self.config.prune_budget:
                    state._switch_to_sampling()
            else:
                self._advance_sample(state, group)
            out.append(state.step_scores[-1])
        return out

    def run_sample_step(self, state: StreamState) -> None:
        """Judge a sampled state's last step on its trajectories (asking the backbone only for missing values)."""
        group = _Groups(state)
        self._evaluate([(state, group)])
        self._advance_sample(state, group)

    # -- internals ---------------------------------------------------------------------------------------------
    def _evaluate(self, pairs: list[tuple[StreamState, _Groups]]) -> None:
        batch, todo = PairBatch(), []
        for state, groups in pairs:
            claims, n = state.claims, len(state.base_claims)
            step = state.steps[-1]
            for key, included in zip(groups.keys, groups.included):
                if key in self.memo:
                    continue
                index = batch.add([claims[i] for i in included], step, sum(1 for i in included if i < n), key=key)
                if index == len(todo):
                    todo.append(key)
                    self.evaluations += 1
                    state.evaluations_per_step[-1] += 1
            limit = self.config.max_evaluations
            if limit is not None and state.evaluations > limit:
                chain = Chain(list(state.base_claims), state.steps)
                check_evaluations(chain, state.num_steps - 1, state.evaluations, limit)
        if todo:
            values = batch.call(self.backbone)
            self.calls += 1
            for key, value in zip(todo, values.tolist()):
                self.memo[key] = float(value)
                self.memo_references += len(key[0]) + 1

    def _values(self, groups: _Groups) -> np.ndarray:
        return np.array([self.memo[key] for key in groups.keys])[groups.inverse]

    def _advance_exact(self, state: StreamState, groups: _Groups) -> None:
        q = self._values(groups)
        _, point, bound = exact_step(state.weights, q, state.dropped, self.config.eps)
        state.step_scores.append(point)
        state.bounds.append(bound)
        state._split(len(state.base_claims) + state.num_steps - 1, q)

    def _advance_sample(self, state: StreamState, groups: _Groups) -> None:
        q = self._values(groups)
        state.step_scores.append(float(q.mean()))
        bit = len(state.base_claims) + state.num_steps - 1
        state.rows[:, bit] = state.rng.random(state.n_samples) < q

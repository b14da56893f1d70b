"""The ARES estimator (You et al., 2025, "Probabilistic Soundness Guarantees in LLM Reasoning Chains", Alg. 1).

For a chain with base claims ``C_1..C_n`` and steps ``C_{n+1}..C_{n+m}`` and a backbone ``E(premises, hypothesis)``:

    alpha_j ~ Bernoulli(p_j)                                   base claim j is accepted (prior p_j)
    q_k     = E({C_j : alpha_j = 1, j < n + k}, C_{n+k})       step k judged on accepted earlier claims only
    alpha_{n+k} ~ Bernoulli(q_k)                               step k accepted with its own entailment probability
    tau_k   = E_alpha[q_k]                                     the ARES score of step k

**Sample mode** draws N i.i.d. trajectories with ``N = ceil(ln(2m / delta) / (2 eps^2))``; by Hoeffding and a
union bound over the m steps, ``|tau_hat_k - tau_k| <= eps`` for every k at once with probability >= 1 - delta.
``E`` is evaluated once per distinct backbone input and the value reused (memoization, not resampling: each
trajectory still draws its own Bernoulli, so trajectories stay i.i.d. and the guarantee holds).

**Exact mode** propagates the distribution over premise masks with exact weights (a mask of weight w splits into
``mask+[1]`` with ``w*q`` and ``mask+[0]`` with ``w*(1-q)``); ``tau_k = sum w*q``. It spends an error budget instead
of the backbone: before each step it may leave the lightest groups of masks unevaluated (and drop them) while their
total probability mass D stays within ``prune_mass`` (default ``eps``), and it asks at most ``max_masks`` distinct
inputs per step (default 16; the lightest beyond that are dropped too).
The true ``tau_k`` lies in ``[S, S + D]`` with S the sum over kept masks. We report the point of that interval nearest
the kept masks' mean ``S / (1 - D)`` whose worst-case error stays within ``max(eps, D / 2)``, and that error as the hard
bound: while ``D <= eps`` (the default budget) the point is the mean itself, bound ``D * max(mean, 1 - mean) <= eps``;
a budget up to ``2 * eps`` keeps the bound at eps by pulling the point toward the midpoint. The mean errs far less than
the midpoint in practice (the dropped masks are light variants of the kept ones): ClaimTrees-10, the v2 default head,
macro-F1 0.782 with the default budget eps (1,515 encoder pairs), 0.765 with ``prune_mass = 2 * eps`` (1,361), 0.760
for the plain midpoint at 2 * eps, 0.818 unpruned (1,700).

**Auto mode** (the default) runs exact with a hard budget of ``2 * eps`` (bound eps) and ``max_masks`` 8, and samples
what its masks cannot hold. Every mask it drops is kept, weighted, with the step it left at. If the dropped mass D
stays within ``2 * eps`` (``max_masks`` may have overflowed), the hard bound holds and the chain's mode is
``"exact"``. Otherwise all the dropped masks become a *tail* (mode ``"stratified"``): n trajectories are drawn i.i.d.
from them (a mask by weight) and go on as sample mode's do from the step their mask left. With Y a tail trajectory's
value at step k (0 before it joins), ``tau_k = S_k + D * E[Y_k]``, and by Hoeffding with a union bound over the m
steps every mean of Y is within ``h = sqrt(ln(2m / delta) / (2n))`` of its expectation with probability >= 1 - delta.
n is the least with ``D * h <= eps``, about ``N * D^2`` against sample mode's N, so the point reported (as in exact
mode, the one of the interval nearest the estimate) is within eps of tau_k, every step at once, with probability
>= 1 - delta; ``error_bounds`` gives each step's own distance. Why all of D: bounding a part H of it hard leaves the
rest ``eps - H / 2`` of half-width, and ``(D - H) / (eps - H / 2)`` grows with H once D > 2 eps. The choice depends
only on the exact pass (the backbone's values), never on the draws, so the guarantee stands. A chain whose tail would
need N / 4 or more is sampled from the start instead (every value already computed is reused). On 20 PRMBench chains
with the v5 head under its first calibration (a temperature alone), auto mode asked 909 pairs where restarting as
sample mode (estimator revision 5) asked 1,363; on 20 BIG-Bench Mistake chains 3,110 where it asked about 5,100.

**What the backbone reads.** When the backbone selects premises with a selector that has a plan (e.g. ``relevant``,
see :mod:`~ares_rerank.backbones.selection`), each mask is first projected onto the premises the backbone will keep:
masks that select the same premises are one evaluation, found with vectorized bit operations on the claims that can
matter (``plan.support``) rather than a premise list per mask. In exact mode, two masks that agree on every claim
any later step can read (and on their size, for count-sensitive selectors) have the same future and are merged.
These projections change no value: the backbone composed with its selector is the fixed function the guarantee is
about.

All distinct inputs of one step, across every chain being scored, go to the backbone in ONE call (a "wave").

**A sampled backbone** (a generative verifier: ``sampled = True``, :func:`~ares_rerank.backbones.base.is_sampled`)
is not a fixed function: its verdict for an input is a random variable in [0, 1] whose mean is the input's q. Sample
mode then memoizes nothing: each group of trajectories at a step asks ``sample_probs`` for as many fresh verdicts as
it has trajectories (all groups of a wave in one call, an input's samples together), and each trajectory takes its
own verdict v as its value and draws its acceptance from Bernoulli(v), so P(accept | mask) = q and the trajectories
stay i.i.d., which is what Hoeffding (and the betting bounds) need. A verdict memoized per input and shared by the
trajectories that reach it would make them dependent (one draw standing for all of them), and the guarantee would
not hold. Exact and auto modes would treat one verdict as q itself: they refuse such a backbone
(:func:`check_sampled_mode`). The verdicts, tokens and requests spent are counted in the chain's ``ChainScores``.

**Stopping** (``AresConfig.stopping``; default ``"betting"`` for a sampled backbone, ``"hoeffding"`` otherwise):
``"hoeffding"`` is the fixed N above; ``"betting"`` draws trajectories in batches until every step's anytime-valid
betting confidence sequence is within eps (at most N' = the Hoeffding N at delta / 2, whose bound then joins in), the
guarantee kept although the sample count looks at the data (:mod:`~ares_rerank.estimator.sequential`). Deterministic
backbones in the default modes are scored exactly as before.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from ..backbones.base import Backbone, PairBatch, call_sampler, is_sampled, premise_selector
from ..chain import Chain, ChainScores
from .config import MAX_SAMPLE_BYTES, SAMPLE_ROW_BYTES, AresConfig, check_sample_size, log_union, sample_size
from .masks import certified, exact_step, group_inputs, keep_heaviest, prune_groups, row_keys, split_masks
from .sequential import BettingStopper, batch_schedule


__all__ = ["ares_scores", "check_evaluations", "check_sampled_mode"]



class _Run:
    """One chain's estimation: its masks (rows of booleans over the claims), the memo, the step pointer, results.

    ``rows`` is ``(R, n + m)`` bool: one premise mask per trajectory (sample mode) or per weighted mask (exact mode,
    with ``weights``). The memo maps ``(step, selected claim indices)`` to the backbone's value.
    """

    def __init__(self, chain: Chain, config: AresConfig, planner: Any, sampled: bool = False) -> None:
        self.chain, self.config = chain, config
        # a sampled backbone (a generative verifier): every trajectory takes a fresh verdict, nothing is memoized
        self.sampled = sampled
        self.stopping = config.stopping_rule(sampled) if config.mode == "sample" else "hoeffding"
        self.stopper: BettingStopper | None = None
        self.verdicts = self.generated_tokens = self.requests = 0
        n, m = chain.num_base, chain.num_steps
        self.priors = config.priors_for(chain)
        self.memo: dict[tuple[int, tuple[int, ...]], float] = {}
        self.evals = [0] * m
        self.plans = [planner(chain.claims[: n + k], chain.steps[k]) for k in range(m)] if planner else [None] * m
        self.uses_count = any(plan is not None and plan.uses_count for plan in self.plans)
        self.max_rows = 16 * config.mask_budget  # masks that merge by their future can outnumber distinct inputs
        # future[k]: the claims whose acceptance can change what some step >= k reads (all, without plans)
        self.future = np.ones((m + 1, n + m), dtype=bool)
        if planner:
            self.future[m] = False
            for k in range(m - 1, -1, -1):
                if self.plans[k] is not None:
                    self.future[k] = self.future[k + 1]
                    self.future[k, list(self.plans[k].support)] = True
        self.sample, self.tail = config.mode == "sample", None
        self.start_sampling() if self.sample else self._start_exact()

    @property
    def done(self) -> bool:
        return self.k >= self.chain.num_steps

    # -- shared: from masks to backbone inputs ----------------------------------------------------------------
    def group(self, rows: np.ndarray | None = None) -> None:
        """Find the distinct backbone inputs of the current step among ``rows`` (default ``self.rows``): sets
        ``self.selected``, ``self.representative`` and ``self.inverse`` (:class:`~.masks.MaskGroups`)."""
        self.grouped = rows = self.rows if rows is None else rows
        groups = group_inputs(rows, self.chain.num_base + self.k, self.plans[self.k])
        self.selected, self.representative, self.inverse = groups.selected, groups.representative, groups.inverse

    def asked(self) -> list[tuple[list[int], int]]:
        """A sampled backbone's inputs of the current step: ``(included claim indices of a representative mask,
        trajectories in that group)`` per group, every group (fresh verdicts: nothing is memoized)."""
        upto = self.chain.num_base + self.k
        counts = np.bincount(self.inverse, minlength=len(self.selected)).tolist()
        rows, cols = np.nonzero(self.grouped[self.representative, :upto])  # row-major: each row's claims in order
        edges = np.searchsorted(rows, np.arange(len(counts) + 1)).tolist()
        cols = cols.tolist()
        return [(cols[a:b], c) for a, b, c in zip(edges, edges[1:], counts)]

    def take_verdicts(self, verdicts: list[np.ndarray]) -> None:
        """Give each trajectory of the current step its own fresh verdict: group g's ``verdicts[g]`` (one per
        trajectory of the group) go to its rows in row order."""
        fresh = np.empty(len(self.inverse))
        order = np.argsort(self.inverse, kind="stable")  # rows grouped, each group in row order
        fresh[order] = np.concatenate(verdicts) if verdicts else np.zeros(0)
        self.fresh = fresh

    def missing(self) -> list[tuple[tuple[int, tuple[int, ...]], list[int]]]:
        """``(memo key, included claim indices of a representative mask)`` for each group the memo lacks."""
        upto = self.chain.num_base + self.k
        return [
            ((self.k, chosen), np.flatnonzero(self.grouped[r, :upto]).tolist())
            for chosen, r in zip(self.selected, self.representative)
            if (self.k, chosen) not in self.memo
        ]

    def values(self) -> np.ndarray:
        """``(R,)`` the backbone's value for every row at the current step (the memo must hold them; a sampled
        backbone's: each trajectory's own verdict, :meth:`take_verdicts`)."""
        if self.sampled:
            return self.fresh
        return np.array([self.memo[(self.k, chosen)] for chosen in self.selected])[self.inverse]

    def prepare(self) -> None:
        """Group the current step's masks into backbone inputs (only the tail trajectories that have joined, in the
        tail); in exact mode prune them, and in auto mode restart as i.i.d. sampling (memo kept) as soon as the tail
        of the pruned masks would need more than ``tail_cap`` trajectories."""
        if self.tail is not None:
            self.group(self.rows[self.tail <= self.k])
            return
        self.group()
        if self.sample:
            return
        self.prune()
        if self.config.mode == "auto" and self.tail_size() > self.tail_cap:
            self.start_sampling()
            self.group()

    # -- exact mode -------------------------------------------------------------------------------------------
    def _start_exact(self) -> None:
        self.k, self.scores, self.bounds, self.dropped = 0, [], [], 0.0
        self.parts: list[tuple[int, np.ndarray, np.ndarray]] | None = []  # auto mode's dropped masks: (step, masks,
        # weights), at most 16 x max_masks x steps of them (None beyond)
        self.tail_rows = 0
        self.steps_seen: list[tuple[float, float]] = []  # per step: (kept masks' sum, mass dropped before it)
        self.tail_cap = self._tail_cap() if self.config.mode == "auto" else 0
        self.rows = np.zeros((1, self.chain.num_base + self.chain.num_steps), dtype=bool)
        self.weights = np.ones(1)
        for j, p in enumerate(self.priors):
            self._split(j, np.full(len(self.weights), float(p)))

    def _split(self, bit: int, q: np.ndarray) -> None:
        """Each mask -> (claim ``bit`` accepted, ``w*q``) and (rejected, ``w*(1-q)``); merge masks with the same
        future; keep the ``16 * max_masks`` heaviest (the rest adds to the dropped mass)."""
        rows, weights = split_masks(self.rows, self.weights, bit, q)
        future = self.future[min(self.k + 1, self.chain.num_steps)] if bit >= self.chain.num_base else self.future[0]
        if not future[: bit + 1].all() and len(rows) > 1:  # some decided claim can no longer matter: merge on the rest
            counts = rows.sum(axis=1) if self.uses_count else None
            _, first, inverse = np.unique(row_keys(rows[:, future], counts), return_index=True, return_inverse=True)
            weights = np.bincount(inverse.reshape(-1), weights=weights, minlength=len(first))
            rows = rows[first]
        rows, weights, light_rows, light_weights = keep_heaviest(rows, weights, self.max_rows)
        if len(light_rows):
            self.dropped += float(light_weights.sum())
            self._leave(light_rows, light_weights, self.k + 1 if bit >= self.chain.num_base else 0)
        self.rows, self.weights = rows, weights

    def prune(self) -> None:
        """Leave the lightest groups that would need a backbone call unevaluated while the dropped mass stays within
        the budget (at least one group is kept), then any beyond ``max_masks`` groups. Their masks leave the exact
        enumeration (:meth:`_leave`)."""
        need = [g for g, chosen in enumerate(self.selected) if (self.k, chosen) not in self.memo]
        out, self.dropped = prune_groups(self.inverse, self.weights, len(self.selected), need, self.dropped,
                                         self.config)
        if out is not None:
            self._leave(self.rows[out], self.weights[out], self.k)
            self.rows, self.weights = self.rows[~out], self.weights[~out]
            self.group()

    def _leave(self, rows: np.ndarray, weights: np.ndarray, step: int) -> None:
        """Masks (in their state before ``step``) left the exact enumeration; their mass is in ``dropped``. Exact
        mode bounds it (hard). Auto mode keeps the masks: while the dropped mass stays within 2 eps the hard bound
        holds (within eps) as in exact mode; beyond, all of them become the tail, sampled once the exact pass ends
        (for a tail count, sampling all the dropped mass beats bounding part of it once it exceeds 2 eps)."""
        if self.config.mode == "auto" and self.parts is not None:
            self.tail_rows += len(rows)
            if self.tail_rows > self.max_rows * self.chain.num_steps:
                self.parts = None  # more masks than a tail is for: a chain that needs one is sampled from the start
            else:
                self.parts.append((step, rows, weights))

    def _tail_cap(self) -> float:
        """The most trajectories a tail may have: a quarter of sample mode's N (beyond, restarting as sample mode with
        the memo asked fewer pairs: ClaimTrees-50 under the rule oracle at prior 0.95, 6.89 pairs a step against the
        tail's 7.84), within ``max_samples`` and the mask-matrix bound of sample mode."""
        chain, cfg = self.chain, self.config
        try:
            n_samples = sample_size(chain.num_steps, cfg.eps, cfg.delta)
        except ValueError:  # more than a float counts: sample mode would refuse the chain too
            n_samples = math.inf
        return min(n_samples / 4.0, cfg.max_samples,
                   MAX_SAMPLE_BYTES // (chain.num_base + chain.num_steps + SAMPLE_ROW_BYTES))

    def tail_size(self) -> float:
        """Trajectories the tail needs once the dropped mass passed 2 eps (within it, the hard bound holds): the least
        ``n`` with ``dropped * sqrt(ln(2m / delta) / (2n)) <= eps``; ``inf`` when its kept masks outgrow their bound."""
        if self.config.mode != "auto" or self.dropped <= 2.0 * self.config.eps:
            return 0
        if self.parts is None:
            return math.inf
        log_term = log_union(self.chain.num_steps, self.config.delta)
        return math.ceil(log_term / 2.0 * (self.dropped / self.config.eps) ** 2)

    # -- sample mode ------------------------------------------------------------------------------------------
    def start_sampling(self) -> None:
        """(Re)start in sample mode at step 0; values already in the memo are reused, not recomputed."""
        self.sample, self.k, self.scores, self.bounds = True, 0, [], []
        chain = self.chain
        if self.stopping == "betting":
            self._start_betting()
            return
        self.n_samples = check_sample_size(chain.num_steps, self.config, chain)  # bounded before any allocation
        self.rng = self._seeded_rng()
        self.rows = np.zeros((self.n_samples, chain.num_base + chain.num_steps), dtype=bool)
        self.rows[:, : chain.num_base] = self.rng.random((self.n_samples, chain.num_base)) < self.priors

    # -- sample mode, stopping="betting": batches of trajectories until every step is certified ----------------------
    def _start_betting(self) -> None:
        """Bound the most trajectories (N', Hoeffding at delta / 2) before anything is allocated, then draw the first
        batch (:mod:`~ares_rerank.estimator.sequential`)."""
        chain, cfg = self.chain, self.config
        cap = check_sample_size(chain.num_steps, cfg, chain, delta=cfg.delta / 2.0)  # = fallback_size, bounded
        self.stopper = BettingStopper(chain.num_steps, cfg.eps, cfg.delta, cap)
        self.rng = self._seeded_rng(2)
        self._next_batch()

    def _next_batch(self) -> None:
        chain = self.chain
        size = batch_schedule(self.stopper.samples, self.stopper.cap)
        self.k = 0
        self.rows = np.zeros((size, chain.num_base + chain.num_steps), dtype=bool)
        self.rows[:, : chain.num_base] = self.rng.random((size, chain.num_base)) < self.priors
        self.batch_values = np.zeros((size, chain.num_steps))

    def _end_batch(self) -> None:
        """After a batch's last step: feed the stopper; stop once certified (or at N'), else draw the next batch."""
        stopper = self.stopper
        stopper.update(self.batch_values)
        if stopper.certified() or stopper.samples >= stopper.cap:
            low, high = stopper.final_intervals()
            means = stopper.means()
            self.scores, self.bounds = [], []
            for lo, hi, mean in zip(low.tolist(), high.tolist(), means.tolist()):
                point, bound = certified(lo, hi, min(1.0, max(0.0, mean)), self.config.eps)
                self.scores.append(point)
                self.bounds.append(bound)
            self.n_samples = stopper.samples
        else:
            self._next_batch()

    def advance(self) -> None:
        """Use the memo's values for step ``k`` to record tau_k and move every mask / trajectory to step k+1."""
        bit = self.chain.num_base + self.k
        q = self.values()  # (R,) q per trajectory or mask
        if self.tail is not None:
            active = np.flatnonzero(self.tail <= self.k)  # a tail trajectory joins at the step its mask left
            self.tail_sums[self.k] = float(q.sum())
            self.rows[active, bit] = self.rng.random(len(active)) < q
        elif self.stopper is not None:
            self.batch_values[:, self.k] = q
            self.rows[:, bit] = self.rng.random(len(q)) < q
        elif self.sample:
            self.scores.append(float(q.mean()))
            self.rows[:, bit] = self.rng.random(self.n_samples) < q  # each trajectory draws its own Bernoulli(q)
        else:
            total, point, bound = exact_step(self.weights, q, self.dropped, self.config.eps)
            self.steps_seen.append((total, self.dropped))
            self.scores.append(point)
            self.bounds.append(bound)
            if self.k + 1 < self.chain.num_steps:
                self._split(bit, q)
        self.k += 1
        if self.done and self.stopper is not None:
            self._end_batch()  # certified: done; else a new batch restarts at step 0
        elif self.done and self.tail is not None:
            self._finish_tail()
        elif self.done and not self.sample and (n := self.tail_size()):
            self.start_sampling() if n > self.tail_cap else self._start_tail(n)

    # -- auto mode's tail: the masks the exact pass dropped, sampled ---------------------------------------------
    def _seeded_rng(self, *stream: int) -> np.random.Generator:
        """The chain's generator: seeded by ``seed`` and the chain's text, so a chain gets the same scores alone or in
        any batch; ``stream`` tells apart sample mode's draws (none) and the tail's (1)."""
        return np.random.default_rng([self.config.seed, int(self.chain.fingerprint()[:15], 16), *stream])

    def _start_tail(self, n: int) -> None:
        """Draw the tail's trajectories i.i.d. from every mask the exact pass dropped (a part with probability its
        mass, a mask within it by weight); each joins at the step its mask left and goes on as a trajectory of sample
        mode. ``n``: :meth:`tail_size`."""
        self.rng = self._seeded_rng(1)
        masses = np.array([w.sum() for _, _, w in self.parts])
        counts = self.rng.multinomial(n, masses / masses.sum())
        rows, starts = [], []
        for (step, part_rows, weights), count in zip(self.parts, counts.tolist()):
            if count:
                rows.append(part_rows[self.rng.choice(len(part_rows), size=count, p=weights / weights.sum())])
                starts.append(np.full(count, step))
        self.rows, self.tail = np.concatenate(rows), np.concatenate(starts)
        self.tail_sums, self.tail_n, self.parts = np.zeros(self.chain.num_steps), n, []
        self.k = int(self.tail.min())

    def _finish_tail(self) -> None:
        """tau_k = S_k + T * E[Y_k], where Y is a tail trajectory's value at step k (0 before it joins) and T the
        tail's mass: with probability >= 1 - delta every step's mean of Y is within ``h = sqrt(ln(2m / delta) / (2n))``
        of E[Y_k] (Hoeffding, union over the m steps), so tau_k lies in an interval of length ``2 T h <= 2 eps``
        (narrower where it meets 0 or the mass dropped before step k). Report the point nearest the estimate."""
        cfg, total_tail = self.config, self.dropped
        half = math.sqrt(log_union(self.chain.num_steps, cfg.delta) / (2.0 * self.tail_n))
        self.scores, self.bounds = [], []
        for k, (kept_sum, before) in enumerate(self.steps_seen):
            mean = float(self.tail_sums[k]) / self.tail_n
            high = kept_sum + min(total_tail * (mean + half), before)
            low = min(kept_sum + total_tail * max(0.0, mean - half), high)  # crossed only where Hoeffding failed
            estimate = min(1.0, max(0.0, kept_sum + total_tail * mean))
            point, bound = certified(low, high, estimate, cfg.eps)
            self.scores.append(point)
            self.bounds.append(bound)

    def result(self) -> ChainScores:
        cfg, sampled = self.config, self.sample or self.tail is not None
        betting = self.stopper is not None
        extra: dict[str, Any] = {}
        if betting or self.sampled:  # absent otherwise: records of deterministic sample mode stay as they were
            extra["stopping"] = self.stopping
        if self.sampled:
            extra.update(verdicts=self.verdicts, generated_tokens=self.generated_tokens, requests=self.requests)
        return ChainScores(
            step_scores=self.scores,
            evaluations=sum(self.evals),
            evaluations_per_step=list(self.evals),
            method="ares",
            mode="sample" if self.sample else "stratified" if self.tail is not None else "exact",
            eps=cfg.eps if sampled else None,
            delta=cfg.delta if sampled else None,
            num_samples=self.n_samples if self.sample else self.tail_n if self.tail is not None else None,
            error_bounds=list(self.bounds) if betting or not self.sample else None,
            chain_id=self.chain.id,
            **extra,
        )


def ares_scores(chains: Sequence[Chain], backbone: Backbone, config: AresConfig | None = None) -> list[ChainScores]:
    """Score every step of every chain with ARES; all chains advance together, one backbone call per step wave.

    Args:
        chains: The chains to score.
        backbone: Any object with ``entailment_probs(premises, hypotheses)``. When it selects premises with a
            planned selector (``backbone.selector.plan``, e.g. ``premise_selection="relevant"``), masks are projected
            onto the selected premises before any premise list is built.
        config: Estimator settings (default ``AresConfig()``).

    Returns:
        One :class:`ChainScores` per chain, in order, with ``step_scores`` = tau per step, the number of distinct
        backbone evaluations, and the certificate (eps / delta / N in sample mode, hard bounds in exact mode).
    """
    config = config or AresConfig()
    sampled = is_sampled(backbone)
    if sampled:
        check_sampled_mode(backbone, config)
    selector = premise_selector(backbone)
    planner = getattr(selector, "plan", None) if selector is not None else None
    runs = [_Run(chain, config, planner if callable(planner) else None, sampled) for chain in chains]
    while True:
        active = [run for run in runs if not run.done]
        if not active:
            break
        for run in active:
            run.prepare()
        _sample_wave(active, backbone) if sampled else _evaluate_wave(active, backbone)
        for run in active:
            run.advance()
    results = [run.result() for run in runs]
    if config.mode == "exact":
        warn_loose_bounds(results, config)
    return results


def warn_loose_bounds(results: Sequence[ChainScores], config: AresConfig) -> None:
    """A RuntimeWarning when exact mode's hard bound exceeds eps on some step: ``max_masks`` (or ``prune_mass``)
    dropped more than 2*eps of mass there, so the score is certain only to within its bound, not eps."""
    loose = [(max(r.error_bounds), r.chain_id) for r in results if r.error_bounds and max(r.error_bounds) >
             config.eps + 1e-12]
    if not loose:
        return
    worst, chain_id = max(loose, key=lambda item: item[0])
    warnings.warn(
        f"mode='exact': a step's hard error bound exceeds eps={config.eps} in {len(loose)} of {len(results)} "
        f"chains (largest {worst:.3f}, chain {chain_id!r}): the masks past max_masks="
        f"{config.mask_budget} were dropped with more than 2*eps of mass, and the score is certain only to within "
        "that bound (ChainScores.error_bounds). Raise --max-masks, or use --mode auto (it samples the dropped masks "
        "under eps / delta) or --mode sample.", RuntimeWarning, stacklevel=3)


def check_sampled_mode(backbone: Any, config: AresConfig) -> None:
    """A sampled backbone (a generative verifier) is scored in sample mode only: a ValueError naming it otherwise.

    Exact mode sums ``w * q`` over masks with q the backbone's value, and auto mode starts exact; a verdict is a
    random variable whose expectation no finite number of samples gives exactly, so neither bound would hold.
    """
    if config.mode != "sample":
        raise ValueError(
            f"backbone {backbone!r:.80} samples its verdicts (a generative verifier: sampled=True), so ARES can "
            f"certify its scores in sample mode only, not mode={config.mode!r} (exact and auto modes treat a "
            "backbone's value as exact). Pass AresConfig(mode='sample') (--mode sample); its default stopping rule "
            "for such a backbone, 'betting', stops as soon as every step is within eps."
        )


def check_evaluations(chain: Chain, step: int, evaluations: int, limit: int | None) -> None:
    """Raise a ValueError once ``evaluations`` (distinct backbone inputs asked for ``chain`` so far, up to step
    ``step``) pass ``limit`` (``AresConfig.max_evaluations``; ``None``: no limit), before the backbone is called."""
    if limit is not None and evaluations > limit:
        raise ValueError(
            f"chain {chain.id or ''!r}: ARES needs more than max_evaluations={limit} distinct backbone evaluations "
            f"by step {step + 1} of {chain.num_steps} ({evaluations} so far): a long chain under an uncertain "
            "backbone. Raise AresConfig(max_evaluations=...) (None: no limit) or eps, or score shorter chains."
        )


def _sample_wave(runs: list[_Run], backbone: Any) -> None:
    """A sampled backbone's wave: each group of trajectories at a run's current step asks as many fresh verdicts as
    it has trajectories, all groups of all runs in ONE call (so a server answers one input's samples together,
    ``n=`` in one request, where prefix caching pays). Costs (verdicts, generated tokens, requests) go to the run
    whose group asked them."""
    premises: list[list[str]] = []
    hypotheses: list[str] = []
    num_base: list[int] = []
    counts: list[int] = []
    owners: list[tuple[_Run, int]] = []  # (run, how many groups it asked)
    for run in runs:
        hypothesis, claims, n = run.chain.steps[run.k], run.chain.claims, run.chain.num_base
        groups = run.asked()
        for included, count in groups:
            premises.append([claims[i] for i in included])
            hypotheses.append(hypothesis)
            num_base.append(sum(1 for i in included if i < n))
            counts.append(count)
        run.evals[run.k] += len(groups)
        check_evaluations(run.chain, run.k, sum(run.evals), run.config.max_evaluations)
        owners.append((run, len(groups)))
    result = call_sampler(backbone, premises, hypotheses, counts, num_base)
    start = 0
    for run, size in owners:
        part = slice(start, start + size)
        run.take_verdicts(result.probs[part])
        run.verdicts += sum(counts[part])
        run.generated_tokens += sum(result.generated_tokens[part])
        run.requests += sum(result.requests[part])
        start += size


def _evaluate_wave(runs: list[_Run], backbone: Backbone) -> None:
    """Fill each run's memo for its current step with ONE backbone call over all distinct missing inputs."""
    todo: list[tuple[_Run, tuple[int, tuple[int, ...]], int]] = []
    batch = PairBatch()  # identical text across chains (e.g. duplicate candidates) is asked once
    for run in runs:
        hypothesis, claims, n = run.chain.steps[run.k], run.chain.claims, run.chain.num_base
        for key, included in run.missing():
            chosen = key[1]  # what the backbone will read: equal choices are one input, whatever else was included
            read = (tuple(claims[i] for i in chosen), hypothesis, sum(1 for i in chosen if i < n))
            index = batch.add([claims[i] for i in included], hypothesis, sum(1 for i in included if i < n), key=read)
            todo.append((run, key, index))
            run.evals[run.k] += 1
        check_evaluations(run.chain, run.k, sum(run.evals), run.config.max_evaluations)
    values = batch.call(backbone)
    for run, key, i in todo:
        run.memo[key] = float(values[i])

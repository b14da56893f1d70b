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
inputs per step (the lightest beyond that are dropped too).
The true ``tau_k`` lies in ``[S, S + D]`` with S the sum over kept masks. We report the point of that interval nearest
the kept masks' mean ``S / (1 - D)`` whose worst-case error stays within ``max(eps, D / 2)``, and that error as the hard
bound: while ``D <= eps`` (the default budget) the point is the mean itself, bound ``D * max(mean, 1 - mean) <= eps``;
a budget up to ``2 * eps`` keeps the bound at eps by pulling the point toward the midpoint. The mean errs far less than
the midpoint in practice (the dropped masks are light variants of the kept ones): ClaimTrees-10, the v2 default head,
macro-F1 0.782 with the default budget eps (1,515 encoder pairs), 0.765 with ``prune_mass = 2 * eps`` (1,361), 0.760
for the plain midpoint at 2 * eps, 0.818 unpruned (1,700). **Auto mode** runs exact and falls back to sampling
(reusing every value already computed) for a chain whose bound would exceed eps.

**What the backbone reads.** When the backbone selects premises with a selector that has a plan (e.g. ``relevant``,
see :mod:`~ares_rerank.backbones.selection`), each mask is first projected onto the premises the backbone will keep:
masks that select the same premises are one evaluation, found with vectorized bit operations on the claims that can
matter (``plan.support``) rather than a premise list per mask. In exact mode, two masks that agree on every claim
any later step can read (and on their size, for count-sensitive selectors) have the same future and are merged.
These projections change no value: the backbone composed with its selector is the fixed function the guarantee is
about.

All distinct inputs of one step, across every chain being scored, go to the backbone in ONE call (a "wave").
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .backbones.base import Backbone, PairBatch
from .backbones.selection import premise_selector
from .chain import Chain, ChainScores


__all__ = [
    "DEFAULT_MAX_SAMPLES",
    "ESTIMATOR_REVISION",
    "MAX_SAMPLE_BYTES",
    "AresConfig",
    "ares_scores",
    "check_sample_size",
    "sample_size",
]

#: Bumped whenever the same settings can give different scores, in the estimator or in a premise selector it projects
#: masks through (score caches key on it, so an upgrade never reads scores no longer given). 2: exact mode reports the
#: kept masks' mean, default prune budget eps. 3: ``relevant`` selection treats bare numbers as quantities.
#: 4: exact mode reports the point nearest the mean within max(eps, D / 2); auto falls back only beyond that.
#: 5: ``relevant`` is symbols-only again when the hypothesis has any symbol (revision 3's rule is ``relevant-words``).
#: (A new default, such as ``max_masks`` 64 -> 16, needs no bump: the score caches key on every setting.)
ESTIMATOR_REVISION = 5

_MODES = ("auto", "exact", "sample")
# Upper bound of AresConfig.max_masks: exact mode then holds at most 16 x 65,536 masks of a chain (about 100 MB of
# mask rows at 100 claims); far beyond what exact mode is for.
MAX_MASKS = 65_536
#: Default of ``AresConfig.max_samples``: trajectories per chain in sample mode (eps = 0.01 needs 26,492 at m = 10).
DEFAULT_MAX_SAMPLES = 100_000
#: Sample mode's ``(N, claims)`` boolean mask matrix may not exceed this many bytes (N trajectories x claims).
MAX_SAMPLE_BYTES = 2**30


@dataclass
class AresConfig:
    """Settings of the ARES estimator.

    The paper's main tables use ``prior=0.95, eps=delta=0.1``; its ablation found ``prior=1.0`` best for
    probabilistic backbones, which is our default (base claims are the given problem).
    """

    eps: float = field(default=0.1, metadata={"help": "Error half-width: every tau_k within eps (sampled with "
                                                      "probability >= 1 - delta, or a hard bound in exact mode)."})
    delta: float = field(default=0.1, metadata={"help": "Failure probability of the sampled eps guarantee."})
    prior: float = field(default=1.0, metadata={"help": "Prior that each base claim is sound (one float)."})
    base_priors: list[float] | None = field(
        default=None,
        metadata={"help": "One prior per base claim, overriding prior (every chain scored must have that many)."},
    )
    mode: str = field(default="auto", metadata={"help": "'exact', 'sample', or 'auto' (exact, else sample).",
                                                "choices": ["auto", "exact", "sample"]})
    seed: int = field(default=0, metadata={"help": "Seed of the trajectory sampler (same seed, same scores)."})
    max_masks: int = field(
        default=16,
        metadata={"help": "Exact mode: at most this many distinct backbone inputs per chain and step (the lightest "
                          "beyond it are dropped into the bound), and at most 16x as many masks. In auto mode a chain "
                          "that needs more goes to sampling sooner: 16 asks 25% fewer pairs than 64 on PRMBench and "
                          "19% fewer on BIG-Bench Mistake with the default head, the same on ClaimTrees. In exact mode "
                          "a larger value keeps more masks and so a tighter bound on long uncertain chains."},
    )
    prune_mass: float | None = field(
        default=None,
        metadata={"help": "Probability mass exact mode may leave unevaluated; default eps. The hard error bound "
                          "stays within max(eps, prune_mass / 2): up to 2*eps buys speed at the same bound, with "
                          "scores pulled toward the interval's midpoint. 0 = prune nothing."},
    )
    threshold: float = field(default=0.5, metadata={"help": "A step is flagged unsound iff tau_k <= threshold."})
    max_samples: int = field(
        default=DEFAULT_MAX_SAMPLES,
        metadata={"help": "Sample mode: refuse (ValueError) a chain that needs more trajectories than this, "
                          "N = ceil(ln(2m/delta) / (2 eps^2)), before allocating anything (eps = delta = 0.1 needs "
                          "265 at m = 10 steps, 841 at m = 10^6). Memory: about N x claims bytes."},
    )

    def __post_init__(self) -> None:
        for name in ("eps", "delta"):
            value = getattr(self, name)
            if not _is_number(value) or not (0.0 < float(value) < 1.0):
                raise ValueError(f"AresConfig({name}={value!r}) must be a number in (0, 1), e.g. {name}=0.1.")
        if not _is_number(self.prior):
            raise ValueError(
                f"AresConfig(prior={self.prior!r}) takes one float in [0, 1]; pass one prior per base claim as "
                "base_priors=[...]."
            )
        if self.base_priors is not None:
            if isinstance(self.base_priors, (str, bytes)) or not hasattr(self.base_priors, "__iter__"):
                raise ValueError(f"AresConfig(base_priors={self.base_priors!r}) must be a list of floats, or None.")
            self.base_priors = list(self.base_priors)
        for name, values in (("prior", [self.prior]), ("base_priors", self.base_priors or [])):
            for p in values:
                if not _is_number(p) or not (0.0 <= float(p) <= 1.0) or math.isnan(float(p)):
                    raise ValueError(
                        f"AresConfig({name}={getattr(self, name)!r}) has {p!r}: priors must lie in [0, 1] (e.g. 1.0)."
                    )
        if self.mode not in _MODES:
            raise ValueError(f"AresConfig(mode={self.mode!r}) is not one of {_MODES}.")
        masks = self.max_masks
        if not _is_int(masks) or not 1 <= masks <= MAX_MASKS:
            raise ValueError(
                f"AresConfig(max_masks={self.max_masks!r}) must be an integer in [1, {MAX_MASKS}], e.g. 16 (exact mode "
                f"holds up to 16 x max_masks masks of a chain; beyond that, use mode='sample')."
            )
        if self.prune_mass is not None and (not _is_number(self.prune_mass) or not 0.0 <= self.prune_mass < 1.0):
            raise ValueError(
                f"AresConfig(prune_mass={self.prune_mass!r}) must lie in [0, 1) (0 = prune nothing), or None for "
                "eps."
            )
        if not _is_number(self.threshold) or not (0.0 <= float(self.threshold) <= 1.0):
            raise ValueError(f"AresConfig(threshold={self.threshold!r}) must lie in [0, 1].")
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"AresConfig(seed={self.seed!r}) must be a non-negative integer, e.g. 0.")
        if not _is_int(self.max_samples) or self.max_samples < 1:
            raise ValueError(
                f"AresConfig(max_samples={self.max_samples!r}) must be a positive integer (trajectories per chain), "
                f"e.g. {DEFAULT_MAX_SAMPLES}."
            )
        # numpy scalars pass the checks above; store plain Python numbers (cache keys and JSON records read them)
        for name in ("eps", "delta", "prior", "threshold"):
            setattr(self, name, float(getattr(self, name)))
        for name in ("seed", "max_masks", "max_samples"):
            setattr(self, name, int(getattr(self, name)))
        if self.prune_mass is not None:
            self.prune_mass = float(self.prune_mass)
        if self.base_priors is not None:
            self.base_priors = [float(p) for p in self.base_priors]
        if self.mode == "sample":  # the shortest chain (one step) must fit; longer chains are checked when sampled
            check_sample_size(1, self)

    @property
    def prune_budget(self) -> float:
        """The mass exact mode may leave unevaluated: ``prune_mass``, else ``eps`` (bound ``eps``); in auto mode
        never more than ``2 * eps`` (bound ``eps``), so pruning alone never forces the fall-back to sampling."""
        budget = self.eps if self.prune_mass is None else float(self.prune_mass)
        return min(budget, 2.0 * self.eps) if self.mode == "auto" else budget

    def priors_for(self, chain: Chain) -> np.ndarray:
        """One prior per base claim of ``chain``: ``base_priors`` when given, else ``prior`` for every claim."""
        if self.base_priors is None:
            return np.full(chain.num_base, float(self.prior))
        priors = np.asarray(self.base_priors, dtype=np.float64)
        if priors.shape != (chain.num_base,):
            raise ValueError(
                f"AresConfig(base_priors=...) has {priors.size} values but chain {chain.id or ''!r} has "
                f"{chain.num_base} base claims: give exactly one prior per base claim, or base_priors=None."
            )
        return priors


def _is_number(value: Any) -> bool:
    """A real number, numpy scalars included (``np.float32(0.1)`` from a config), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _required_samples(num_steps: int, eps: float, delta: float) -> float:
    """``ln(2m/delta) / (2 eps^2)`` as a float (``inf`` where it overflows), before rounding up."""
    try:
        return math.log(2 * num_steps / delta) / (2 * eps * eps)
    except (ZeroDivisionError, OverflowError):  # eps so small that eps^2 underflows: more than any bound
        return math.inf


def sample_size(num_steps: int, eps: float = 0.1, delta: float = 0.1) -> int:
    """Trajectories needed for the guarantee on a chain of ``num_steps`` steps: ``ceil(ln(2m/delta) / (2 eps^2))``."""
    if not _is_int(num_steps) or num_steps < 1:
        raise ValueError(f"sample_size(num_steps={num_steps!r}) needs a whole number of steps, at least one.")
    for name, value in (("eps", eps), ("delta", delta)):
        if not _is_number(value) or not 0.0 < float(value) < 1.0:
            raise ValueError(f"sample_size({name}={value!r}) must be a number in (0, 1), e.g. {name}=0.1.")
    needed = _required_samples(num_steps, eps, delta)
    if not math.isfinite(needed):
        raise ValueError(f"sample_size(eps={eps!r}) needs more trajectories than a float can count: raise eps.")
    return math.ceil(needed)


def check_sample_size(num_steps: int, config: AresConfig, chain: Chain | None = None) -> int:
    """The N of sample mode for a chain of ``num_steps`` steps, or a ValueError when it exceeds the bounds.

    Two bounds, both checked before any allocation: ``config.max_samples`` trajectories, and
    :data:`MAX_SAMPLE_BYTES` for the ``(N, claims)`` mask matrix (one byte per trajectory and claim).
    """
    needed = _required_samples(num_steps, config.eps, config.delta)
    where = f"chain {chain.id!r} of {num_steps} steps" if chain is not None and chain.id is not None else (
        f"a chain of {num_steps} step{'s' if num_steps != 1 else ''}")
    if needed > config.max_samples:
        shown = f"N = {math.ceil(needed):,} trajectories" if math.isfinite(needed) else "too many trajectories to count"
        fits = math.sqrt(math.log(2 * num_steps / config.delta) / (2 * config.max_samples))
        unit = 10.0 ** (math.floor(math.log10(fits)) - 1)
        fits = math.ceil(fits / unit) * unit  # rounded up to two digits, so the value shown does fit
        why = " (auto mode fell back to sampling: exact mode's bound exceeded eps)" if config.mode == "auto" else ""
        raise ValueError(
            f"AresConfig(eps={config.eps!r}, delta={config.delta!r}) needs {shown} for {where}{why} "
            f"(N = ceil(ln(2m/delta) / (2 eps^2))), more than max_samples={config.max_samples:,}: raise eps (eps >= "
            f"{fits:.2g} fits) or delta, or raise max_samples if the memory (about N x claims bytes) and time are "
            "acceptable."
        )
    n_samples = math.ceil(needed)
    claims = num_steps if chain is None else chain.num_base + chain.num_steps
    if n_samples * claims > MAX_SAMPLE_BYTES:
        raise ValueError(
            f"sample mode for {where} and {claims} claims needs a {n_samples:,} x {claims} mask matrix "
            f"({_size(n_samples * claims)}), more than the {_size(MAX_SAMPLE_BYTES)} bound: raise eps or delta (fewer "
            "trajectories), or split the chain."
        )
    return n_samples


def _size(num_bytes: float) -> str:
    return f"{num_bytes / 2**30:.1f} GiB" if num_bytes >= 2**30 else f"{num_bytes / 2**20:.1f} MiB"


class _Run:
    """One chain's estimation: its masks (rows of booleans over the claims), the memo, the step pointer, results.

    ``rows`` is ``(R, n + m)`` bool: one premise mask per trajectory (sample mode) or per weighted mask (exact mode,
    with ``weights``). The memo maps ``(step, selected claim indices)`` to the backbone's value.
    """

    def __init__(self, chain: Chain, config: AresConfig, planner: Any) -> None:
        self.chain, self.config = chain, config
        n, m = chain.num_base, chain.num_steps
        self.priors = config.priors_for(chain)
        self.memo: dict[tuple[int, tuple[int, ...]], float] = {}
        self.evals = [0] * m
        self.plans = [planner(chain.claims[: n + k], chain.steps[k]) for k in range(m)] if planner else [None] * m
        self.uses_count = any(plan is not None and plan.uses_count for plan in self.plans)
        self.max_rows = 16 * config.max_masks  # masks that merge by their future can outnumber distinct inputs
        # future[k]: the claims whose acceptance can change what some step >= k reads (all, without plans)
        self.future = np.ones((m + 1, n + m), dtype=bool)
        if planner:
            self.future[m] = False
            for k in range(m - 1, -1, -1):
                if self.plans[k] is not None:
                    self.future[k] = self.future[k + 1]
                    self.future[k, list(self.plans[k].support)] = True
        self.sample = config.mode == "sample"
        self.start_sampling() if self.sample else self._start_exact()

    @property
    def done(self) -> bool:
        return self.k >= self.chain.num_steps

    # -- shared: from masks to backbone inputs ----------------------------------------------------------------
    def group(self) -> None:
        """Find the distinct backbone inputs of the current step among ``rows``.

        Sets ``self.selected`` (one tuple of claim indices per group), ``self.inverse`` (``(R,)`` group of each row)
        and ``self.representative`` (a row index per group, whose included claims are sent to the backbone).
        """
        rows, upto, plan = self.rows, self.chain.num_base + self.k, self.plans[self.k]
        support = None if plan is None else list(plan.support)
        counts = rows[:, :upto].sum(axis=1)
        keyed = rows[:, :upto] if plan is None else rows[:, support]
        key_counts = counts if plan is not None and plan.uses_count else None
        _, first, inverse = np.unique(_row_keys(keyed, key_counts), return_index=True, return_inverse=True)
        index: dict[tuple[int, ...], int] = {}
        selected, representative, group_of = [], [], np.empty(len(first), dtype=np.int64)
        for g, r in enumerate(first.tolist()):
            if plan is None:
                chosen = tuple(np.flatnonzero(rows[r, :upto]).tolist())
            else:
                present = [i for i, bit in zip(support, keyed[r].tolist()) if bit]
                chosen = tuple(plan.select(present, int(counts[r])))
            if chosen not in index:
                index[chosen] = len(selected)
                selected.append(chosen)
                representative.append(r)
            group_of[g] = index[chosen]
        self.selected, self.representative = selected, representative
        self.inverse = group_of[inverse.reshape(-1)]

    def missing(self) -> list[tuple[tuple[int, tuple[int, ...]], list[int]]]:
        """``(memo key, included claim indices of a representative mask)`` for each group the memo lacks."""
        upto = self.chain.num_base + self.k
        return [
            ((self.k, chosen), np.flatnonzero(self.rows[r, :upto]).tolist())
            for chosen, r in zip(self.selected, self.representative)
            if (self.k, chosen) not in self.memo
        ]

    def values(self) -> np.ndarray:
        """``(R,)`` the backbone's value for every row at the current step (the memo must hold them)."""
        return np.array([self.memo[(self.k, chosen)] for chosen in self.selected])[self.inverse]

    def prepare(self) -> None:
        """Group the current step's masks into backbone inputs; in exact mode prune them, and in auto mode restart as
        i.i.d. sampling (memo kept) when the exact bound would exceed eps."""
        self.group()
        if self.sample:
            return
        self.prune()
        if self.config.mode == "auto" and self.dropped / 2.0 > self.config.eps:
            self.start_sampling()
            self.group()

    # -- exact mode -------------------------------------------------------------------------------------------
    def _start_exact(self) -> None:
        self.k, self.scores, self.bounds, self.dropped = 0, [], [], 0.0
        self.rows = np.zeros((1, self.chain.num_base + self.chain.num_steps), dtype=bool)
        self.weights = np.ones(1)
        for j, p in enumerate(self.priors):
            self._split(j, np.full(len(self.weights), float(p)))

    def _split(self, bit: int, q: np.ndarray) -> None:
        """Each mask -> (claim ``bit`` accepted, ``w*q``) and (rejected, ``w*(1-q)``); merge masks with the same
        future; keep the ``16 * max_masks`` heaviest (the rest adds to the dropped mass)."""
        accepted = self.rows.copy()
        accepted[:, bit] = True
        rows = np.concatenate([accepted, self.rows])
        weights = np.concatenate([self.weights * q, self.weights * (1.0 - q)])
        live = weights > 0.0
        rows, weights = rows[live], weights[live]
        future = self.future[min(self.k + 1, self.chain.num_steps)] if bit >= self.chain.num_base else self.future[0]
        if not future[: bit + 1].all() and len(rows) > 1:  # some decided claim can no longer matter: merge on the rest
            counts = rows.sum(axis=1) if self.uses_count else None
            _, first, inverse = np.unique(_row_keys(rows[:, future], counts), return_index=True, return_inverse=True)
            weights = np.bincount(inverse.reshape(-1), weights=weights, minlength=len(first))
            rows = rows[first]
        if len(rows) > self.max_rows:
            order = np.argsort(-weights, kind="stable")
            self.dropped += float(weights[order[self.max_rows :]].sum())
            keep = np.sort(order[: self.max_rows])
            rows, weights = rows[keep], weights[keep]
        self.rows, self.weights = rows, weights

    def prune(self) -> None:
        """Leave the lightest groups that would need a backbone call unevaluated while the dropped mass stays within
        the budget (at least one group is kept), then any beyond ``max_masks`` groups; their masks are dropped and
        their mass bounds the error."""
        group_weights = np.bincount(self.inverse, weights=self.weights, minlength=len(self.selected))
        need = [g for g, chosen in enumerate(self.selected) if (self.k, chosen) not in self.memo]
        budget = self.config.prune_budget  # spent greedily from the first step: measured cheaper than any schedule
        order = sorted(need, key=lambda g: (group_weights[g], g))
        over = max(0, len(self.selected) - self.config.max_masks)
        drop = []
        for g in order:
            within = self.dropped + group_weights[g] <= budget
            if len(drop) + 1 >= len(self.selected) or not (within or len(drop) < over):
                break
            self.dropped += float(group_weights[g])
            drop.append(g)
        if drop:
            keep_rows = ~np.isin(self.inverse, drop)
            self.rows, self.weights = self.rows[keep_rows], self.weights[keep_rows]
            self.group()

    # -- sample mode ------------------------------------------------------------------------------------------
    def start_sampling(self) -> None:
        """(Re)start in sample mode at step 0; values already in the memo are reused, not recomputed."""
        self.sample, self.k, self.scores, self.bounds = True, 0, [], []
        chain = self.chain
        self.n_samples = check_sample_size(chain.num_steps, self.config, chain)  # bounded before any allocation
        # Seeded by the chain's text, so a chain gets the same scores alone or in any batch.
        self.rng = np.random.default_rng([self.config.seed, int(chain.fingerprint()[:15], 16)])
        self.rows = np.zeros((self.n_samples, chain.num_base + chain.num_steps), dtype=bool)
        self.rows[:, : chain.num_base] = self.rng.random((self.n_samples, chain.num_base)) < self.priors

    def advance(self) -> None:
        """Use the memo's values for step ``k`` to record tau_k and move every mask / trajectory to step k+1."""
        bit = self.chain.num_base + self.k
        q = self.values()  # (R,) q per trajectory or mask
        if self.sample:
            self.scores.append(float(q.mean()))
            self.rows[:, bit] = self.rng.random(self.n_samples) < q  # each trajectory draws its own Bernoulli(q)
        else:
            # tau_k lies in [S, S + D] (S: the kept masks' sum, D: the dropped mass). Report the point nearest the
            # kept masks' mean S / (1 - D) (what the dropped masks most resemble) whose worst-case error stays within
            # max(eps, D / 2): the mean itself while D <= eps, pulled toward the midpoint only as far as needed.
            total, dropped = float(self.weights @ q), self.dropped
            if dropped > 0.0:
                kept = float(self.weights.sum())
                mean = min(1.0, max(0.0, total / kept)) if kept > 0.0 else 0.5
                allowed = max(self.config.eps, dropped / 2.0)
                point = min(max(mean, total + dropped - allowed), total + allowed)
                bound = max(point - total, total + dropped - point)
            else:
                point, bound = min(1.0, max(0.0, total)), 0.0
            self.scores.append(point)
            self.bounds.append(bound)
            if self.k + 1 < self.chain.num_steps:
                self._split(bit, q)
        self.k += 1

    def result(self) -> ChainScores:
        cfg = self.config
        return ChainScores(
            step_scores=self.scores,
            evaluations=sum(self.evals),
            evaluations_per_step=list(self.evals),
            method="ares",
            mode="sample" if self.sample else "exact",
            eps=cfg.eps if self.sample else None,
            delta=cfg.delta if self.sample else None,
            num_samples=self.n_samples if self.sample else None,
            error_bounds=None if self.sample else list(self.bounds),
            chain_id=self.chain.id,
        )


def _row_keys(bits: np.ndarray, counts: np.ndarray | None) -> np.ndarray:
    """One hashable key per row of ``bits`` ``(R, c)`` (and ``counts`` ``(R,)``): packed bytes viewed as void."""
    parts = [np.packbits(bits, axis=1), np.ones((len(bits), 1), dtype=np.uint8)]  # the 1s keep the key non-empty
    if counts is not None:
        parts.append(counts.astype(">u4").view(np.uint8).reshape(len(bits), 4))
    packed = np.ascontiguousarray(np.concatenate(parts, axis=1))
    return packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)


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
    selector = premise_selector(backbone)
    planner = getattr(selector, "plan", None) if selector is not None else None
    runs = [_Run(chain, config, planner if callable(planner) else None) for chain in chains]
    while True:
        active = [run for run in runs if not run.done]
        if not active:
            break
        for run in active:
            run.prepare()
        _evaluate_wave(active, backbone)
        for run in active:
            run.advance()
    return [run.result() for run in runs]


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
    values = batch.call(backbone)
    for run, key, i in todo:
        run.memo[key] = float(values[i])

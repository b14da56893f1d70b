"""The ARES estimator (You et al., 2025, "Probabilistic Soundness Guarantees in LLM Reasoning Chains", Alg. 1).

For a chain with base claims ``C_1..C_n`` and steps ``C_{n+1}..C_{n+m}`` and a backbone ``E(premises, hypothesis)``:

    alpha_j ~ Bernoulli(p_j)                                   base claim j is accepted (prior p_j)
    q_k     = E({C_j : alpha_j = 1, j < n + k}, C_{n+k})       step k judged on accepted earlier claims only
    alpha_{n+k} ~ Bernoulli(q_k)                               step k accepted with its own entailment probability
    tau_k   = E_alpha[q_k]                                     the ARES score of step k

**Sample mode** draws N i.i.d. trajectories with ``N = ceil(ln(2m / delta) / (2 eps^2))``; by Hoeffding and a
union bound over the m steps, ``|tau_hat_k - tau_k| <= eps`` for every k at once with probability >= 1 - delta.
``E`` is evaluated once per distinct (mask, step) and the value reused (memoization, not resampling: each
trajectory still draws its own Bernoulli, so trajectories stay i.i.d. and the guarantee holds).

**Exact mode** propagates the distribution over distinct masks with exact weights (a mask of weight w splits into
``mask+[1]`` with ``w*q`` and ``mask+[0]`` with ``w*(1-q)``); ``tau_k = sum w*q``. At most ``max_masks`` masks are
kept, and the lightest masks are dropped while their total weight stays within ``prune_mass``. The pruned
probability mass D bounds the error: the true ``tau_k`` lies in ``[S, S + D]`` where S is the sum over kept masks,
so we report the midpoint and the hard bound ``D / 2``. **Auto mode** runs exact and falls back to
sampling (reusing every value already computed) for a chain whose bound would exceed eps.

All distinct masks of one step, across every chain being scored, go to the backbone in ONE call (a "wave").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .backbones.base import Backbone, call_backbone
from .chain import Chain, ChainScores


__all__ = ["AresConfig", "ares_scores", "sample_size"]

_MODES = ("auto", "exact", "sample")


@dataclass
class AresConfig:
    """Settings of the ARES estimator.

    The paper's main tables use ``prior=0.95, eps=delta=0.1``; its ablation found ``prior=1.0`` best for
    probabilistic backbones, which is our default (base claims are the given problem).
    """

    eps: float = field(default=0.1, metadata={"help": "Hoeffding half-width: every tau_k within eps (sample mode)."})
    delta: float = field(default=0.1, metadata={"help": "Failure probability of the eps guarantee."})
    prior: float | Sequence[float] = field(
        default=1.0, metadata={"help": "Prior that each base claim is sound: one float, or one per base claim."}
    )
    mode: str = field(default="auto", metadata={"help": "'exact', 'sample', or 'auto' (exact, else sample)."})
    seed: int = field(default=0, metadata={"help": "Seed of the trajectory sampler (same seed, same scores)."})
    max_masks: int = field(default=64, metadata={"help": "Mask budget per chain and step in exact mode."})
    prune_mass: float = field(
        default=0.01,
        metadata={"help": "Exact mode may drop masks of negligible weight up to this total mass (a hard error bound)."},
    )
    threshold: float = field(default=0.5, metadata={"help": "A step is flagged unsound iff tau_k <= threshold."})

    def __post_init__(self) -> None:
        for name in ("eps", "delta"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not (0.0 < float(value) < 1.0):
                raise ValueError(f"AresConfig({name}={value!r}) must be a number in (0, 1), e.g. {name}=0.1.")
        priors = [self.prior] if isinstance(self.prior, (int, float)) else list(self.prior)
        for p in priors:
            if not isinstance(p, (int, float)) or not (0.0 <= float(p) <= 1.0) or math.isnan(float(p)):
                raise ValueError(f"AresConfig(prior={self.prior!r}) has {p!r}: priors must lie in [0, 1] (e.g. 1.0).")
        if self.mode not in _MODES:
            raise ValueError(f"AresConfig(mode={self.mode!r}) is not one of {_MODES}.")
        if not isinstance(self.max_masks, int) or self.max_masks < 1:
            raise ValueError(f"AresConfig(max_masks={self.max_masks!r}) must be a positive integer, e.g. 64.")
        if not (0.0 <= float(self.prune_mass) < 1.0):
            raise ValueError(f"AresConfig(prune_mass={self.prune_mass!r}) must lie in [0, 1), e.g. 0.01 (or 0.0).")
        if not (0.0 <= float(self.threshold) <= 1.0):
            raise ValueError(f"AresConfig(threshold={self.threshold!r}) must lie in [0, 1].")

    def priors_for(self, chain: Chain) -> np.ndarray:
        """One prior per base claim of ``chain``."""
        if isinstance(self.prior, (int, float)):
            return np.full(chain.num_base, float(self.prior))
        priors = np.asarray(list(self.prior), dtype=np.float64)
        if priors.shape != (chain.num_base,):
            raise ValueError(
                f"AresConfig(prior=...) has {priors.size} values but chain {chain.id or ''!r} has {chain.num_base} "
                "base claims: pass one float, or exactly one prior per base claim."
            )
        return priors


def sample_size(num_steps: int, eps: float = 0.1, delta: float = 0.1) -> int:
    """Trajectories needed for the guarantee on a chain of ``num_steps`` steps: ``ceil(ln(2m/delta) / (2 eps^2))``."""
    if num_steps < 1:
        raise ValueError(f"sample_size(num_steps={num_steps}) needs at least one step.")
    return math.ceil(math.log(2 * num_steps / delta) / (2 * eps * eps))


class _Run:
    """The state of one chain's estimation: memo of backbone values, step pointer, results so far."""

    def __init__(self, chain: Chain, config: AresConfig, sample: bool) -> None:
        self.chain = chain
        self.config = config
        self.priors = config.priors_for(chain)
        self.memo: dict[tuple[int, int], float] = {}  # (step k, mask over claims [0, n+k)) -> q
        self.evals = [0] * chain.num_steps
        self.scores: list[float] = []
        self.bounds: list[float] = []
        self.sample = sample
        self.k = 0
        if sample:
            self.start_sampling()
        else:
            self._start_exact()

    @property
    def done(self) -> bool:
        return self.k >= self.chain.num_steps

    def premises(self, mask: int) -> list[str]:
        claims = self.chain.claims
        return [claims[i] for i in range(self.chain.num_base + self.k) if mask >> i & 1]

    # -- exact mode -------------------------------------------------------------------------------------------
    def _start_exact(self) -> None:
        self.masks: list[int] = [0]
        self.weights: list[float] = [1.0]
        self.dropped = 0.0
        for j, p in enumerate(self.priors):
            self._split(j, [float(p)] * len(self.masks))

    def _split(self, bit: int, q: list[float]) -> None:
        """Each mask -> (mask with claim ``bit`` accepted, w*q) and (rejected, w*(1-q)); then prune.

        Pruning drops the lightest masks while the total dropped mass stays within ``prune_mass`` (cheap: masks of
        negligible weight cost a backbone call each), then keeps at most ``max_masks`` by weight. Every dropped
        weight is added to ``self.dropped``, the hard error bound.
        """
        masks, weights = [], []
        for mask, w, qi in zip(self.masks, self.weights, q):
            if w * qi > 0.0:
                masks.append(mask | (1 << bit))
                weights.append(w * qi)
            if w * (1.0 - qi) > 0.0:
                masks.append(mask)
                weights.append(w * (1.0 - qi))
        order = sorted(range(len(masks)), key=lambda i: -weights[i])  # heaviest first; ties keep insertion order
        keep = order[: self.config.max_masks]
        self.dropped += sum(weights[i] for i in order[self.config.max_masks :])
        while len(keep) > 1 and self.dropped + weights[keep[-1]] <= self.config.prune_mass:
            self.dropped += weights[keep.pop()]
        keep.sort()  # back to insertion order: deterministic and independent of float ties
        self.masks, self.weights = [masks[i] for i in keep], [weights[i] for i in keep]

    # -- sample mode ------------------------------------------------------------------------------------------
    def start_sampling(self) -> None:
        """(Re)start in sample mode at step 0; values already in the memo are reused, not recomputed."""
        self.sample, self.k, self.scores, self.bounds = True, 0, [], []
        chain = self.chain
        self.n_samples = sample_size(chain.num_steps, self.config.eps, self.config.delta)
        # Seeded by the chain's text, so a chain gets the same scores alone or in any batch.
        self.rng = np.random.default_rng([self.config.seed, int(chain.fingerprint()[:15], 16)])
        base = self.rng.random((self.n_samples, chain.num_base)) < self.priors  # (N, n) accepted base claims
        # (N,) one bitmask per trajectory, as python ints (object dtype): chains may have more than 64 claims.
        self.traj_masks = np.array([sum(1 << int(j) for j in np.flatnonzero(row)) for row in base], dtype=object)

    def needed(self) -> list[int]:
        """Distinct masks whose value is needed for the current step."""
        if self.sample:
            return list(dict.fromkeys(self.traj_masks.tolist()))
        return self.masks

    def advance(self) -> None:
        """Use the memo's values for step ``k`` to record tau_k and move every mask / trajectory to step k+1."""
        k, bit = self.k, self.chain.num_base + self.k
        if self.sample:
            q = np.array([self.memo[(k, m)] for m in self.traj_masks.tolist()])  # (N,) q per trajectory
            self.scores.append(float(q.mean()))
            accepted = self.rng.random(self.n_samples) < q  # each trajectory draws its own Bernoulli(q)
            self.traj_masks = np.where(accepted, self.traj_masks | (1 << bit), self.traj_masks)
        else:
            q = [self.memo[(k, m)] for m in self.masks]
            bound = self.dropped / 2.0
            tau = sum(w * qi for w, qi in zip(self.weights, q)) + bound
            self.scores.append(min(1.0, max(0.0, tau)))
            self.bounds.append(bound)
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


def ares_scores(chains: Sequence[Chain], backbone: Backbone, config: AresConfig | None = None) -> list[ChainScores]:
    """Score every step of every chain with ARES; all chains advance together, one backbone call per step wave.

    Args:
        chains: The chains to score.
        backbone: Any object with ``entailment_probs(premises, hypotheses)``.
        config: Estimator settings (default ``AresConfig()``).

    Returns:
        One :class:`ChainScores` per chain, in order, with ``step_scores`` = tau per step, the number of distinct
        backbone evaluations, and the certificate (eps / delta / N in sample mode, pruning bounds in exact mode).
    """
    config = config or AresConfig()
    runs = [_Run(chain, config, sample=config.mode == "sample") for chain in chains]
    while True:
        active = [run for run in runs if not run.done]
        if not active:
            break
        for run in active:
            if config.mode == "auto" and not run.sample and run.dropped / 2.0 > config.eps:
                run.start_sampling()  # exact would be looser than eps: restart as i.i.d. sampling, memo kept
        _evaluate_wave(active, backbone)
        for run in active:
            run.advance()
    return [run.result() for run in runs]


def _evaluate_wave(runs: list[_Run], backbone: Backbone) -> None:
    """Fill each run's memo for its current step with ONE backbone call over all distinct missing (mask, step)."""
    todo: list[tuple[_Run, int]] = []
    pair_index: dict[tuple[tuple[str, ...], str, int], int] = {}
    premises: list[list[str]] = []
    hypotheses: list[str] = []
    num_base: list[int] = []  # how many of each premise list are base claims (PRMs render them apart)
    slot: list[int] = []
    for run in runs:
        hypothesis = run.chain.steps[run.k]
        base_bits = (1 << run.chain.num_base) - 1
        for mask in run.needed():
            if (run.k, mask) in run.memo:
                continue
            included = run.premises(mask)
            n_base = (mask & base_bits).bit_count()
            key = (tuple(included), hypothesis, n_base)
            if key not in pair_index:  # identical text across chains (e.g. duplicate candidates): asked once
                pair_index[key] = len(hypotheses)
                premises.append(included)
                hypotheses.append(hypothesis)
                num_base.append(n_base)
            todo.append((run, mask))
            slot.append(pair_index[key])
            run.evals[run.k] += 1
    values = call_backbone(backbone, premises, hypotheses, num_base)
    for (run, mask), i in zip(todo, slot):
        run.memo[(run.k, mask)] = float(values[i])

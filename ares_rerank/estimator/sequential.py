"""Anytime-valid bounds for sample mode's ``stopping="betting"``: stop sampling trajectories once every step is
certified, with the guarantee kept (Waudby-Smith & Ramdas, 2024, "Estimating means of bounded random variables by
betting", JRSS-B, Theorem 3: the hedged capital process with predictable plug-in bets).

**Why.** Sample mode's Hoeffding N (265 at m = 10, eps = delta = 0.1) holds whatever the values' spread. Where the
trajectories' values at a step agree (a generative verifier whose ``P(Yes | rationale)`` barely moves), far fewer
suffice, but a bound that adapts to the variance must stay valid although the number of samples is chosen by looking
at them. A *confidence sequence* is: with probability >= 1 - alpha it holds at every sample count at once, so
checking it after every batch and stopping at the first certified check keeps the guarantee.

**The bound.** For a step, X_1, X_2, ... in [0, 1] are the trajectories' values (i.i.d., mean tau). For a candidate
mean m, two bettors grow their capital ``K+_t(m) = prod_i (1 + l+_i (X_i - m))`` and ``K-_t(m) = prod_i
(1 - l-_i (X_i - m))``; both are nonnegative martingales of mean 1 when m = tau, so by Ville's inequality the
hedged ``max(K+, K-) / 2`` passes ``1 / alpha`` with probability at most alpha, ever. The candidates whose
capital passed it (at any check: the running intersection) are excluded; the rest form an interval. The bets are
predictable: ``l_i = sqrt(2 ln(2 / alpha) / (s2_{i-1} i ln(1 + i)))`` from the values before i (``s2``: the
running variance with a prior observation of 1/4), capped at ``1 / (2 m)`` and ``1 / (2 (1 - m))``. Candidates are
a grid of cell midpoints (:func:`grid_size`); the interval reported is widened to the cells' edges, so it is never
narrower than the continuous one (the accepted set is an interval: ``K+`` falls and ``K-`` rises in m).

**The rule** (:class:`BettingStopper`). Each of the m steps gets a confidence sequence at ``alpha = delta / (2m)``;
trajectories come in batches (32, then 16 more or a quarter more each time) and after each batch the steps'
intervals are checked: once all are at most 2 eps wide, the run stops and each step reports the point of its
interval nearest the mean (within eps of both ends). If no check certifies by ``N' = ceil(ln(4m / delta) / (2
eps^2))`` trajectories (Hoeffding at delta / 2), the run stops there and each step reports the intersection of its
confidence sequence and Hoeffding's interval at N' (half-width <= eps). The union bound over the steps and the two
bounds gives: every reported step within its bound (<= eps) of tau_k, all at once, with probability >= 1 - delta.

Measured (betting-rule tests, 500 seeds each): a verifier with ``P(Yes | rationale)`` within 0.05 of 0.9 or 0.1
certifies a 10-step chain at eps = delta = 0.1 after 64 trajectories (Hoeffding's N: 265); values of full spread
(Bernoulli(1/2)) take the N' = 300 fallback.
"""

from __future__ import annotations

import math

import numpy as np

from .config import log_union


__all__ = ["grid_size", "BettingStopper", "batch_schedule", "fallback_size"]

#: Candidate means per step, per unit of 1 / eps (at least 200): cells of eps / 20, so widening the interval to the
#: cells' edges costs at most a tenth of the 2 eps it must fit in.
GRID_PER_INVERSE_EPS, MIN_GRID = 20, 200
#: Trajectories of the first batch, and the least a later batch adds.
FIRST_BATCH, MIN_BATCH = 32, 16
_TRUNCATION = 0.5  # the bets' cap, times 1 / m or 1 / (1 - m): the paper's choice


def grid_size(eps: float) -> int:
    """Candidate means per step for a half-width ``eps`` (cells of eps / 20, at least :data:`MIN_GRID`)."""
    return max(MIN_GRID, math.ceil(GRID_PER_INVERSE_EPS / eps))


def fallback_size(num_steps: int, eps: float, delta: float) -> int:
    """N' = ``ceil(ln(4m / delta) / (2 eps^2))``: where the rule stops at the latest (Hoeffding at delta / 2)."""
    return math.ceil(log_union(num_steps, delta / 2.0) / (2.0 * eps * eps))


def batch_schedule(done: int, cap: int) -> int:
    """How many trajectories the next batch adds after ``done`` (first 32, then max(16, done / 4)), within ``cap``."""
    size = FIRST_BATCH if done == 0 else max(MIN_BATCH, done // 4)
    return max(0, min(size, cap - done))


class BettingStopper:
    """The betting rule for one chain of ``num_steps`` steps (see the module docstring).

    Feed it each batch's values with :meth:`update` (``(batch, num_steps)``, in [0, 1]) and ask :meth:`result`.

    Args:
        num_steps: m, the chain's steps.
        eps, delta: The guarantee: every step within eps of its tau with probability >= 1 - delta.
        cap: N', the most trajectories (:func:`fallback_size`).
    """

    def __init__(self, num_steps: int, eps: float, delta: float, cap: int) -> None:
        self.m, self.eps, self.delta, self.cap = num_steps, eps, delta, cap
        self.alpha = delta / (2.0 * num_steps)
        self.log_threshold = math.log(1.0 / self.alpha)
        self.log_bet = math.log(2.0 / self.alpha)
        self.size = grid_size(eps)
        self.grid = (np.arange(self.size) + 0.5) / self.size
        self.cap_up = _TRUNCATION / self.grid  # the bets' caps per candidate mean
        self.cap_down = _TRUNCATION / (1.0 - self.grid)
        self.log_up = np.zeros((num_steps, self.size))
        self.log_down = np.zeros((num_steps, self.size))
        self.excluded = np.zeros((num_steps, self.size), dtype=bool)
        self.t = 0
        self.sums = np.zeros(num_steps)
        self.mean_prior = np.full(num_steps, 0.5)  # running mean and variance, with one prior observation each
        self.var_sum = np.full(num_steps, 0.25)

    @property
    def samples(self) -> int:
        """Trajectories seen so far."""
        return self.t

    def update(self, values: np.ndarray) -> None:
        """Add one batch: ``values[i, k]`` is trajectory i's value at step k (rows in the order they were drawn)."""
        x = np.asarray(values, dtype=np.float64)
        b = len(x)
        if b == 0:
            return
        t = self.t + np.arange(1, b + 1)  # the rows' indices in the whole sequence, 1-based
        # running mean (prior 1/2 as one observation) and variance (prior 1/4) after each row, then shifted by one:
        # the bet of row i reads only the rows before it (predictable)
        mean_after = (self.mean_prior * (self.t + 1) + np.cumsum(x, axis=0)) / (t[:, None] + 1)
        var_after = (self.var_sum + np.cumsum((x - mean_after) ** 2, axis=0)) / (t[:, None] + 1)
        var_before = np.vstack([self.var_sum / (self.t + 1), var_after[:-1]])
        bets = np.sqrt(2.0 * self.log_bet / (np.maximum(var_before, 1e-12) * t[:, None] * np.log1p(t)[:, None]))
        diff = x[:, :, None] - self.grid[None, None, :]  # (b, m, grid)
        up = np.minimum(bets[:, :, None], self.cap_up[None, None, :])
        down = np.minimum(bets[:, :, None], self.cap_down[None, None, :])
        self.log_up += np.log1p(up * diff).sum(axis=0)
        self.log_down += np.log1p(-down * diff).sum(axis=0)
        hedged = np.maximum(self.log_up, self.log_down) + math.log(0.5)  # max: the kept set stays an interval
        self.excluded |= hedged >= self.log_threshold
        self.mean_prior = mean_after[-1]
        self.var_sum = var_after[-1] * (t[-1] + 1)
        self.sums += x.sum(axis=0)
        self.t += b

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` per step: the confidence sequences' running intersection, widened to the grid cells'
        edges (a step with every candidate excluded, which only a failed sequence or a sub-cell interval gives, is
        reported as [0, 1]: uncertified, never a false certificate)."""
        keep = ~self.excluded
        anything = keep.any(axis=1)
        first = np.argmax(keep, axis=1)
        last = self.size - 1 - np.argmax(keep[:, ::-1], axis=1)
        # the truth lies above the excluded candidate just below the kept ones (the kept set is an interval at every
        # check, and contains the truth whenever the sequence holds), and below the one just above them
        low = np.where(anything & (first > 0), (first - 0.5) / self.size, 0.0)
        high = np.where(anything & (last < self.size - 1), (last + 1.5) / self.size, 1.0)
        return low, high

    def certified(self) -> bool:
        """Whether every step's interval is at most 2 eps wide (the run may stop)."""
        low, high = self.intervals()
        return bool(np.all(high - low <= 2.0 * self.eps))

    def means(self) -> np.ndarray:
        """The plain mean of every step's values so far."""
        return self.sums / max(self.t, 1)

    def final_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """The intervals the run reports: the confidence sequences', intersected with Hoeffding's at delta / 2 once
        the run reached N' (:func:`fallback_size`)."""
        low, high = self.intervals()
        if self.t >= self.cap:
            half = math.sqrt(log_union(self.m, self.delta / 2.0) / (2.0 * self.t))
            means = self.means()
            low, high = np.maximum(low, means - half), np.minimum(high, means + half)
            high = np.maximum(high, low)  # crossed only where one of the bounds failed
        return low, high

"""ARES's settings: :class:`AresConfig` (eps, delta, priors, mode, pruning budget) and the Hoeffding sample size.

What the estimator (:mod:`~ares_rerank.estimator`) is asked to guarantee, checked once where it is built: every
setting is validated with a message that names it and the fix, numpy scalars are stored as plain Python numbers,
and sample mode's trajectory count ``N = ceil(ln(2m / delta) / (2 eps^2))`` is bounded (:func:`check_sample_size`)
before anything is allocated.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from collections.abc import Mapping, Set as AbstractSet
from typing import Any

import numpy as np

from ..chain import DEFAULT_THRESHOLD, Chain, check_threshold
from ..utils.checks import is_finite_number, is_int, is_number


__all__ = [
    "DEFAULT_MAX_SAMPLES",
    "DEFAULT_MAX_STEPS",
    "MAX_MASKS",
    "MAX_SAMPLE_BYTES",
    "SAMPLE_ROW_BYTES",
    "STOPPING_RULES",
    "AresConfig",
    "check_sample_size",
    "flag_threshold",
    "is_int",
    "is_number",
    "log_union",
    "sample_size",
]

_MODES = ("auto", "exact", "sample")
#: Sample mode's stopping rules (``AresConfig.stopping``): a fixed Hoeffding N, or anytime-valid betting bounds
#: checked as trajectories arrive (:mod:`~ares_rerank.estimator.sequential`).
STOPPING_RULES = ("hoeffding", "betting")
# Upper bound of AresConfig.max_masks: exact mode then holds at most 16 x 65,536 masks of a chain (about 100 MB of
# mask rows at 100 claims); far beyond what exact mode is for.
MAX_MASKS = 65_536
#: Default of ``AresConfig.max_evaluations``: distinct backbone evaluations ARES may ask for one chain.
DEFAULT_MAX_EVALUATIONS = 20_000
#: Default of ``AresConfig.max_steps``: steps per chain any method accepts. The estimator's working memory grows with
#: steps x (claims + steps) and a baseline's premise lists with steps^2, so a chain is refused before either is
#: allocated (a 100,000-step completion would take about 10 GB).
DEFAULT_MAX_STEPS = 4096
#: Default of ``AresConfig.max_samples``: trajectories per chain in sample mode (eps = 0.01 needs 26,492 at m = 10).
DEFAULT_MAX_SAMPLES = 100_000
#: Sample mode's memory may not exceed this many bytes: the ``(N, claims)`` boolean mask matrix and
#: :data:`SAMPLE_ROW_BYTES` of temporaries per trajectory.
MAX_SAMPLE_BYTES = 2**30
#: Bytes per trajectory besides its mask row: float64 draws, int64 row sums and indices (measured: a 1-step chain at
#: N = 16.6 M peaked at 683 MB, 41 bytes a trajectory).
SAMPLE_ROW_BYTES = 40


def _as_float(value: Any) -> float:
    """A checked number as the float it was written as: a numpy float of less than double precision by its shortest
    decimal (``np.float32(0.95)`` is 0.95, not 0.949999988079071: the same config, scores and cache keys as 0.95)."""
    if isinstance(value, np.floating) and value.dtype.itemsize < 8:
        return float(str(value))
    return float(value)


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
        metadata={"help": "One prior per base claim, overriding prior (every chain scored must have that many; "
                          "stored as a tuple)."},
    )
    mode: str = field(default="auto", metadata={"help": "'exact', 'sample', or 'auto' (exact; what it drops is "
                                                        "sampled once it passes 2*eps of mass; else sample).",
                                                "choices": ["auto", "exact", "sample"]})
    seed: int = field(default=0, metadata={"help": "Seed of the trajectory sampler (same seed, same scores)."})
    max_masks: int | None = field(
        default=None,
        metadata={"help": "At most this many distinct backbone inputs per chain and step in the exact pass (the "
                          "lightest beyond it are dropped), and at most 16x as many masks; default 16 in exact mode, "
                          "8 in auto mode. Exact mode bounds what it drops (a larger value: a tighter bound on long "
                          "uncertain chains); auto mode samples it once it passes 2*eps of mass (a tail of "
                          "trajectories, the chain's mode then reads 'stratified'): with the default head, 8 asked 12% "
                          "fewer pairs than 16 on 20 PRMBench chains, 17% more on 20 BIG-Bench Mistake chains (968 "
                          "against 970 in all), the same on ClaimTrees (the rule oracle at prior 0.95 on "
                          "ClaimTrees-20: 21% more)."},
    )
    prune_mass: float | None = field(
        default=None,
        metadata={"help": "Probability mass the exact pass may leave unevaluated under a hard bound; default eps in "
                          "exact mode, 2*eps in auto mode (at most 2*eps there). The hard error bound stays within "
                          "max(eps, prune_mass / 2): up to 2*eps buys speed at the same bound, with scores pulled "
                          "toward the interval's midpoint (with the default head in auto mode, 2*eps asked 11% fewer "
                          "pairs than eps on 20 PRMBench chains, 15% fewer on 20 BIG-Bench Mistake chains). 0 = prune "
                          "nothing."},
    )
    # Deprecated (one release): the estimator never read it; the flag threshold belongs to what flags steps
    # (AresReranker(threshold=), RerankConfig, ChainScores.flags). Given here, it warns and is forwarded by
    # flag_threshold; add_config_arguments leaves it out (--threshold is RerankConfig's).
    threshold: float | None = field(default=None, metadata={
        "help": "Deprecated: pass threshold to AresReranker / RerankConfig (a step is flagged iff tau_k <= it)."})
    max_samples: int = field(
        default=DEFAULT_MAX_SAMPLES,
        metadata={"help": "Sample mode: refuse (ValueError) a chain that needs more trajectories than this, "
                          "N = ceil(ln(2m/delta) / (2 eps^2)), before allocating anything (eps = delta = 0.1 needs "
                          "265 at m = 10 steps, 841 at m = 10^6). Memory: about N x (claims + 40) bytes."},
    )

    stopping: str | None = field(
        default=None,
        metadata={"help": "Sample mode's stopping rule: 'hoeffding' (N = ceil(ln(2m/delta) / (2 eps^2)) trajectories, "
                          "fixed) or 'betting' (trajectories in batches until every step's anytime-valid betting "
                          "confidence sequence is within eps, at most the Hoeffding N at delta/2: far fewer where the "
                          "values agree, e.g. 64 instead of 265 at m = 10); None = 'betting' for a sampled backbone "
                          "(a generative verifier), 'hoeffding' otherwise.",
                "choices": ["hoeffding", "betting"]},
    )

    max_steps: int | None = field(
        default=DEFAULT_MAX_STEPS,
        metadata={"help": "Refuse (ValueError; the reranker, rewards and filters: an unscorable completion) a chain "
                          "of more steps than this, before any memory is taken: the estimator's working memory grows "
                          "with steps x (claims + steps) (about 17 MB at 4,096 steps, 10 GB at 100,000). None = no "
                          "limit."},
    )

    max_evaluations: int | None = field(
        default=DEFAULT_MAX_EVALUATIONS,
        metadata={"help": "Refuse (ValueError) a chain once ARES has asked the backbone for more than this many "
                          "distinct evaluations on it, so that one long chain under an uncertain backbone cannot run "
                          "for hours (a 1,000-step chain in sample mode asked 490,000); None = no limit. Our "
                          "benchmarks stay under 400 a chain (ClaimTrees-60, PRMBench, BIG-Bench Mistake, recipes)."},
    )

    def __post_init__(self) -> None:
        for name in ("eps", "delta"):
            value = getattr(self, name)
            if not is_finite_number(value) or not (0.0 < float(value) < 1.0):
                raise ValueError(f"AresConfig({name}={value!r}) must be a number in (0, 1), e.g. {name}=0.1.")
        if not is_number(self.prior):
            raise ValueError(
                f"AresConfig(prior={self.prior!r}) takes one float in [0, 1]; pass one prior per base claim as "
                "base_priors=[...]."
            )
        if self.base_priors is not None:
            if (isinstance(self.base_priors, (str, bytes, Mapping, AbstractSet))
                    or not hasattr(self.base_priors, "__iter__")):  # a set or dict has no order (a dict: its keys)
                raise ValueError(f"AresConfig(base_priors={self.base_priors!r}) must be a list of floats, one per base "
                                 "claim in order, or None.")
            self.base_priors = list(self.base_priors)
        for name, values in (("prior", [self.prior]), ("base_priors", self.base_priors or [])):
            for p in values:
                if not is_finite_number(p) or not (0.0 <= float(p) <= 1.0):
                    raise ValueError(
                        f"AresConfig({name}={getattr(self, name)!r}) has {p!r}: priors must lie in [0, 1] (e.g. 1.0)."
                    )
        if self.mode not in _MODES:
            raise ValueError(f"AresConfig(mode={self.mode!r}) is not one of {_MODES}.")
        if self.stopping is not None and self.stopping not in STOPPING_RULES:
            raise ValueError(f"AresConfig(stopping={self.stopping!r}) is not one of {STOPPING_RULES} (or None: "
                             "'betting' for a sampled backbone, 'hoeffding' otherwise).")
        masks = self.max_masks
        if masks is not None and (not is_int(masks) or not 1 <= masks <= MAX_MASKS):
            raise ValueError(
                f"AresConfig(max_masks={self.max_masks!r}) must be an integer in [1, {MAX_MASKS}], e.g. 16 (exact mode "
                f"holds up to 16 x max_masks masks of a chain; beyond that, use mode='sample'), or None for the mode's "
                "default."
            )
        if self.prune_mass is not None and (not is_number(self.prune_mass) or not 0.0 <= self.prune_mass < 1.0):
            raise ValueError(
                f"AresConfig(prune_mass={self.prune_mass!r}) must lie in [0, 1) (0 = prune nothing), or None for "
                "eps."
            )
        if self.threshold is not None:
            if not is_finite_number(self.threshold) or not (0.0 <= float(self.threshold) <= 1.0):
                raise ValueError(f"AresConfig(threshold={self.threshold!r}) must lie in [0, 1].")
            if self.__dict__.get("_warned_threshold") != self.threshold:  # once, not at every later field set
                object.__setattr__(self, "_warned_threshold", self.threshold)
                warnings.warn(f"AresConfig(threshold={self.threshold!r}) is deprecated (the estimator never reads "
                              f"it): pass AresReranker(threshold={self.threshold!r}) or RerankConfig(threshold=...); "
                              "it is forwarded to the reranker, early rejection and the rewards for now.",
                              DeprecationWarning, stacklevel=3)
            self.threshold = _as_float(self.threshold)
        if not is_int(self.seed) or self.seed < 0:
            raise ValueError(f"AresConfig(seed={self.seed!r}) must be a non-negative integer, e.g. 0.")
        if self.max_evaluations is not None and (not is_int(self.max_evaluations) or self.max_evaluations < 1):
            raise ValueError(
                f"AresConfig(max_evaluations={self.max_evaluations!r}) must be a positive integer (backbone "
                f"evaluations per chain), e.g. {DEFAULT_MAX_EVALUATIONS}, or None for no limit."
            )
        if self.max_steps is not None and (not is_int(self.max_steps) or self.max_steps < 1):
            raise ValueError(
                f"AresConfig(max_steps={self.max_steps!r}) must be a positive integer (steps per chain), e.g. "
                f"{DEFAULT_MAX_STEPS}, or None for no limit."
            )
        if not is_int(self.max_samples) or self.max_samples < 1:
            raise ValueError(
                f"AresConfig(max_samples={self.max_samples!r}) must be a positive integer (trajectories per chain), "
                f"e.g. {DEFAULT_MAX_SAMPLES}."
            )
        # numpy scalars pass the checks above; store plain Python numbers (cache keys and JSON records read them)
        for name in ("eps", "delta", "prior"):
            setattr(self, name, _as_float(getattr(self, name)))
        for name in ("seed", "max_samples"):
            setattr(self, name, int(getattr(self, name)))
        if self.max_masks is not None:
            self.max_masks = int(self.max_masks)
        if self.max_evaluations is not None:
            self.max_evaluations = int(self.max_evaluations)
        if self.max_steps is not None:
            self.max_steps = int(self.max_steps)
        if self.prune_mass is not None:
            self.prune_mass = _as_float(self.prune_mass)
        if self.base_priors is not None:  # a tuple: changed in place, a list would skip these checks
            self.base_priors = tuple(_as_float(p) for p in self.base_priors)
        if self.mode == "sample":  # the shortest chain (one step) must fit; longer chains are checked when sampled
            check_sample_size(1, self)
        object.__setattr__(self, "_checked", True)

    def __setattr__(self, name: str, value: Any) -> None:
        """A field set after construction is checked like a constructor argument (``config.eps = 5.0`` raises and
        leaves the config as it was), so a config the estimator reads is always a valid one."""
        if name not in self.__dataclass_fields__ or not self.__dict__.get("_checked", False):
            object.__setattr__(self, name, value)
            return
        old = getattr(self, name)
        object.__setattr__(self, name, value)
        object.__setattr__(self, "_checked", False)  # __post_init__'s own normalising writes go straight through
        try:
            self.__post_init__()
        except BaseException:
            object.__setattr__(self, name, old)
            object.__setattr__(self, "_checked", True)
            raise

    @property
    def mask_budget(self) -> int:
        """Distinct inputs the exact pass asks per chain and step: ``max_masks``, else 16 in exact mode (what it
        drops is bounded, so more masks is a tighter bound) and 8 in auto mode (what it drops is sampled)."""
        if self.max_masks is not None:
            return self.max_masks
        return 8 if self.mode == "auto" else 16

    @property
    def prune_budget(self) -> float:
        """The mass the exact pass may leave unevaluated under a hard bound: ``prune_mass``, else ``eps`` (bound
        ``eps``); in auto mode ``2 * eps`` by default and never more (bound ``eps``; once ``max_masks`` pushes the
        dropped mass past it, every dropped mask is sampled instead)."""
        if self.mode != "auto":
            return self.eps if self.prune_mass is None else float(self.prune_mass)
        return 2.0 * self.eps if self.prune_mass is None else min(float(self.prune_mass), 2.0 * self.eps)

    def stopping_rule(self, sampled: bool) -> str:
        """The stopping rule sample mode uses: ``stopping``, else ``"betting"`` for a sampled backbone (each
        verdict costs a generated rationale) and ``"hoeffding"`` for a deterministic one."""
        if self.stopping is not None:
            return self.stopping
        return "betting" if sampled else "hoeffding"

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


def _required_samples(num_steps: int, eps: float, delta: float) -> float:
    """``ln(2m/delta) / (2 eps^2)`` as a float (``inf`` where it overflows), before rounding up."""
    try:
        return log_union(num_steps, delta) / (2 * eps * eps)
    except (ZeroDivisionError, OverflowError):  # eps so small that eps^2 underflows: more than any bound
        return math.inf


def log_union(num_steps: int, delta: float) -> float:
    """``ln(2m/delta)``, the union-bound term of a Hoeffding guarantee on ``m`` steps at once; also where ``2m/delta``
    overflows (a subnormal delta): ``ln(2m) - ln(delta)`` then."""
    ratio = 2 * num_steps / delta
    return math.log(ratio) if math.isfinite(ratio) else math.log(2 * num_steps) - math.log(delta)


def sample_size(num_steps: int, eps: float = 0.1, delta: float = 0.1) -> int:
    """Trajectories needed for the guarantee on a chain of ``num_steps`` steps: ``ceil(ln(2m/delta) / (2 eps^2))``."""
    if not is_int(num_steps) or num_steps < 1:
        raise ValueError(f"sample_size(num_steps={num_steps!r}) needs a whole number of steps, at least one.")
    for name, value in (("eps", eps), ("delta", delta)):
        if not is_finite_number(value) or not 0.0 < float(value) < 1.0:
            raise ValueError(f"sample_size({name}={value!r}) must be a number in (0, 1), e.g. {name}=0.1.")
    needed = _required_samples(num_steps, eps, delta)
    if not math.isfinite(needed):
        raise ValueError(f"sample_size(eps={eps!r}) needs more trajectories than a float can count: raise eps.")
    return math.ceil(needed)


def check_sample_size(num_steps: int, config: AresConfig, chain: Chain | None = None,
                      delta: float | None = None) -> int:
    """The N of sample mode for a chain of ``num_steps`` steps, or a ValueError when it exceeds the bounds.

    ``delta`` (default ``config.delta``) is the failure probability the N is for (the betting rule's Hoeffding
    fallback takes half of ``config.delta``).

    Two bounds, both checked before any allocation: ``config.max_samples`` trajectories, and
    :data:`MAX_SAMPLE_BYTES` for the ``(N, claims)`` mask matrix (one byte per trajectory and claim) with
    :data:`SAMPLE_ROW_BYTES` of temporaries per trajectory.
    """
    delta = config.delta if delta is None else delta
    needed = _required_samples(num_steps, config.eps, delta)
    where = f"chain {chain.id!r} of {num_steps} steps" if chain is not None and chain.id is not None else (
        f"a chain of {num_steps} step{'s' if num_steps != 1 else ''}")
    if needed > config.max_samples:
        shown = f"N = {math.ceil(needed):,} trajectories" if math.isfinite(needed) else "too many trajectories to count"
        fits = math.sqrt(log_union(num_steps, delta) / (2 * config.max_samples))
        unit = 10.0 ** (math.floor(math.log10(fits)) - 1)
        fits = math.ceil(fits / unit) * unit  # rounded up to two digits, so the value shown does fit
        why = " (auto mode fell back to sampling: its exact pass left more than it could sample)" if (
            config.mode == "auto") else ""
        raise_eps = f"raise eps (eps >= {fits:.2g} fits) or delta" if fits < 1.0 else "raise delta"
        raise ValueError(
            f"AresConfig(eps={config.eps!r}, delta={config.delta!r}) needs {shown} for {where}{why} "
            f"(N = ceil(ln(2m/delta) / (2 eps^2))), more than max_samples={config.max_samples:,}: {raise_eps}, or "
            f"raise max_samples if the memory (about N x (claims + {SAMPLE_ROW_BYTES}) bytes) and time are acceptable."
        )
    n_samples = math.ceil(needed)
    claims = num_steps if chain is None else chain.num_base + chain.num_steps
    if n_samples * (claims + SAMPLE_ROW_BYTES) > MAX_SAMPLE_BYTES:
        raise ValueError(
            f"sample mode for {where} and {claims} claims needs a {n_samples:,} x {claims} mask matrix and "
            f"{SAMPLE_ROW_BYTES} bytes a trajectory of temporaries ({_size(n_samples * (claims + SAMPLE_ROW_BYTES))}), "
            f"more than the {_size(MAX_SAMPLE_BYTES)} bound: raise eps or delta (fewer trajectories), or split the "
            "chain."
        )
    return n_samples


def _size(num_bytes: float) -> str:
    return f"{num_bytes / 2**30:.1f} GiB" if num_bytes >= 2**30 else f"{num_bytes / 2**20:.1f} MiB"


def flag_threshold(config: AresConfig | None, threshold: Any = None, where: str = "threshold") -> float:
    """The threshold that flags steps (tau <= it): ``threshold`` when given, else a deprecated
    ``AresConfig(threshold=)``'s (forwarded for one release), else :data:`~ares_rerank.chain.DEFAULT_THRESHOLD`.

    Raises:
        ValueError: ``threshold`` is not a number in [0, 1], or it and the config's are both given and differ.
    """
    legacy = None if config is None else config.threshold
    if threshold is None:
        return DEFAULT_THRESHOLD if legacy is None else legacy
    threshold = check_threshold(threshold, where)
    if legacy is not None and legacy != threshold:
        shown = f"{where}={threshold}" + (")" if "(" in where else "")
        raise ValueError(f"{shown} and AresConfig(threshold={legacy}) disagree: pass the threshold once "
                         "(AresConfig's is deprecated).")
    return threshold

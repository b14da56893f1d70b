"""Published generative verifiers as sampled ARES backbones: one module per family, each rendering, sampling and
reading its verdict as the family's published code does (:mod:`~ares_rerank.backbones.generative` holds the
engines, the sampled-backbone protocol they share and the configurable ``kind="generative"``).

- ``prm-genprm`` (:class:`GenPRM`): GenPRM-1.5B / 7B / 32B: ``<analyze>`` then ``<output>`` with ``\\boxed{Yes}`` /
  ``\\boxed{No}``, P(Yes) from the log-probabilities at the verdict token;
- ``prm-thinkprm`` (:class:`ThinkPRM`): ThinkPRM-1.5B / 7B / 14B: a sampled verification chain, then ``Is the
  solution correct?`` scored over ``yes`` / ``no``;
- ``prm-rprm`` (:class:`RPRM`): R-PRM-7B-DPO: the "Previous Steps / Now Step" analysis, then P(" Yes") after ``Is
  the step correct (Yes/No)?``.

docs/PRMS.md has the table: hub ids, the call, what is read, how it was verified.
"""

from .genprm import GenPRM
from .rprm import RPRM
from .thinkprm import ThinkPRM


__all__ = ["GenPRM", "RPRM", "ThinkPRM"]

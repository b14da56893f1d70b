"""Step-level generation steered by ARES: the next step of many partial solutions at once, scored as it is written
by streaming ARES (:mod:`ares_rerank.estimator.stream`).

Data flow: prompts -> :func:`step_generator` (a transformers causal LM, a vLLM ``LLM``, or a policy callable) ->
waves of next steps, stopped at the step separator -> each step into its partial solution's ARES state (one
backbone call per wave) -> the algorithm keeps, stops or expands partial solutions -> a
:class:`SearchResult` per prompt, with its cost (:class:`SearchStats`).

Algorithms: :func:`stepwise_best_of_n` (best-of-N with early rejection, or plain), :func:`beam_search` and
:func:`dvts` (search-and-learn's definitions); :class:`SearchConfig` holds their settings (``ares-rerank search``'s
flags) and runs the one it names.

Example:
    >>> from ares_rerank import AresReranker, ClaimTreesOracle
    >>> policy = lambda prompt, steps, rng: None if steps else "I have A, I use rule (A -> B) to derive B, now I have B"
    >>> reranker = AresReranker(ClaimTreesOracle(), prompt_split="lines")
    >>> prompt = "Rule: A -> B (meaning that if I have A, I can derive B)\\nI have A"
    >>> beam_search(step_generator(policy), [prompt], reranker, n=2, beam_width=2)[0].step_scores[0]
    [1.0]
"""

from .beams import beam_search, dvts
from .common import SearchResult, SearchStats
from .config import APPROACHES, SearchConfig
from .generators import (
    GeneratedStep,
    PolicyStepGenerator,
    StepGenerator,
    StepPolicy,
    TransformersStepGenerator,
    VLLMStepGenerator,
    step_generator,
)
from .rejection import REJECTIONS, stepwise_best_of_n


__all__ = [
    "APPROACHES",
    "REJECTIONS",
    "GeneratedStep",
    "PolicyStepGenerator",
    "SearchConfig",
    "SearchResult",
    "SearchStats",
    "StepGenerator",
    "StepPolicy",
    "TransformersStepGenerator",
    "VLLMStepGenerator",
    "beam_search",
    "dvts",
    "step_generator",
    "stepwise_best_of_n",
]

"""Process reward models as ARES backbones: one module per published family, side by side.

Each family renders a question and its steps exactly as its authors' scoring code does (the same text, token ids,
read positions and probability) and is one row of the kinds table
(:data:`~ares_rerank.backbones.loading.BACKBONE_KINDS`); ``load_backbone`` picks it from the family's known hub ids
(:attr:`PRMBackbone.hub_ids`) and architectures (:attr:`PRMBackbone.architectures`), or from ``kind=`` for a local
folder. docs/PRMS.md has the table: family, hub ids, the call, what is read, how it was verified.

- ``prm-qwen`` (:class:`QwenPRM`): Qwen2.5-Math-PRM (``Qwen2ForProcessRewardModel``), loaded natively;
- ``prm-reasonflux`` (:class:`ReasonFluxPRM`): ReasonFlux-PRM-7B, the Qwen layout without the system turn;
- ``prm-math-shepherd`` (:class:`MathShepherdPRM`): Math-Shepherd (Mistral, ``ки`` tags, ``+`` / ``-``);
- ``prm-math-psa`` (:class:`MathPSAPRM`): OpenR's Math-psa (a LoRA adapter on Qwen2.5-Math-7B-Instruct,
  ``" \n\n\n\n\n"`` tags, ``" +"`` / ``" -"``);
- ``prm-versaprm`` (:class:`VersaPRM`): VersaPRM (Llama-3.1, ``" \n\n\n\n"`` tags, ``"+"`` / ``"-"``);
- ``prm-actprm`` (:class:`ActPRM`): ActPRM (Qwen2 + an ensemble of MLP heads, ``Qwen2ForEnsemblePRM``), natively;
- ``prm-rlhflow`` (:class:`RLHFlowPRM`): RLHFlow's Llama-3.1 PRMs (each step a user turn answered ``+``);
- ``prm-skywork`` (:class:`SkyworkPRM`): Skywork-o1-Open-PRM (Qwen2.5 + value head), loaded natively;
- ``prm-trl`` (:class:`TRLPRM`): token classifiers trained with TRL's PRMTrainer;
- ``prm-pure`` (:class:`PUREPRM`): PURE-PRM-7B, TRL's layout with the separator ``"\n"``;
- ``prm-universal`` (:class:`UniversalPRM`): Universal-PRM-7B (its own code; ChatML, one sigmoid per prefix);
- ``prm-implicit`` (:class:`ImplicitPRM`): implicit PRMs, a PRM causal LM read against a reference LM
  (``ref_model=``), and ``prm-eurus`` (:class:`EurusPRM`): EurusPRM-Stage1/2 as their model card reads them;
- ``prm`` (:class:`StepTagPRM`) / ``prm-causal`` (:class:`CausalPRM`): your own PRM with a step tag (configurable).

Adding a family: a module here with a :class:`PRMBackbone` subclass (``encode_chain``, ``tag_probs``, ``kind``,
``hub_ids``, ``architectures``; a :class:`TaggedTextPRM` when the input is one text with a tag after each step), one
row in ``BACKBONE_KINDS``, and a test that rebuilds the authors' scoring code on an offline mirror of the model.
"""

from .actprm import ActPRM
from .base import PRMBackbone, TaggedTextPRM, encode_spans, positive_class_probs, sigmoid_probs, token_pair_probs
from .eurus import EurusPRM
from .generic import QWEN_PRM_SYSTEM_PROMPT, CausalPRM, StepTagPRM, render_prm_text
from .implicit import ImplicitPRM
from .math_psa import MathPSAPRM
from .math_shepherd import MathShepherdPRM
from .qwen import QwenPRM, ReasonFluxPRM
from .rlhflow import RLHFlowPRM
from .skywork import SkyworkPRM
from .trl import PUREPRM, TRLPRM
from .universal import UniversalPRM
from .versaprm import VersaPRM


__all__ = [
    "ActPRM",
    "QWEN_PRM_SYSTEM_PROMPT",
    "CausalPRM",
    "EurusPRM",
    "ImplicitPRM",
    "MathPSAPRM",
    "MathShepherdPRM",
    "PRMBackbone",
    "TaggedTextPRM",
    "PUREPRM",
    "QwenPRM",
    "RLHFlowPRM",
    "ReasonFluxPRM",
    "SkyworkPRM",
    "StepTagPRM",
    "TRLPRM",
    "UniversalPRM",
    "VersaPRM",
    "encode_spans",
    "positive_class_probs",
    "render_prm_text",
    "sigmoid_probs",
    "token_pair_probs",
]

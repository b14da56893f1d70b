"""Backbones: anything that maps (premise lists, hypotheses) to entailment probabilities."""

from .base import Backbone, ChainBackbone, FunctionBackbone, call_backbone
from .judge import LLMJudge
from .loading import load_backbone
from .nli import EntailmentHead
from .oracle import ClaimTreesOracle
from .prm import CausalPRM, StepTagPRM
from .selection import AllPremises, FitPremises, RelevantPremises, SelectingBackbone


# The Hugging Face backbones import torch / transformers only when a model is loaded, so this import stays light.
__all__ = [
    "AllPremises",
    "Backbone",
    "CausalPRM",
    "ChainBackbone",
    "ClaimTreesOracle",
    "EntailmentHead",
    "FitPremises",
    "FunctionBackbone",
    "LLMJudge",
    "RelevantPremises",
    "SelectingBackbone",
    "StepTagPRM",
    "call_backbone",
    "load_backbone",
]

"""Backbones: anything that maps (premise lists, hypotheses) to entailment probabilities."""

from .base import Backbone, ChainBackbone, FunctionBackbone, SampledBackbone, call_backbone
from .generative import ChatEngine, GenerativeVerifier, LocalEngine, Sampling, ServedEngine
from .judge import LLMJudge
from .loading import load_backbone
from .nli import EntailmentHead
from .openai_judge import OpenAIJudge
from .oracle import ClaimTreesOracle
from .prms import TRLPRM, CausalPRM, MathShepherdPRM, QwenPRM, RLHFlowPRM, SkyworkPRM, StepTagPRM
from .selection import AllPremises, FitPremises, RelevantPremises, SelectingBackbone
from .served import InsecureCredentialsWarning, ServerError, ServerResponseError
from .verifiers import RPRM, GenPRM, ThinkPRM
from .vllm_pooling import VLLMPoolingPRM


# The Hugging Face backbones import torch / transformers only when a model is loaded, so this import stays light.
__all__ = [
    "AllPremises",
    "Backbone",
    "CausalPRM",
    "ChainBackbone",
    "ChatEngine",
    "ClaimTreesOracle",
    "EntailmentHead",
    "FitPremises",
    "FunctionBackbone",
    "GenPRM",
    "GenerativeVerifier",
    "InsecureCredentialsWarning",
    "LLMJudge",
    "LocalEngine",
    "MathShepherdPRM",
    "OpenAIJudge",
    "QwenPRM",
    "RPRM",
    "RLHFlowPRM",
    "RelevantPremises",
    "SampledBackbone",
    "Sampling",
    "SelectingBackbone",
    "ServerError",
    "ServedEngine",
    "ServerResponseError",
    "SkyworkPRM",
    "StepTagPRM",
    "TRLPRM",
    "ThinkPRM",
    "VLLMPoolingPRM",
    "call_backbone",
    "load_backbone",
]

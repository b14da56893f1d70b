"""Backbones: anything that maps (premise lists, hypotheses) to entailment probabilities."""

from .base import Backbone, ChainBackbone, FunctionBackbone, call_backbone
from .oracle import ClaimTreesOracle


__all__ = ["Backbone", "ChainBackbone", "ClaimTreesOracle", "FunctionBackbone", "call_backbone"]

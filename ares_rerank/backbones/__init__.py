"""Backbones: anything that maps (premise lists, hypotheses) to entailment probabilities."""

from .base import Backbone, ChainBackbone, FunctionBackbone, call_backbone


__all__ = ["Backbone", "ChainBackbone", "FunctionBackbone", "call_backbone"]

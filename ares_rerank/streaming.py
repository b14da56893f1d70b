"""Alias of :mod:`ares_rerank.estimator.stream` (streaming ARES), kept so ``from ares_rerank.streaming import
AresStream`` goes on working."""

from .estimator.stream import AresStream, StreamState


__all__ = ["AresStream", "StreamState"]

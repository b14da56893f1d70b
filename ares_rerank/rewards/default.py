"""The default reranker of the rewards (:data:`~ares_rerank.rewards.ares_reward`, ``AresReward(None)``, verl's
functions), built lazily from :func:`configure_default`, else the environment, else the built-in default; and the
one lock per backbone that every reward scoring in this process shares.

For each setting:

==================================  =====================================================================  ===========
variable                            value                                                                  default
==================================  =====================================================================  ===========
``ARES_RERANK_BACKBONE``            a name or path for ``load_backbone`` (folder, hub id, URL, ...)        ``default``
``ARES_RERANK_KIND``                the backbone kind: ``nli``, a PRM family (``prm-qwen``, ...),          detected
                                    ``prm``, ``prm-causal``, ``judge``, ``openai``, ``vllm-pooling``
``ARES_RERANK_BACKBONE_OPTIONS``    a JSON object of ``load_backbone`` keyword arguments, e.g.             ``{}``
                                    ``{"dtype": "bfloat16", "batch_size": 32}``
``ARES_RERANK_AGGREGATE``           the chain score: ``final``, ``mean``, ``min``, ``product``             ``final``
``ARES_RERANK_RERANKER_OPTIONS``    a JSON object of ``AresReranker`` keyword arguments: ``method``,       ``{}``
                                    ``step_separator``, ``prompt_split``, ``prompt_roles``,
                                    ``completion_roles``, ``chat_layout``, ``tokenizer`` (the policy's
                                    folder or hub id), ``batch_size``, ``threshold``, and ``config`` (an
                                    object of ``AresConfig`` fields, e.g. ``{"eps": 0.05}``)
==================================  =====================================================================  ===========

A bad value (unknown kind or aggregate, JSON that does not parse or is not an object, an unknown key) is a
``ValueError`` naming the variable, the value and the fix, raised by the first reward call or by
:func:`settings_from_env`, which checks them without loading anything. With the embedded demo head (the default) on
text outside its domain the reranker warns once (:class:`~ares_rerank.backbones.demo.DemoBackboneWarning`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from typing import Any, Mapping

from ..aggregate import AGGREGATES
from ..backbones.base import Backbone, FunctionBackbone
from ..estimator.config import AresConfig
from ..rerank.reranker import AresReranker, resolve_backbone


__all__ = [
    "AGGREGATE_ENV",
    "BACKBONE_ENV",
    "BACKBONE_OPTIONS_ENV",
    "KIND_ENV",
    "RERANKER_OPTIONS_ENV",
    "backbone_lock",
    "configure_default",
    "default_is_built",
    "default_reranker",
    "settings_from_env",
]

logger = logging.getLogger(__name__)

BACKBONE_ENV = "ARES_RERANK_BACKBONE"
KIND_ENV = "ARES_RERANK_KIND"
BACKBONE_OPTIONS_ENV = "ARES_RERANK_BACKBONE_OPTIONS"
AGGREGATE_ENV = "ARES_RERANK_AGGREGATE"
RERANKER_OPTIONS_ENV = "ARES_RERANK_RERANKER_OPTIONS"
_RERANKER_OPTIONS = ("method", "step_separator", "prompt_split", "prompt_roles", "completion_roles", "chat_layout",
                     "tokenizer", "batch_size", "threshold", "config")

_default_settings: dict[str, Any] = {}
_default: AresReranker | None = None
_default_lock = threading.Lock()
# One lock per live backbone: weakly keyed, so the registry shrinks with them, and a new object that reuses a dead
# one's id() never inherits its lock (backbones that take no weak reference fall back to their id).
_backbone_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_unweakable_locks: dict[int, threading.Lock] = {}
_registry_lock = threading.Lock()


def _json_object(environ: Mapping[str, str], name: str) -> dict[str, Any]:
    raw = environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"{name}={raw!r} is not valid JSON ({err}): give a JSON object, e.g. '{{\"dtype\": "
                         "\"bfloat16\"}'.") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name}={raw!r} is a JSON {type(value).__name__}, not an object: give e.g. '{{}}'.")
    return value


def _stand_in_backbone() -> FunctionBackbone:
    """A backbone to check reranker settings against before the real one is loaded: pair-wise and whole-chain."""
    stand_in = FunctionBackbone(lambda premises, hypotheses: [0.0] * len(hypotheses), name="stand-in")
    stand_in.chain_step_probs = lambda base_claims, steps: [0.0] * len(steps)  # type: ignore[attr-defined]
    return stand_in


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The default reranker's settings named by the environment (see the module docstring); loads nothing.

    Returns:
        A dict with the keys found: ``backbone``, ``kind``, ``backbone_options`` (dict), ``aggregate`` and the
        keys of ``ARES_RERANK_RERANKER_OPTIONS`` (``config`` as an :class:`~ares_rerank.estimator.AresConfig`).

    Raises:
        ValueError: A variable holds a bad value; the message names it, the value and the fix.
    """
    from ..backbones.loading import KINDS

    environ = os.environ if environ is None else environ
    settings: dict[str, Any] = {}
    if environ.get(BACKBONE_ENV, "").strip():
        settings["backbone"] = environ[BACKBONE_ENV].strip()
    kind = environ.get(KIND_ENV, "").strip()
    if kind:
        if kind not in KINDS:
            raise ValueError(f"{KIND_ENV}={kind!r} is unknown: use one of {list(KINDS)}, or unset it to detect the "
                             "kind from the model's config.")
        settings["kind"] = kind
    options = _json_object(environ, BACKBONE_OPTIONS_ENV)
    if "kind" in options:
        raise ValueError(f"{BACKBONE_OPTIONS_ENV} has a 'kind' key: set {KIND_ENV} instead.")
    if options:
        settings["backbone_options"] = options
    aggregate = environ.get(AGGREGATE_ENV, "").strip()
    if aggregate:
        if aggregate not in AGGREGATES:
            raise ValueError(f"{AGGREGATE_ENV}={aggregate!r} is unknown: use one of {sorted(AGGREGATES)}.")
        settings["aggregate"] = aggregate
    reranker_options = _json_object(environ, RERANKER_OPTIONS_ENV)
    unknown = sorted(set(reranker_options) - set(_RERANKER_OPTIONS))
    if unknown:
        raise ValueError(f"{RERANKER_OPTIONS_ENV} has unknown keys {unknown}: use {list(_RERANKER_OPTIONS)} (the "
                         f"backbone and aggregate have their own variables, {BACKBONE_ENV} and {AGGREGATE_ENV}).")
    if "config" in reranker_options:
        config = reranker_options["config"]
        if not isinstance(config, dict):
            raise ValueError(f"{RERANKER_OPTIONS_ENV}: 'config' must be an object of AresConfig fields, e.g. "
                             '{"eps": 0.05}.')
        try:
            reranker_options["config"] = AresConfig(**config)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{RERANKER_OPTIONS_ENV}: 'config' is not a valid AresConfig: {err}") from None
    try:  # checked now, against a stand-in backbone, not at the first reward call of a training run
        AresReranker(_stand_in_backbone(), **reranker_options)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{RERANKER_OPTIONS_ENV}={environ.get(RERANKER_OPTIONS_ENV)!r}: {err}") from None
    return {**settings, **reranker_options}


def configure_default(
    backbone: Backbone | str | None = None,
    *,
    kind: str | None = None,
    backbone_options: dict[str, Any] | None = None,
    **reranker_kwargs: Any,
) -> None:
    """Choose what the default reranker (used by :data:`ares_reward`, :data:`async_ares_reward` and
    ``AresReward(None)``) is built from; a setting given here wins over the environment's.

    Nothing is loaded here: the reranker is (re)built on the next call that needs it.

    Args:
        backbone: A backbone object, or a name / path for ``ares_rerank.load_backbone``. ``None``:
            ``$ARES_RERANK_BACKBONE``, else ``"default"``.
        kind: The backbone kind for a name / path (``None``: ``$ARES_RERANK_KIND``, else detected).
        backbone_options: Keyword arguments of ``load_backbone`` (``None``: ``$ARES_RERANK_BACKBONE_OPTIONS``).
        **reranker_kwargs: Keyword arguments of :class:`~ares_rerank.rerank.AresReranker` (``config``,
            ``method``, ``aggregate``, ``step_separator``, ``prompt_split``, ...).
    """
    global _default
    try:  # the reranker's own checks, now, against a stand-in backbone (nothing is loaded here)
        AresReranker(_stand_in_backbone(), **reranker_kwargs)
    except TypeError as err:
        raise TypeError(f"configure_default: {err} (its keywords are AresReranker's, and backbone, kind, "
                        "backbone_options).") from None
    settings = dict(reranker_kwargs)
    for key, value in (("backbone", backbone), ("kind", kind), ("backbone_options", backbone_options)):
        if value is not None:
            settings[key] = value
    with _default_lock:
        _default_settings.clear()
        _default_settings.update(settings)
        _default = None


def default_reranker() -> AresReranker:
    """The default reranker, built (and its backbone loaded) on the first call, then reused."""
    global _default
    with _default_lock:
        if _default is None:
            settings = {**settings_from_env(), **_default_settings}
            backbone = settings.pop("backbone", None) or "default"
            load_kwargs = dict(settings.pop("backbone_options", None) or {})
            if settings.get("kind") is not None:
                load_kwargs["kind"] = settings["kind"]
            settings.pop("kind", None)
            logger.info("Building the default ARES reranker with backbone %r (%s).", backbone, load_kwargs)
            if isinstance(backbone, str):
                backbone = resolve_backbone(backbone, **load_kwargs)
            _default = AresReranker(backbone, **settings)
        return _default


def default_is_built() -> bool:
    """Whether the default reranker (and its backbone) exists yet."""
    return _default is not None


def backbone_lock(backbone: Any) -> threading.Lock:
    """One lock per backbone object: two rewards on the same backbone score one at a time (its cache and stats are
    not thread-safe); rewards on different backbones overlap."""
    with _registry_lock:
        try:
            return _backbone_locks.setdefault(backbone, threading.Lock())
        except TypeError:  # no __weakref__ (slots) or unhashable
            return _unweakable_locks.setdefault(id(backbone), threading.Lock())

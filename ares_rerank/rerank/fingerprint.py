"""Cheap, stable hashes of rerankers, filters and rewards for the ``datasets`` cache, without pickling model weights.

``Dataset.map`` / ``filter`` fingerprint the function they are given by pickling it with datasets' own dill
``Pickler`` (``datasets.fingerprint.Hasher``). A reranker pickled that way drags its backbone's weights along: 1.0 s
and +300 MB per call for the 23M-parameter default head, minutes and gigabytes for a 7B PRM.

:func:`register` adds a reducer for our classes to that Pickler only (``datasets.utils._dill.pklregister``, the hook
datasets itself uses for tensors and tokenizers). The hash then sees the estimator's revision and :func:`describe` of
the object: its class and settings, and for a backbone its type, simple settings, the model's config and its
parameter names and shapes -- never the weights. A backbone loaded from a folder or hub id (its ``source``) is
identified by that name, plus the size and modification time of each file of a local folder (a head retrained in
place hashes differently); a model without a source adds the first values of every parameter tensor. Ordinary
pickling (``num_proc`` workers, TRL) is unchanged: the objects stay picklable with their models. A model changed in
memory after loading from a source keeps its hash: pass ``new_fingerprint=`` or ``load_from_cache_file=False`` to
datasets then.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
from pathlib import Path
from typing import Any


__all__ = ["describe", "register"]

_SKIPPED_NAMES = frozenset({"cache", "stats", "last_ratings", "headers"})  # caches and credentials: never hashed
_PARAM_SAMPLE = 4  # first values of each parameter tensor in a description
_MAX_DEPTH = 8
_registered: set[type] = set()


def _describe_module(module: Any, sample_weights: bool) -> tuple:
    """A torch module: class, name, config, and per parameter its name, shape (and first values)."""
    config = getattr(module, "config", None)
    to_json = getattr(config, "to_json_string", None)
    params = []
    for name, param in module.named_parameters():
        values = param.detach().reshape(-1)[:_PARAM_SAMPLE].float().cpu().tolist() if sample_weights else ()
        params.append((name, tuple(param.shape), tuple(values)))
    peft = getattr(module, "peft_config", None)
    peft = {k: v.to_dict() for k, v in peft.items()} if isinstance(peft, dict) else None  # adapter settings
    return (
        "module",
        type(module).__qualname__,
        str(getattr(module, "name_or_path", "")),
        to_json(use_diff=False) if callable(to_json) else None,
        describe(peft),
        tuple(params),
    )


def _is_tokenizer(value: Any) -> bool:
    return hasattr(value, "convert_ids_to_tokens") and hasattr(value, "encode")


def _source_files(source: Any) -> tuple:
    """Name, size and modification time of the files of a local source folder (nothing for a hub id)."""
    try:
        folder = Path(source)
        if not folder.is_dir():
            return ()
        return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(folder.iterdir()) if f.is_file())
    except (OSError, TypeError, ValueError):
        return ()


def _attributes(value: Any, depth: int, seen: set[int], sample_weights: bool) -> tuple:
    """Public attributes of an object, caches and credentials left out; an object with a ``source`` (a backbone
    loaded from a folder or hub id) is identified by it, not by its weights."""
    source = vars(value).get("source")
    if isinstance(source, (str, Path)) and str(source):
        sample_weights = False
    items = [("source files", _source_files(source))] if not sample_weights else []
    for name, attr in sorted(vars(value).items()):
        if name.startswith("_") or name in _SKIPPED_NAMES:
            continue
        items.append((name, describe(attr, depth + 1, seen, sample_weights)))
    return tuple(items)


def describe(value: Any, depth: int = 0, seen: set[int] | None = None, sample_weights: bool = True) -> Any:
    """A small, stable stand-in for ``value`` made of plain values (functions stay as they are: datasets' pickler
    hashes them by code and closure).

    Args:
        value: Anything: a reranker, a backbone, settings.
        depth: Recursion depth (objects deeper than 8 levels are described by their class name).
        seen: Ids of objects being described (cycles are cut).
        sample_weights: Describe a model without a ``source`` by the first values of each parameter too.
    """
    seen = set() if seen is None else seen
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial, type)):
        return value
    if id(value) in seen or depth > _MAX_DEPTH:
        return ("...", type(value).__qualname__)
    seen = seen | {id(value)}
    if isinstance(value, (list, tuple)):
        return tuple(describe(v, depth + 1, seen, sample_weights) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((describe(v, depth + 1, seen, sample_weights) for v in value), key=repr))
    if isinstance(value, dict):
        items = ((str(k), describe(v, depth + 1, seen, sample_weights)) for k, v in value.items())
        return tuple(sorted(items, key=repr))
    if "torch" in sys.modules and isinstance(value, sys.modules["torch"].nn.Module):
        return _describe_module(value, sample_weights)
    if _is_tokenizer(value):
        return ("tokenizer", type(value).__qualname__, str(getattr(value, "name_or_path", "")), len(value))
    if hasattr(value, "shape") and hasattr(value, "tolist"):  # numpy / torch arrays: shape, dtype, first values
        flat = value.reshape(-1)[:16].tolist() if sample_weights else ()
        return ("array", tuple(value.shape), str(getattr(value, "dtype", "")), tuple(flat))
    if dataclasses.is_dataclass(value):
        fields = dataclasses.fields(value)
        return (type(value).__qualname__, tuple((f.name, describe(getattr(value, f.name), depth + 1, seen,
                                                                  sample_weights)) for f in fields))
    if hasattr(value, "__dict__"):
        return (type(value).__module__, type(value).__qualname__, _attributes(value, depth, seen, sample_weights))
    if callable(value):
        return value
    return type(value).__qualname__


def _described(*args: Any) -> Any:
    raise RuntimeError("this pickle is a datasets fingerprint of an ares_rerank object, not the object itself")


def _save_description(pickler: Any, obj: Any) -> None:
    from ..estimator import ESTIMATOR_REVISION  # an estimator that scores differently must not reuse a datasets cache

    description = (type(obj).__module__, type(obj).__qualname__, ESTIMATOR_REVISION, describe(obj))
    pickler.save_reduce(_described, description, obj=obj)


def register(cls: type, import_datasets: bool = False) -> None:
    """Hash instances of ``cls`` by :func:`describe` in datasets' fingerprint.

    Args:
        cls: The class (subclasses register themselves when built).
        import_datasets: Import datasets first when it is installed (objects made for datasets, such as
            :class:`~ares_rerank.rerank.filters.AresFilter`); otherwise a no-op until datasets is imported.
    """
    if cls in _registered:
        return
    if "datasets" not in sys.modules and not import_datasets:
        return
    try:
        from datasets.utils._dill import pklregister
    except ImportError:
        try:  # the older public re-export
            from datasets.utils.py_utils import pklregister
        except ImportError:  # not installed, or another layout: its fingerprint pickles the whole object, as before
            return
    pklregister(cls)(_save_description)
    _registered.add(cls)

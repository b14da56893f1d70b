"""One loader for every backbone: ``load_backbone(name_or_path, kind=None, **kwargs)``, and the table of kinds.

:data:`BACKBONE_KINDS` is the one registry of backbone kinds: kind -> ``"module:Class"``, imported only when a
backbone of that kind is loaded (:func:`backbone_class`), so ``import ares_rerank`` stays light and this module
imports none of the backbone modules (which import the shared helpers from :mod:`~ares_rerank.backbones.hub` and the
leaf :mod:`~ares_rerank.backbones.devices`). Local kinds: ``"nli"``
(:class:`~ares_rerank.backbones.nli.EntailmentHead`); the published PRM families (:data:`PRM_FAMILIES`, one module
each in :mod:`~ares_rerank.backbones.prms`: ``"prm-qwen"``, ``"prm-math-shepherd"``, ``"prm-rlhflow"``,
``"prm-skywork"``, ``"prm-trl"``, ``"prm-math-psa"``, ``"prm-versaprm"``, ``"prm-actprm"``, ``"prm-universal"``;
presets of a family's scorer for a published layout of its kind: ``"prm-reasonflux"``, ``"prm-pure"``), picked
from their hub ids and architectures (:func:`prm_family`, :func:`detect_kind`); ``"prm"``
(:class:`~ares_rerank.backbones.prms.StepTagPRM`) and ``"prm-causal"``
(:class:`~ares_rerank.backbones.prms.CausalPRM`) for PRMs of your own layout; implicit PRMs, a PRM causal LM read
against a reference LM (``ref_model=``): ``"prm-implicit"`` (:class:`~ares_rerank.backbones.prms.implicit.ImplicitPRM`)
and EurusPRM's preset ``"prm-eurus"``; ``"judge"``
(:class:`~ares_rerank.backbones.judge.LLMJudge`); generative verifiers, sampled backbones (:data:`GENERATIVE_FAMILIES`,
one module each in :mod:`~ares_rerank.backbones.verifiers`: ``"prm-genprm"``, ``"prm-thinkprm"``, ``"prm-rprm"``,
and ``"generative"``, :class:`~ares_rerank.backbones.generative.GenerativeVerifier`, your own prompt; local, or on a
server URL with ``tokenizer=``); served, named by a server URL (:data:`SERVED_KINDS`): ``"openai"``
(:class:`~ares_rerank.backbones.openai_judge.OpenAIJudge`), ``"vllm-completions"`` (a causal PRM family read from
vLLM's prompt log-probabilities, :mod:`~ares_rerank.backbones.vllm_completions`) and ``"vllm-pooling"``
(:class:`~ares_rerank.backbones.vllm_pooling.VLLMPoolingPRM`, a token-classifier family with ``family=``). Special
names: ``"claimtrees-oracle"`` (the rule oracle, no model), ``"default"`` (the entailment head shipped in
``ares_rerank/default_head/``) and ``"package.module:attr"`` (your own backbone object, or a zero-argument factory
returning one).

Hub ids and their options (:class:`~ares_rerank.backbones.hub.HubOptions`), adapters and the calibration file live
in :mod:`~ares_rerank.backbones.hub`, device / dtype selection in :mod:`~ares_rerank.backbones.devices`; the names
users import from here (``DEFAULT_HEAD_DIR``, ``PACKAGED_ENCODER``, ``resolve_model_name``, ``select_device``, ...)
are re-exported.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from .hub import (
    CALIBRATION_FILE,
    DEFAULT_HEAD_DIR,
    PACKAGED_ENCODER,
    PACKAGED_ENCODER_HUB_ID,
    HubOptions,
    load_model_and_tokenizer,
    named_load_errors,
    probe_file,
    read_adapter_config,
    read_calibration,
    require_cached_offline,
    resolve_model_name,
)
from .devices import select_device, select_dtype


__all__ = [
    "BACKBONE_KINDS",
    "CALIBRATION_FILE",
    "GENERATIVE_FAMILIES",
    "DEFAULT_HEAD_DIR",
    "HubOptions",
    "KINDS",
    "KIND_CONFIG_KEY",
    "PRM_FAMILIES",
    "PACKAGED_ENCODER",
    "PACKAGED_ENCODER_HUB_ID",
    "SERVED_KINDS",
    "backbone_class",
    "detect_kind",
    "import_object",
    "load_backbone",
    "load_model_and_tokenizer",
    "prm_family",
    "read_calibration",
    "resolve_model_name",
    "select_device",
    "select_dtype",
]

# kind -> "module:Class"; each class has from_pretrained(name_or_path, **kwargs). Add a kind here and nowhere else.
BACKBONE_KINDS: dict[str, str] = {
    "generative": "ares_rerank.backbones.generative:GenerativeVerifier",
    "judge": "ares_rerank.backbones.judge:LLMJudge",
    "nli": "ares_rerank.backbones.nli:EntailmentHead",
    "openai": "ares_rerank.backbones.openai_judge:OpenAIJudge",
    "prm": "ares_rerank.backbones.prms:StepTagPRM",
    "prm-actprm": "ares_rerank.backbones.prms.actprm:ActPRM",  # Qwen2 + an ensemble head, the members averaged
    "prm-causal": "ares_rerank.backbones.prms:CausalPRM",
    "prm-eurus": "ares_rerank.backbones.prms.eurus:EurusPRM",  # the implicit PRM preset: EurusPRM's card
    "prm-genprm": "ares_rerank.backbones.verifiers.genprm:GenPRM",
    "prm-implicit": "ares_rerank.backbones.prms.implicit:ImplicitPRM",  # a PRM and a reference LM, ref_model=
    "prm-math-psa": "ares_rerank.backbones.prms.math_psa:MathPSAPRM",  # OpenR's PRM: a LoRA adapter on its base
    "prm-math-shepherd": "ares_rerank.backbones.prms.math_shepherd:MathShepherdPRM",
    "prm-pure": "ares_rerank.backbones.prms.trl:PUREPRM",  # TRL's layout, separator "\n" (PURE's training code)
    "prm-qwen": "ares_rerank.backbones.prms.qwen:QwenPRM",
    "prm-reasonflux": "ares_rerank.backbones.prms.qwen:ReasonFluxPRM",  # the Qwen layout without the system turn
    "prm-rlhflow": "ares_rerank.backbones.prms.rlhflow:RLHFlowPRM",
    "prm-rprm": "ares_rerank.backbones.verifiers.rprm:RPRM",
    "prm-skywork": "ares_rerank.backbones.prms.skywork:SkyworkPRM",
    "prm-thinkprm": "ares_rerank.backbones.verifiers.thinkprm:ThinkPRM",
    "prm-trl": "ares_rerank.backbones.prms.trl:TRLPRM",
    "prm-universal": "ares_rerank.backbones.prms.universal:UniversalPRM",  # its own code, one input per prefix
    "prm-versaprm": "ares_rerank.backbones.prms.versaprm:VersaPRM",
    "vllm-completions": "ares_rerank.backbones.vllm_completions:VLLMCompletionsPRM",
    "vllm-pooling": "ares_rerank.backbones.vllm_pooling:VLLMPoolingPRM",
}
KINDS = tuple(BACKBONE_KINDS)
# The published PRM families (a module each in backbones/prms/; the configurable "prm" / "prm-causal" are not):
# picked from their hub ids and architectures (each class's hub_ids / architectures).
PRM_FAMILIES = tuple(k for k, target in BACKBONE_KINDS.items() if target.startswith("ares_rerank.backbones.prms."))
# The published generative verifiers (a module each in backbones/verifiers/: sampled backbones), picked from their
# hub ids; local (a causal LM) or served (a server URL with tokenizer=).
GENERATIVE_FAMILIES = tuple(k for k, target in BACKBONE_KINDS.items()
                            if target.startswith("ares_rerank.backbones.verifiers."))
# What our own `ares-rerank train prm` records in the config of a PRM it saves (a token classifier read as kind "prm").
KIND_CONFIG_KEY = "ares_kind"
# A hub cache snapshot folder: .../models--owner--name/snapshots/<commit>
_SNAPSHOT = re.compile(r"models--([^/\\]+?)--([^/\\]+)[/\\]snapshots[/\\]")
# The kinds whose name_or_path is a server URL rather than a model folder or hub id.
SERVED_KINDS = ("openai", "vllm-completions", "vllm-pooling")
ORACLE = "ares_rerank.backbones.oracle:ClaimTreesOracle"
# The names load_backbone answers without a file (a near miss of one is a typo, not a hub id).
BUILT_IN_NAMES = ("default", "claimtrees-oracle")
# "package.module:attr", as in entry points; a local folder of that name wins.
_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def import_object(target: str) -> Any:
    """The object a ``"package.module:attr"`` string names, imported now.

    Raises:
        ValueError: The module cannot be imported or has no such attribute; the message names both.
    """
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{target!r}: cannot import {attr!r} from {module_name!r} ({err}).") from err


def backbone_class(kind: str) -> type:
    """The backbone class registered for ``kind`` in :data:`BACKBONE_KINDS` (its module is imported now)."""
    if kind not in BACKBONE_KINDS:
        raise ValueError(f"kind={kind!r} is unknown: use one of {list(KINDS)}, or None to detect it from the config.")
    return import_object(BACKBONE_KINDS[kind])


def _load_spec(spec: str, kind: str | None, kwargs: dict[str, Any]) -> Any:
    """``"package.module:attr"``: a backbone object, or a zero-argument callable (a factory or class) returning one."""
    if kind is not None or kwargs:
        given = (["kind"] if kind is not None else []) + sorted(kwargs)
        raise ValueError(
            f"load_backbone({spec!r}) got {given}: a 'module:attr' backbone is built by its own code, so kind= and "
            "backbone options do not apply. Configure it inside the factory, or pass a model name or folder instead."
        )
    backbone = import_object(spec)
    is_factory = isinstance(backbone, type) or (callable(backbone) and not hasattr(backbone, "entailment_probs"))
    if is_factory:  # a class, or a function that builds the backbone
        backbone = _call_factory(spec, backbone)
    if not hasattr(backbone, "entailment_probs"):
        raise TypeError(
            f"load_backbone({spec!r}) resolved to {type(backbone).__name__}, which has no entailment_probs(premises, "
            "hypotheses): point it at a backbone object, or at a zero-argument function or class that returns one."
        )
    return backbone


def _call_factory(spec: str, factory: Any) -> Any:
    """Call a zero-argument factory, or raise an error that names ``spec``: one it cannot be called without
    arguments, or what it raised."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # some builtins and C types have no signature: just call them
        signature = None
    if signature is not None:
        required = [name for name, p in signature.parameters.items() if p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if required:
            raise TypeError(
                f"load_backbone({spec!r}) names a factory that needs arguments ({', '.join(required)}); it is called "
                "with none: point it at a zero-argument function (or a backbone object) that builds the backbone "
                "with the settings it needs.")
    try:
        return factory()
    except Exception as err:
        raise RuntimeError(f"load_backbone({spec!r}): the factory raised {type(err).__name__}: {err}") from err


def prm_family(name_or_path: str) -> str | None:
    """The PRM family kind of a known hub id (any case; a hub cache snapshot folder of one counts), else ``None``:
    a discriminative family (:data:`PRM_FAMILIES`) or a generative verifier (:data:`GENERATIVE_FAMILIES`)."""
    name = str(name_or_path).rstrip("/\\")
    snapshot = _SNAPSHOT.search(name)
    hub_id = f"{snapshot.group(1)}/{snapshot.group(2)}" if snapshot else name
    for kind in PRM_FAMILIES + GENERATIVE_FAMILIES:
        if hub_id.lower() in (h.lower() for h in backbone_class(kind).hub_ids):
            return kind
    return None


def detect_kind(architectures: list[str] | None, name_or_path: str = "", recorded: str | None = None,
                remote_code: bool = False) -> str:
    """The backbone kind implied by a config's ``architectures``; a ValueError saying what to pass otherwise.

    Args:
        architectures: ``config.architectures``.
        name_or_path: For the messages.
        recorded: The kind our own training recorded in the config (:data:`KIND_CONFIG_KEY`), which wins.
        remote_code: The config maps an architecture to the checkpoint's own code (``auto_map``).
    """
    names = list(architectures or [])
    if recorded in KINDS:
        return recorded
    for kind in PRM_FAMILIES:  # a published architecture that a family loads natively
        if any(a in backbone_class(kind).architectures for a in names):
            return kind
    if any(a.endswith("ForTokenClassification") for a in names):
        return "prm-trl"  # a 2-label token classifier PRM is TRL's PRMTrainer's output
    if any(a.endswith("ForProcessRewardModel") for a in names):
        return "prm"
    if any(a.endswith("ForSequenceClassification") for a in names):
        return "nli"
    if any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in names):
        raise ValueError(
            f"{name_or_path!r} is a causal LM ({names}): it can be an LLM judge or a causal PRM, so say which: "
            "load_backbone(..., kind='judge'), kind='prm-math-shepherd' (Math-Shepherd's ки / + / - layout), "
            "kind='prm-rlhflow' (RLHFlow's chat of + turns), kind='prm-versaprm' (VersaPRM's ' \\n\\n\\n\\n' tags), "
            "kind='prm-math-psa' (OpenR's Math-psa), kind='prm-causal' (your own step tag), "
            "kind='prm-implicit' (an implicit PRM: pass ref_model=, its reference LM), or a generative "
            "verifier: kind='generative' (your prompt), 'prm-genprm', 'prm-thinkprm' or 'prm-rprm'."
        )
    remote = (" Its config maps it to the checkpoint's own code: pass trust_remote_code=True with the kind to run "
              "that code." if remote_code else "")
    raise ValueError(
        f"cannot tell the backbone kind of {name_or_path!r} from its config (architectures={names or None}): pass "
        f"kind= one of {list(KINDS)} (a bare encoder such as all-MiniLM-L6-v2 is kind='nli', with a new head).{remote}"
    )


_ADAPTER_TASKS = {"SEQ_CLS": "nli", "TOKEN_CLS": "prm"}
_HUB_KEYS = ("revision", "token", "cache_dir", "local_files_only")


def _detect_from_files(name_or_path: str, kwargs: dict[str, Any]) -> str:
    """Detect the kind of a model folder / hub id, or of a peft adapter (its task type, else its base's config).

    ``kwargs`` are the backbone options: ``trust_remote_code``, ``base_model`` and the hub options
    (``revision``, ``token``, ``cache_dir``, ``local_files_only``) are read from them.
    """
    options = HubOptions(**{key: kwargs[key] for key in _HUB_KEYS if key in kwargs})
    name_or_path = resolve_model_name(name_or_path, options.revision)
    adapter_config = probe_file(name_or_path, "adapter_config.json", options)
    if adapter_config is not None:
        adapter = read_adapter_config(adapter_config)
        if adapter.get("task_type") in _ADAPTER_TASKS:
            return _ADAPTER_TASKS[adapter["task_type"]]
        recorded = adapter.get("base_model_name_or_path")
        base = kwargs.get("base_model") or recorded or name_or_path
        options = replace(options, revision=adapter.get("revision") if base == recorded else None)
        name_or_path = resolve_model_name(base, options.revision)
    family = prm_family(name_or_path)
    if family is not None:
        return family
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=bool(kwargs.get("trust_remote_code")),
                                            **options.kwargs())
    except ValueError as err:
        if "trust_remote_code" not in str(err):
            raise
        raise ValueError(
            f"{name_or_path!r} has a config of its own code (an architecture transformers does not know): pass "
            f"trust_remote_code=True to run it, with kind= one of {list(KINDS)} (a PRM of a published family loads "
            f"natively: kind= one of {list(PRM_FAMILIES)})."
        ) from err
    return detect_kind(getattr(config, "architectures", None), name_or_path, getattr(config, KIND_CONFIG_KEY, None),
                       bool(getattr(config, "auto_map", None)))


def _load_default(kwargs: dict[str, Any]) -> Any:
    """The entailment head shipped in :data:`DEFAULT_HEAD_DIR`: an adapter naming all-MiniLM-L6-v2's Hub id, loaded
    on the packaged copy of that encoder (offline)."""
    if not DEFAULT_HEAD_DIR.is_dir() or not any(DEFAULT_HEAD_DIR.iterdir()):
        raise ValueError(
            f"load_backbone('default') needs the shipped entailment head in {DEFAULT_HEAD_DIR}, which this install "
            "does not have yet (it is trained by the training recipe). Use load_backbone('claimtrees-oracle') for "
            "ClaimTrees, or a local model: load_backbone('path/to/nli-model', kind='nli')."
        )
    if (DEFAULT_HEAD_DIR / "adapter_config.json").is_file() and "base_model" not in kwargs:
        kwargs = {**kwargs, "base_model": resolve_model_name(PACKAGED_ENCODER)}
    return backbone_class("nli").from_pretrained(DEFAULT_HEAD_DIR, **kwargs)


def _refuse_near_built_in(name: str) -> None:
    """A name that is no local path and reads like a built-in one (``claimtree-oracle``, ``Default``, ``defualt``)
    is a typo: refused at once rather than tried as a hub id (a minute of retries online)."""
    if Path(name).exists() or "/" in name or ":" in name:
        return
    close = difflib.get_close_matches(name.strip().lower(), BUILT_IN_NAMES, n=1, cutoff=0.75)
    if close:
        raise ValueError(f"backbone {name!r} is no built-in name, local folder or hub id (owner/name): did you mean "
                         f"{close[0]!r}? The built-in names are {', '.join(map(repr, BUILT_IN_NAMES))}.")


def load_backbone(name_or_path: str | Path, kind: str | None = None, **kwargs: Any) -> Any:
    """Load a backbone the way users load models: a local folder, a hub id, a special name or your own object.

    Args:
        name_or_path: A folder or hub id (``from_pretrained`` semantics, so ``HF_HUB_OFFLINE=1`` is honoured), a
            peft adapter folder, a server URL (with ``kind="openai"``, ``"vllm-completions"`` or ``"vllm-pooling"``),
            ``"claimtrees-oracle"``, ``"default"``, or ``"package.module:attr"``: an object with
            ``entailment_probs``, or a zero-argument factory / class returning one (imported and used as is; a
            local folder of that name is loaded as a folder instead).
        kind: A key of :data:`BACKBONE_KINDS` (``"nli"``, a PRM family such as ``"prm-math-shepherd"``,
            ``"prm"``, ``"prm-causal"``, ``"judge"``, ``"openai"``, ``"vllm-completions"``, ``"vllm-pooling"``);
            ``None`` detects it: a
            published PRM's hub id (or its hub cache snapshot folder) names its family, else the config's
            ``architectures`` (``Qwen2ForProcessRewardModel`` -> ``"prm-qwen"``, ``Qwen2ForPrmModel`` ->
            ``"prm-skywork"``, another token classifier -> ``"prm-trl"`` unless ``ares-rerank train prm`` recorded
            ``"prm"``, sequence classifier -> ``"nli"``; a causal LM must be told: ``"judge"``,
            ``"prm-math-shepherd"``, ``"prm-rlhflow"`` or ``"prm-causal"``). A server URL must be told too.
        **kwargs: Passed to the backbone's ``from_pretrained`` (e.g. ``device``, ``dtype``, ``batch_size``,
            ``premise_selection``, ``entailment_label``, ``step_tag``, ``mode``, ``trust_remote_code``, and the
            hub options ``revision``, ``token``, ``cache_dir``, ``local_files_only``, used for every download,
            ``ares_calibration.json`` included); none with a ``"module:attr"`` spec.

    Returns:
        An object with ``entailment_probs(premises, hypotheses)`` (PRMs and the judges also ``chain_step_probs``).

    Raises:
        ValueError: An unknown kind, a kind or options given with a ``"module:attr"`` spec (or a spec that does not
            import), a name whose kind cannot be detected, or a name that is no local folder and does not load from
            the Hub; the message says what to pass.
        FileNotFoundError: A local folder without ``config.json`` or ``adapter_config.json``.
        TypeError: ``name_or_path`` is not a string or path (an empty one is a ValueError).

    Example:
        >>> oracle = load_backbone("claimtrees-oracle")
        >>> type(oracle).__name__
        'ClaimTreesOracle'
        >>> type(load_backbone("ares_rerank.backbones.oracle:ClaimTreesOracle")).__name__
        'ClaimTreesOracle'
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind={kind!r} is unknown: use one of {list(KINDS)}, or None to detect it from the config.")
    if not isinstance(name_or_path, (str, Path)) or not str(name_or_path).strip():
        error = ValueError if isinstance(name_or_path, (str, Path)) else TypeError
        raise error(f"load_backbone(name_or_path={name_or_path!r}) must name a backbone: 'default', a model folder or "
                    "hub id, 'claimtrees-oracle', or 'package.module:attr'.")
    name = str(name_or_path)
    if name in ("claimtrees-oracle", "default") and Path(name).is_dir():  # the built-in wins: say so
        warnings.warn(f"load_backbone({name!r}) loads the built-in {name!r}, not the folder ./{name} beside you: pass "
                      f"'./{name}' for the folder.", stacklevel=2)
    if name == "claimtrees-oracle":
        if kind not in (None, "nli"):
            raise ValueError(f"load_backbone('claimtrees-oracle') is a rule oracle answering entailment (kind='nli'), "
                             f"not kind={kind!r}: drop kind, or name a {kind} model.")
        return import_object(ORACLE)(**kwargs)
    if name == "default":
        if kind not in (None, "nli"):
            raise ValueError(f"load_backbone('default') is an entailment head (kind='nli'), not kind={kind!r}.")
        return _load_default(kwargs)
    if _SPEC.fullmatch(name) and not Path(name).exists():
        return _load_spec(name, kind, kwargs)
    if kind is None and name.startswith(("http://", "https://")):
        raise ValueError(
            f"{name!r} is a server URL: say what it serves, kind='openai' (an LLM judge on an OpenAI-compatible "
            "server), kind='vllm-pooling' (a token-classifier PRM on vLLM's /pooling), kind='vllm-completions' (a "
            "causal PRM family on vLLM's /v1/completions; pass tokenizer= and family=), or a generative verifier "
            "(kind='generative', 'prm-genprm', 'prm-thinkprm' or 'prm-rprm', with tokenizer=)."
        )
    if kind in SERVED_KINDS:
        return backbone_class(kind).from_pretrained(name_or_path, **kwargs)
    _refuse_near_built_in(name)
    if Path(name).exists() and not Path(name).is_dir():
        raise ValueError(f"backbone {name!r} is a file, not a model: point it at the folder save_pretrained wrote, a "
                         "hub id, 'default' or 'claimtrees-oracle'.")
    if Path(name).is_dir() and not any((Path(name) / f).is_file() for f in ("config.json", "adapter_config.json")):
        raise FileNotFoundError(
            f"backbone {name!r} is a folder without config.json or adapter_config.json, so no saved model: point it "
            "at the folder save_pretrained wrote (or 'default' for the shipped head)."
        )
    family = prm_family(name)
    if kind in ("prm", "prm-causal") and family is not None:  # the configurable layout on a published PRM
        warnings.warn(f"{name!r} is a published PRM of the family kind={family!r}, which reads it exactly as its "
                      f"authors' code does; kind={kind!r} reads it with the configurable layout instead (drop kind= "
                      "to use the family, docs/PRMS.md).", UserWarning, stacklevel=2)
    require_cached_offline("backbone", name, kwargs)
    with named_load_errors("backbone", name):
        if kind is None:  # a published PRM's hub id names its family without reading a file
            kind = family or _detect_from_files(name, kwargs)
        return backbone_class(kind).from_pretrained(name_or_path, **kwargs)

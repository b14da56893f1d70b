"""Published PRM architectures on transformers' own decoders, so that no checkpoint's remote code has to run.

A family whose checkpoints ship remote code for a standard decoder plus a small head (Qwen2.5-Math-PRM's
Linear-ReLU-Linear, Skywork's value head) builds its model class here with :func:`native_model_class`: the family
defines ``__init__`` (the decoder as ``self.model`` and the head under its published weight names) and ``head``;
:class:`NativeHead` gives the forward pass (the KV cache passed through, so shared-prefix reuse works). Classes are
built on first use, so importing a family module does not import torch or transformers.
"""

from __future__ import annotations

from typing import Any, Callable

from ..prefix import forward_parameters


__all__ = ["NativeHead", "native_model_class"]

_CLASSES: dict[str, type] = {}


class NativeHead:
    """Mixin of the native PRM classes: the decoder ``self.model`` on the inputs, then ``self.head`` on its last
    hidden state (after the final norm, as ``hidden_states[-1]`` of the published code)."""

    def forward(self, input_ids: Any = None, attention_mask: Any = None, position_ids: Any = None, cache: Any = None,
                past_key_values: Any = None, use_cache: bool | None = None, inputs_embeds: Any = None,
                **kwargs: Any) -> Any:
        # transformers renamed past_key_values to cache in 5.x: pass it by the name this version's decoder takes
        name = "cache" if "cache" in forward_parameters(self.model) else "past_key_values"
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         inputs_embeds=inputs_embeds, use_cache=use_cache,
                         **{name: cache if cache is not None else past_key_values}, **kwargs)
        return self.head(out.last_hidden_state)

    def head(self, hidden: Any) -> Any:
        raise NotImplementedError


def native_model_class(name: str, build: Callable[[type], type]) -> type:
    """The class ``build(NativeHead)`` returns, built once per ``name``."""
    if name not in _CLASSES:
        _CLASSES[name] = build(NativeHead)
    return _CLASSES[name]

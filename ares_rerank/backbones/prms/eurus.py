"""EurusPRM (``kind="prm-eurus"``): PRIME-RL/EurusPRM-Stage1 and -Stage2, implicit PRMs read against
Qwen/Qwen2.5-Math-7B-Instruct with ``beta = 0.001``.

The model cards' usage code, and so this preset of :class:`~ares_rerank.backbones.prms.implicit.ImplicitPRM`: the
PRM's tokenizer and chat template on ``[{"role": "user", "content": query}, {"role": "assistant", "content":
"\\n\\n".join(steps)}]`` (no system message: Qwen2.5-Math's template adds its default one), the PRM and the reference
``AutoModelForCausalLM`` on the same ids, ``coef * (log p_prm - log p_ref)`` masked from the card's first read
position, cumulatively summed and gathered at each step's ``len(prefix ids) - 2``; the card prints that
``beta_reward``, and the probability here is its sigmoid (the implicit ORM's probability under its cross-entropy
objective). A reference model of your own: ``ref_model=`` (a hub id, folder or loaded model).
"""

from __future__ import annotations

from .implicit import ImplicitPRM


__all__ = ["EURUS_REFERENCE_MODEL", "EurusPRM"]

#: The reference model of EurusPRM's model cards.
EURUS_REFERENCE_MODEL = "Qwen/Qwen2.5-Math-7B-Instruct"


class EurusPRM(ImplicitPRM):
    """EurusPRM, scored as its model card scores it (see the module docstring and
    :class:`~ares_rerank.backbones.prms.implicit.ImplicitPRM` for the arguments; ``beta`` 0.001, ``"\\n\\n"``
    between steps, no system turn, ``read_offset`` -2, the cumulative reward)."""

    kind = "prm-eurus"
    hub_ids = ("PRIME-RL/EurusPRM-Stage1", "PRIME-RL/EurusPRM-Stage2")
    default_ref_model = EURUS_REFERENCE_MODEL

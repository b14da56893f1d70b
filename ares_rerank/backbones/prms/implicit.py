"""Implicit PRMs (``kind="prm-implicit"``): a PRM causal LM and a reference causal LM, the step reward read from the
log-probability ratio of the two (PRIME's implicit process reward, arXiv 2412.01981 / 2502.01456).

An implicit PRM is trained as an outcome reward model whose reward is ``beta * log pi_prm(y) / pi_ref(y)``; its
value after the tokens up to position ``t`` is ``q_t = beta * sum_{i <= t} (log pi_prm(y_i | y_<i) - log
pi_ref(y_i | y_<i))`` over the response's tokens, and ``sigmoid(q_t)`` is the probability it gives that the response
so far leads to a correct answer (the sigmoid of the cross-entropy objective it was trained with). This module reads
it the way EurusPRM's model card code does (:mod:`~ares_rerank.backbones.prms.eurus` is that preset):

- text: the tokenizer's chat template on a user turn (the question: the included base claims) and an assistant turn
  (the steps joined by ``step_separator``, ``"\\n\\n"``), no system message unless ``system_prompt`` is given (the
  template may add its own default), no generation prompt; tokenized in one call, as ``apply_chat_template(...,
  tokenize=True)`` does;
- step ends: for ``k = 0 .. n`` steps, the chat template of the first ``k`` steps, stripped, plus the separator when
  ``0 < k < n``, tokenized: ``L_k`` tokens. The log-ratios are summed from token position ``L_0 + read_offset`` (the
  card's label mask) through position ``L_k + read_offset + 1`` for step ``k`` (the card's cumulative sum gathered at
  ``L_k - 2`` of the shifted log-probabilities: ``read_offset = -2``). The positions follow the card exactly, its
  quirks included: an earlier step's sum ends one token into the next step (the separator and the next step's first
  token), the last step's at the end-of-turn token;
- score: ``reward="cumulative"`` (default, the card's printed value): ``q`` at step ``k``'s end, from the start of
  the response; ``reward="step"``: ``q_k - q_{k-1}``, the sum over step ``k``'s own tokens (PRIME's dense process
  reward ``r_t``); then ``sigmoid(beta * sum)``.

ARES's premise masks: the input of a pair is the chain made of the subset (the included base claims as the
question, the included earlier steps, the judged step last), read at the judged step's end.

**Two models, one pass each.** Both models read the same token ids (the PRM's tokenizer, as the card feeds them to
the reference model), each in one forward pass per batch, each with shared-prefix reuse and its own prefix store
(:mod:`~ares_rerank.backbones.prefix`, :mod:`~ares_rerank.backbones.kv_store`): the decoder's last hidden states go
through the batching and caching, and the output embedding (``lm_head``) is applied only at the positions read, so
the stored values are the hidden states (``hidden_size`` numbers a position, not the vocabulary). The reference's
token counts are in ``.reference.token_stats``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..hf import HFBackbone
from ..hub import load_model_and_tokenizer
from ..prefix import causal_cache_argument, forward_parameters
from .base import PRMBackbone


__all__ = ["IMPLICIT_REWARDS", "ImplicitPRM", "decoder_hidden_states"]

#: The ``reward`` option's values (module docstring).
IMPLICIT_REWARDS = ("cumulative", "step")
# A model whose logits are not the output embedding of its last hidden state (post-processed): read wrongly here.
_LOGIT_POSTPROCESSING = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")
_WRAPPERS: dict[str, type] = {}


def decoder_hidden_states(lm: Any) -> Any:
    """A module whose forward is ``lm``'s decoder and whose output ``.logits`` are its last hidden states.

    The batching, shared-head and prefix-store machinery of :class:`~ares_rerank.backbones.hf.HFBackbone` reads a
    model's ``.logits``; given this module, it carries ``(rows, length, hidden_size)`` states instead of the
    vocabulary, and the caller applies ``lm.get_output_embeddings()`` at the positions it reads.

    Raises:
        TypeError: ``lm`` is not a causal LM with a separate decoder and output embedding, or its config
            post-processes the logits (soft-capping, a logit scale), which the output embedding alone would miss.
    """
    import torch

    base = getattr(lm, "base_model", None)
    head = lm.get_output_embeddings() if hasattr(lm, "get_output_embeddings") else None
    if not isinstance(lm, torch.nn.Module) or base is None or base is lm or head is None:
        raise TypeError(f"{type(lm).__name__} is not a causal LM with a decoder and an output embedding (lm_head): an "
                        "implicit PRM reads next-token log-probabilities of two causal LMs (AutoModelForCausalLM).")
    config = getattr(lm, "config", None)
    for name in _LOGIT_POSTPROCESSING:
        value = getattr(config, name, None)
        if value not in (None, 1, 1.0, 0, 0.0):
            raise TypeError(f"{type(lm).__name__} post-processes its logits (config.{name}={value!r}): its "
                            "log-probabilities are not the output embedding of the last hidden state, which is what "
                            "kind='prm-implicit' reads. Use a Qwen2 / Llama-style causal LM.")
    if "wrapper" not in _WRAPPERS:
        _WRAPPERS["wrapper"] = _build_wrapper(torch)
    return _WRAPPERS["wrapper"](lm)


def _build_wrapper(torch: Any) -> type:
    from types import SimpleNamespace

    class DecoderHiddenStates(torch.nn.Module):
        """``lm``'s decoder; ``forward(...).logits`` = its last hidden states (after the final norm)."""

        def __init__(self, lm: Any) -> None:
            super().__init__()
            self.decoder = lm.base_model
            self.config = lm.config
            # transformers renamed past_key_values to cache in 5.x: pass it by the name the decoder takes
            self.cache_name = causal_cache_argument(self.decoder) or (
                "cache" if "cache" in forward_parameters(self.decoder) else "past_key_values")

        def forward(self, input_ids: Any = None, attention_mask: Any = None, position_ids: Any = None,
                    cache: Any = None, use_cache: bool | None = None) -> Any:
            extra = {"position_ids": position_ids} if position_ids is not None else {}
            use_cache = cache is not None if use_cache is None else use_cache  # no cache built for a plain pass
            out = self.decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=use_cache,
                               **{self.cache_name: cache}, **extra)
            return SimpleNamespace(logits=out.last_hidden_state)

    return DecoderHiddenStates


class ImplicitPRM(PRMBackbone):
    """An implicit PRM: ``sigmoid(beta * sum of log pi_prm / pi_ref)`` at each step's end (module docstring).

    Args:
        model: The PRM, a causal LM (``AutoModelForCausalLM``).
        tokenizer: Its tokenizer (with the chat template the PRM was trained on); both models read its ids.
        ref_model: The reference causal LM the PRM was trained against (a loaded model here;
            :meth:`from_pretrained` also takes a hub id or folder). Its vocabulary must be the PRM's.
        beta: The reward scale the PRM was trained with (EurusPRM: 0.001).
        reward: ``"cumulative"`` (default: the value at the step's end, from the start of the response, as the card
            prints it) or ``"step"`` (the step's own tokens only).
        step_separator: Joins the steps in the assistant turn (the card's ``"\\n\\n"``).
        system_prompt: A system turn; ``None`` (default) sends none, as the card does (the template may add its own).
        read_offset: Where the sums start and end relative to the rendered prefixes' lengths (module docstring;
            the card's ``-2``).
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``overlong_steps``, ``prefix_cache``, ``prefix_store_mb`` (and the window options of
            :class:`~ares_rerank.backbones.prms.base.PRMBackbone`); ``batch_size``, ``prefix_cache`` and
            ``prefix_store_mb`` apply to the reference model too.
    """

    kind = "prm-implicit"
    reads = "log-ratio"
    auto_class = "AutoModelForCausalLM"
    #: The reference model :meth:`from_pretrained` loads when ``ref_model`` is not given (a preset's card default).
    default_ref_model: str | None = None

    def __init__(self, model: Any, tokenizer: Any, ref_model: Any = None, *, beta: float = 0.001,
                 reward: str = "cumulative", step_separator: str = "\n\n", system_prompt: str | None = None,
                 read_offset: int = -2, **kwargs: Any) -> None:
        import math

        served = model is None  # a served forward pass (vllm_completions.ServedLogRatio) reads the two servers
        if served and type(self).token_logprobs is ImplicitPRM.token_logprobs:
            raise TypeError(f"{type(self).__name__} got model=None: pass the loaded PRM causal LM, or serve it with "
                            "load_backbone(prm_url, kind='vllm-completions', family='prm-implicit', ref_url=..., "
                            "tokenizer=...).")
        if not served and (ref_model is None or isinstance(ref_model, (str, Path))):
            given = "no ref_model" if ref_model is None else f"ref_model={str(ref_model)!r}"
            raise TypeError(f"{type(self).__name__} got {given}: pass the loaded reference causal LM, or load with "
                            f"{type(self).__name__}.from_pretrained(prm, ref_model='hub id or folder') / "
                            "load_backbone(prm, kind='prm-implicit', ref_model=...) (EurusPRM's card: "
                            "'Qwen/Qwen2.5-Math-7B-Instruct').")
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta <= 0:
            raise ValueError(f"beta={beta!r} must be a finite number > 0: the reward scale the PRM was trained with "
                             "(EurusPRM: 0.001).")
        if reward not in IMPLICIT_REWARDS:
            raise ValueError(f"reward={reward!r} is unknown: use 'cumulative' (default: the value at the step's end, "
                             "as the card reads it) or 'step' (the step's own tokens).")
        if not isinstance(step_separator, str) or not step_separator:
            raise ValueError(f"step_separator={step_separator!r} must be a non-empty string (the card's '\\n\\n').")
        if isinstance(read_offset, bool) or not isinstance(read_offset, int):
            raise TypeError(f"read_offset={read_offset!r} must be an integer (the card's -2).")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(f"system_prompt={system_prompt!r} must be a string or None (no system turn).")
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"{type(self).__name__} renders with the tokenizer's chat template, and "
                             f"{type(tokenizer).__name__} has none: load the PRM's own tokenizer.")
        if served:
            super().__init__(None, tokenizer, **kwargs)
            self.reference: HFBackbone | None = None
        else:
            prm_vocab = _vocabulary(model, "model")
            ref_vocab = _vocabulary(ref_model, "ref_model")
            if prm_vocab != ref_vocab:
                raise ValueError(f"the PRM's vocabulary has {prm_vocab} entries and ref_model's {ref_vocab}: both "
                                 "models read the PRM tokenizer's ids, so the reference must share its vocabulary "
                                 "(EurusPRM's: Qwen/Qwen2.5-Math-7B-Instruct).")
            self.prm_model, self.ref_model = model, ref_model
            self.prm_head, self.ref_head = model.get_output_embeddings(), ref_model.get_output_embeddings()
            super().__init__(decoder_hidden_states(model), tokenizer, **kwargs)
            shared = {key: kwargs[key] for key in ("batch_size", "prefix_cache", "prefix_store_mb") if key in kwargs}
            #: The reference model's forward path (its own shared heads, prefix store and token counts).
            self.reference = HFBackbone(decoder_hidden_states(ref_model), tokenizer, **shared)
            self.max_length = min(self.max_length, self.reference.max_length)
        self.beta = float(beta)
        self.reward = reward
        self.step_separator = step_separator
        self.system_prompt = system_prompt
        self.read_offset = read_offset

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, *, ref_model: Any = None, device: Any = "auto",
                        dtype: Any = "auto", trust_remote_code: bool = False, revision: str | None = None,
                        token: str | bool | None = None, cache_dir: str | Path | None = None,
                        local_files_only: bool = False, ref_revision: str | None = None,
                        **kwargs: Any) -> ImplicitPRM:
        """Load the PRM (a folder or hub id) and its reference model (``ref_model``: a hub id, folder or loaded
        model; default :attr:`default_ref_model`), both with ``device`` / ``dtype`` and the hub options
        (``ref_revision`` pins the reference's commit); ``kwargs`` go to the constructor.
        """
        ref_model = cls.default_ref_model if ref_model is None else ref_model
        if ref_model is None:
            raise ValueError(f"{cls.__name__}.from_pretrained({str(name_or_path)!r}) needs ref_model=: the hub id or "
                             "folder of the reference causal LM the PRM was trained against (EurusPRM's card: "
                             "'Qwen/Qwen2.5-Math-7B-Instruct').")
        hub = {"token": token, "cache_dir": cache_dir, "local_files_only": local_files_only}
        if isinstance(ref_model, (str, Path)):
            ref_model, _, _ = load_model_and_tokenizer(ref_model, "AutoModelForCausalLM", device=device, dtype=dtype,
                                                       trust_remote_code=trust_remote_code, revision=ref_revision,
                                                       calibrated=False, **hub)
        backbone = super().from_pretrained(name_or_path, device=device, dtype=dtype,
                                           trust_remote_code=trust_remote_code, revision=revision, ref_model=ref_model,
                                           **hub, **kwargs)
        return backbone

    def clear_caches(self) -> None:
        """Forget every score and every stored prefix, the reference model's included."""
        super().clear_caches()
        if self.reference is not None:
            self.reference.clear_caches()

    def reset_stats(self) -> None:
        """Zero the counters, the reference model's included (its token counts are ``.reference.token_stats``)."""
        super().reset_stats()
        if self.reference is not None:
            self.reference.reset_stats()

    # -- rendering ------------------------------------------------------------------------------------------------
    def conversation(self, question: str, answer: str) -> str:
        """The chat template on the user turn ``question`` and the assistant turn ``answer`` (no generation
        prompt), as the card renders both the whole input and each prefix."""
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        return self.conversation(self.question(base_claims), self.step_separator.join(steps))

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        """Token ids of :meth:`render`'s text and, per step, the last token position its sum reads.

        Returns:
            ``{"input_ids": [...], "start": s, "tags": [e_1, ..., e_n]}``: step ``k``'s cumulative sum runs over the
            log-ratios of the tokens at positions ``s .. e_k`` (module docstring).

        Raises:
            ValueError: ``read_offset`` puts a position outside the input (no token before the first read, or a read
                past the end).
        """
        question = self.question(base_claims)
        steps = list(steps)
        ids = self._encode(self.render(base_claims, steps))
        lengths = []
        for k in range(len(steps) + 1):
            prefix = self.conversation(question, self.step_separator.join(steps[:k])).strip()
            if 0 < k < len(steps):
                prefix += self.step_separator
            lengths.append(len(self._encode(prefix)))
        start = lengths[0] + self.read_offset
        tags = [n + self.read_offset + 1 for n in lengths[1:]]
        if start < 1 or any(t >= len(ids) for t in tags):
            raise ValueError(f"read_offset={self.read_offset} reads outside the input of {len(ids)} tokens (first "
                             f"read at {start}, last at {max(tags, default=start)}; the first needs a token before it):"
                             " use the card's -2, or an offset that fits this chat template.")
        return {"input_ids": ids, "start": start, "tags": tags}

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    # -- reading --------------------------------------------------------------------------------------------------
    def step_rewards(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[float]:
        """The raw rewards of a whole chain in one pass per model: ``beta`` times the summed log-ratios at each
        step's end (``reward="cumulative"``: the card's ``beta_reward``; ``"step"``: each step's own), no sigmoid."""
        import torch

        item = {**self.encode_chain(base_claims, steps), "all_tags": True}
        with torch.inference_mode():
            return self.tag_rewards([item])[0]

    def tag_rewards(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """Per item, the raw rewards (no sigmoid) at its wanted steps: every step's (``"all_tags"``) or the last's."""
        prm, ref = self.token_logprobs(items)
        out = []
        for item, lp_prm, lp_ref in zip(items, prm, ref):
            ratio = (lp_prm - lp_ref) * self.beta  # positions start .. last tag, in the PRM's float32
            sums = ratio.cumsum(0)
            start = item["start"]
            q = [float(sums[e - start]) if e >= start else 0.0 for e in item["tags"]]
            if self.reward == "step":
                q = [b - a for a, b in zip([0.0] + q[:-1], q)]
            out.append(q if item.get("all_tags") else q[-1:])
        return out

    def token_logprobs(self, items: Sequence[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
        """Per item, ``log p(ids[t] | ids[:t])`` for ``t = start .. last tag`` (1-d tensors) under the PRM and under
        the reference, each model in one batch (a served implicit PRM asks its two servers instead)."""
        return (_token_logprobs(self, self.prm_head, items),
                _token_logprobs(self.reference, self.ref_head, items))  # type: ignore[arg-type]

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """``sigmoid`` of :meth:`tag_rewards`."""
        return [[1.0 / (1.0 + _exp(-r)) for r in rewards] for rewards in self.tag_rewards(items)]


def _exp(x: float) -> float:
    import math

    return math.exp(x) if x < 700 else math.inf


def _vocabulary(model: Any, name: str) -> int:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None or not hasattr(head, "weight"):
        raise TypeError(f"{name}={type(model).__name__} has no output embedding (lm_head): an implicit PRM needs two "
                        "causal LMs (AutoModelForCausalLM).")
    return int(head.weight.shape[0])


def _token_logprobs(backbone: HFBackbone, head: Any, items: Sequence[dict[str, Any]]) -> list[Any]:
    """Per item, ``log p(ids[t] | ids[:t])`` for ``t = start .. last tag`` under one model: its decoder's hidden
    states from ``backbone.forward_logits`` (one batch, shared heads and stored prefixes reused), then ``head`` and a
    float32 log-softmax at those positions only."""
    import torch

    hidden = backbone.forward_logits(backbone.pad(items), transform_key="hidden-states")  # (rows, width, hidden)
    device = head.weight.device
    out = []
    for b, item in enumerate(items):
        start, end = item["start"], max(item["tags"][-1], item["start"])
        states = hidden[b, start - 1 : end].to(device)  # position t - 1 predicts token t
        targets = torch.tensor(item["input_ids"][start : end + 1], dtype=torch.long, device=device)
        logits = head(states).float()
        out.append(torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None])[:, 0].cpu())
    return out

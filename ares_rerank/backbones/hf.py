"""Shared machinery of the Hugging Face backbones: window policy, cache, batching, and their public encode API.

Every backbone here follows one path per ``entailment_probs`` call:

1. **premise selection** (a :mod:`~ares_rerank.backbones.selection` stage, default ``"all"``);
2. **cache lookup** keyed by (selected premises, their roles, hypothesis): a pair seen before, in this call or an
   earlier one, is never recomputed (LRU, ``cache_size`` entries; :mod:`~ares_rerank.backbones.cache`);
3. **rendering** into token ids under the **window policy**: the hypothesis is never cut; when the premises do not
   fit the model's window, they are ranked by lexical relevance to the hypothesis
   (:func:`~ares_rerank.backbones.selection.relevance_scores`) and kept most relevant first, in their original order,
   and the drop is counted in :attr:`HFBackbone.stats`; a hypothesis that alone exceeds the window is an error
   (:class:`~ares_rerank.backbones.window.TokenWindow`, whose :meth:`fit_window` subclasses call);
4. **length-sorted batches with dynamic padding** (each batch padded to its own longest item), one forward pass per
   batch under ``torch.inference_mode``; on a CPU a wave is cut into batches where padding would cost more positions
   than a model call (:func:`~ares_rerank.backbones.prefix.plan_batches`), not every ``batch_size`` items; on an
   accelerator it keeps the fewest calls (:meth:`HFBackbone.batch_plan`);
5. **shared-prefix reuse** (``prefix_cache``, on by default for causal decoders): the inputs of one ARES step share a
   long head (chat template, system prompt, the question, often earlier steps). Items are then batched in token-id
   order (neighbours share the longest heads; :mod:`~ares_rerank.backbones.prefix` cuts a batch where a new head
   starts), each batch's common head runs once with a KV cache (:class:`transformers.DynamicCache`), and only the
   suffixes run, right-padded, on that cache repeated to the batch. The logits are laid out exactly as the full pass
   lays them out, so every reader is unchanged; values agree with the full pass to float rounding (tested to 1e-4,
   float32).
   Bidirectional encoders (BERT, MiniLM: every token attends to every other, so a head's states depend on what
   follows) cannot reuse a prefix: for them it is off, and asking for it is an error.

Steps 1 and 3 for one pair are :meth:`HFBackbone.encode_pair` (what training tokenizes, so a head trains on exactly
the inputs it is scored on); step 4 is :meth:`HFBackbone.score_encoded`, built on :meth:`HFBackbone.pad`; step 5 is
:meth:`HFBackbone.forward_logits`, which the causal backbones (PRMs, the LLM judge) run their batches through.

Loading (adapters, calibration) lives in :mod:`~ares_rerank.backbones.hub`, device / dtype selection in
:mod:`~ares_rerank.backbones.devices`; what a tokenizer and model accept (the window, special-token markers, chat
templates) in :mod:`~ares_rerank.backbones.tokenization`. Torch and transformers are imported inside the functions
that need them, so ``import ares_rerank`` stays light.

About 560 lines: the batched, sorted, prefix-cached forward pass that every Hugging Face backbone kind inherits;
what differs per kind lives in the kind's own module.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Hashable, Sequence

from ..calibration import entailment_probs_from_logits
from ..utils.checks import check_positive_int, is_int
from .cache import LRUCache, PairKey, ScoringStats, cached_values, pair_keys
from .hub import load_model_and_tokenizer
from .kv_store import PrefixStore
from .prefix import (
    CALL_COST,
    TokenStats,
    causal_cache_argument,
    forward_parameters,
    logits_with_shared_head,
    output_logits,
    plan_batches,
    shared_prefix_length,
)
from .selection import PremiseSelector, get_selector
from .tokenization import model_window
from .window import TokenWindow, check_window


__all__ = ["HFBackbone", "softmax_pick", "split_pairs"]

class HFBackbone(TokenWindow):
    """Base of the Hugging Face backbones: selection, cache, window policy, batching. Subclasses render and score.

    Subclasses implement ``_render(claims, roles, hypothesis, kept) -> item`` (a dict with ``input_ids``) and
    ``_score_batch(items) -> list`` (one forward pass); a backbone that renders base claims and earlier steps apart
    also overrides ``_roles``.

    Public API beyond the backbone protocol: :meth:`predict` (``(premises, hypothesis)`` pairs -> a numpy array, as
    ``CrossEncoder.predict``); and for training and benchmarks that must build the very inputs inference builds,
    :meth:`encode_pair` (one pair, selection and window policy included), :meth:`pad` (items -> a padded batch of
    tensors), :meth:`score_encoded` (items -> one value each, in batches), :meth:`forward_logits` (a padded batch ->
    the model's logits, its shared head run once) and :attr:`input_keys` (the item keys the model takes).

    Args:
        model: A loaded transformers model (eval mode, on its device).
        tokenizer: Its tokenizer.
        batch_size: At most this many items per forward pass (on a CPU fewer where padding them to one length
            would cost more than another call: :meth:`batch_plan`).
        max_length: The window in tokens (default: the model's).
        premise_selection: ``"all"``, ``"relevant"``, ``"relevant:K"`` or a selector, applied before rendering.
        cache_size: Entries of the LRU cache (0 disables it).
        overlong_steps: A step that alone does not fit the window: ``"error"`` (default: never scored on a cut
            text without being asked) or ``"truncate"`` (keep its first tokens that fit, with no premises; counted
            in ``stats.hypotheses_truncated``; for benchmarks with a few degenerate steps).
        window: Premises that do not all fit the window (:data:`~ares_rerank.backbones.window.WINDOW_CHOICES`):
            ``"relevant"`` (default: keep those most relevant to the hypothesis that fit, in order),
            ``"truncate"`` (drop the earliest premises first, keep the latest that fit) or ``"refuse"`` (a
            ValueError with the counts, naming this option). Every drop is counted in ``stats``.
        prefix_cache: Shared-prefix reuse (module docstring, step 5): ``None`` (default) = on when the model is a
            causal decoder that takes a KV cache (:func:`causal_cache_argument`), off otherwise (bidirectional
            encoders such as BERT / MiniLM cannot reuse a prefix); ``True`` = on, an error for a model that cannot;
            ``False`` = off (every batch runs whole, in length-sorted batches). Token counts are in
            :attr:`token_stats`.
        prefix_store_mb: With ``prefix_cache`` on, the keys and values of inputs read earlier are kept, at most
            this many MiB, so that an input extending one (ARES's next step, a longer chain) runs only its new tokens
            (:mod:`~ares_rerank.backbones.kv_store`); 0 turns it off.
    """

    auto_class = "AutoModel"  # the transformers Auto class that from_pretrained loads subclasses with
    #: The keys of an encoded item that are model inputs (others, such as a PRM's ``tags``, are bookkeeping).
    input_keys: Sequence[str] = ("input_ids",)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 16,
        max_length: int | None = None,
        premise_selection: str | PremiseSelector = "all",
        cache_size: int = 100_000,
        overlong_steps: str = "error",
        prefix_cache: bool | None = None,
        prefix_store_mb: int = 1024,
        window: str = "relevant",
    ) -> None:
        check_positive_int(batch_size, "batch_size", 16)
        if overlong_steps not in ("error", "truncate"):
            raise ValueError(f"overlong_steps={overlong_steps!r} is unknown: use 'error' (default) or 'truncate'.")
        self.overlong_steps = overlong_steps
        self.window = check_window(window)
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = model_window(model, tokenizer, max_length)
        self.selector = get_selector(premise_selection)
        self.cache = LRUCache(cache_size)
        self.stats = ScoringStats()
        self.token_stats = TokenStats()
        self.cache_argument = causal_cache_argument(model)
        if prefix_cache is not None and not isinstance(prefix_cache, bool):
            raise TypeError(f"prefix_cache={prefix_cache!r} must be True, False or None (on for causal decoders).")
        if prefix_cache and self.cache_argument is None:
            raise ValueError(
                f"prefix_cache=True, but {type(model).__name__} is not a causal decoder whose forward takes a KV cache "
                "(a bidirectional encoder such as BERT cannot reuse a shared prefix): pass prefix_cache=None or False."
            )
        self.prefix_cache = self.cache_argument is not None if prefix_cache is None else prefix_cache
        if not is_int(prefix_store_mb) or prefix_store_mb < 0:
            raise ValueError(f"prefix_store_mb={prefix_store_mb!r} must be a whole number of MiB >= 0 (0: no store).")
        # inputs read earlier, kept to be extended (kv_store): only where a shared head can be reused at all
        self.prefix_store = PrefixStore(prefix_store_mb * 2**20) if self.prefix_cache and prefix_store_mb else None
        self.position_argument = self.cache_argument is not None and "position_ids" in forward_parameters(model)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_id = int(pad) if pad is not None else 0

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, *, device: Any = "auto", dtype: Any = "auto",
                        adapter: str | Path | None = None, base_model: str | Path | None = None,
                        trust_remote_code: bool = False, model_kwargs: dict[str, Any] | None = None,
                        revision: str | None = None, token: str | bool | None = None,
                        cache_dir: str | Path | None = None, local_files_only: bool = False,
                        **kwargs: Any) -> HFBackbone:
        """Load with :meth:`model_class` (optionally with a peft adapter); ``kwargs`` go to the constructor, after
        the backbone's presets for a known hub id (``hub_presets``, e.g. a PRM's training separator).

        ``name_or_path`` is a folder or hub id, or a peft adapter (its base from ``base_model`` or its config).
        ``revision``, ``token``, ``cache_dir`` and ``local_files_only`` are passed to every download, as in
        transformers (:class:`~ares_rerank.backbones.hub.HubOptions`). ``trust_remote_code`` is opt-in: it runs the
        checkpoint's own Python code.
        """
        kwargs = {**getattr(cls, "hub_presets", {}).get(str(name_or_path).lower(), {}), **kwargs}
        model, tokenizer, _ = load_model_and_tokenizer(
            name_or_path, cls.model_class(), device=device, dtype=dtype, adapter=adapter,
            base_model=base_model, trust_remote_code=trust_remote_code, model_kwargs=model_kwargs,
            revision=revision, token=token, cache_dir=cache_dir, local_files_only=local_files_only, calibrated=False,
        )
        backbone = cls(model, tokenizer, **kwargs)
        backbone.source = str(adapter or name_or_path)
        return backbone

    @classmethod
    def model_class(cls) -> str | type:
        """What :meth:`from_pretrained` loads the model with: ``auto_class`` (a transformers Auto class name), or a
        model class of the backbone's own (the native PRM architectures)."""
        return cls.auto_class

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def reset_stats(self) -> None:
        self.stats = ScoringStats()
        self.token_stats = TokenStats()

    def clear_caches(self) -> None:
        """Forget every score and every stored prefix (the next call reads every input from its first token)."""
        self.cache.clear()
        if self.prefix_store is not None:
            self.prefix_store.clear()

    # -- the protocol ---------------------------------------------------------------------------------------------
    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> list[float]:
        """One probability per (premises[i], hypotheses[i]); see the module docstring for the steps taken."""
        return self._probs(premises, hypotheses)

    def predict(self, pairs: Sequence[tuple[str | Sequence[str], str]], batch_size: int | None = None,
                show_progress_bar: bool | None = None) -> Any:
        """Score ``(premises, hypothesis)`` pairs, as ``CrossEncoder.predict`` scores text pairs: one probability each.

        The same path as :meth:`entailment_probs` (premise selection, cache, window policy, length-sorted batches);
        pairs are taken in order of length, ``batch_size`` at a time (on a CPU cut smaller where padding would cost
        more than a call, :meth:`batch_plan`).

        Args:
            pairs: ``(premises, hypothesis)`` pairs. ``premises`` is one string (one premise, never split) or a list
                of claims (premise selection and the window policy choose among them); ``hypothesis`` is the step.
                One pair is ``[(premises, hypothesis)]``.
            batch_size: At most this many pairs per forward pass (default: the backbone's ``batch_size``).
            show_progress_bar: A tqdm bar over the pairs; ``None`` shows it when there is more than one batch.

        Returns:
            A float64 numpy array of shape ``(len(pairs),)``: P(premises entail hypothesis) (a PRM: P(the step is
            correct after the premises); a judge: its expected answer), each in [0, 1].

        Example:
            >>> head.predict([(["All men are mortal.", "Socrates is a man."], "Socrates is mortal."),
            ...               ("It rains.", "The street is dry.")], batch_size=32)  # doctest: +SKIP
            array([0.97, 0.04])
        """
        import numpy as np
        from tqdm.auto import tqdm

        size = self.batch_size if batch_size is None else batch_size
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be a positive integer, e.g. 32, or None for the "
                             f"backbone's ({self.batch_size}).")
        premises, hypotheses = split_pairs(pairs)
        order = sorted(range(len(pairs)), key=lambda i: sum(map(len, premises[i])) + len(hypotheses[i]))
        out = np.zeros(len(order), dtype=np.float64)
        show = len(order) > size if show_progress_bar is None else bool(show_progress_bar)
        default_size, self.batch_size = self.batch_size, size  # score_encoded batches by self.batch_size
        try:
            with tqdm(total=len(order), desc="predict", unit="pair", disable=not show, leave=False) as bar:
                for start in range(0, len(order), size):
                    chunk = order[start : start + size]
                    out[chunk] = self.entailment_probs([premises[i] for i in chunk], [hypotheses[i] for i in chunk])
                    bar.update(len(chunk))
        finally:
            self.batch_size = default_size
        return out

    def _probs(
        self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str], num_base: Sequence[int] | None = None
    ) -> list[float]:
        keys = pair_keys(self.selector, premises, hypotheses, self._roles(premises, num_base))
        return [float(v) for v in cached_values(self.cache, self.stats, keys, self._compute)]

    def _roles(
        self, premises: Sequence[Sequence[str]], num_base: Sequence[int] | None
    ) -> list[tuple[str, ...] | None]:
        """Per pair, the role of each premise; ``None``: this backbone renders every premise alike."""
        return [None] * len(premises)

    def _compute(self, keys: list[PairKey]) -> list[Any]:
        return self.score_encoded([self._encode_key(key) for key in keys])

    def _encode_key(self, key: PairKey) -> dict[str, Any]:
        """The model input of one cache key (premises already selected), under the window policy."""
        claims, roles, hypothesis = key
        return self.fit_window(list(claims), roles, hypothesis)

    # -- public encode / batch API ---------------------------------------------------------------------------------
    def encode_pair(
        self, premises: Sequence[str], hypothesis: str, num_base: int | None = None
    ) -> dict[str, Any]:
        """One model input exactly as :meth:`entailment_probs` builds it: premise selection, rendering, window policy.

        Training tokenizes its pairs with this, so a head is trained on the inputs it is later scored on.

        Args:
            premises: The included claims, in chain order.
            hypothesis: The judged step.
            num_base: How many of ``premises`` are base claims; read by backbones that render base claims and
                earlier steps apart (the PRMs), ignored by the others.

        Returns:
            A dict with ``input_ids`` (and the kind's other keys: ``token_type_ids`` for a sentence-pair encoder,
            ``tags`` for a PRM); plain lists, unpadded. A drop by the window policy is counted in ``stats``.
        """
        roles = self._roles([premises], None if num_base is None else [num_base])
        return self._encode_key(pair_keys(self.selector, [premises], [hypothesis], roles)[0])

    def pad(self, items: Sequence[dict[str, Any]], keys: Sequence[str] | None = None) -> dict[str, Any]:
        """Right-pad encoded items into one batch of tensors on the model's device.

        Args:
            items: Encoded items (from :meth:`encode_pair`), at least one.
            keys: The item keys to pad (``input_ids`` with the pad token, others with 0); default: the
                :attr:`input_keys` present in the first item.

        Returns:
            ``{key: LongTensor (batch, longest item)}`` for each key, plus ``attention_mask``: ready for
            ``model(**batch)``.
        """
        import torch

        if not items:
            raise ValueError("pad(items=[]) got no items: pass at least one encoded item (from encode_pair).")
        if keys is None:
            keys = [k for k in self.input_keys if k in items[0]]
        width = max(len(item["input_ids"]) for item in items)
        batch: dict[str, Any] = {}
        for key in keys:
            fill = self.pad_id if key == "input_ids" else 0
            rows = [list(item[key]) + [fill] * (width - len(item[key])) for item in items]
            batch[key] = torch.tensor(rows, dtype=torch.long, device=self.device)
        mask = [[1] * len(item["input_ids"]) + [0] * (width - len(item["input_ids"])) for item in items]
        batch["attention_mask"] = torch.tensor(mask, dtype=torch.long, device=self.device)
        return batch

    def batch_plan(self, items: Sequence[dict[str, Any]]) -> list[list[int]]:
        """How :meth:`score_encoded` batches ``items``: lists of indices, at most ``batch_size`` each.

        On a CPU a model call is weighed at :data:`CALL_COST` positions (MiniLM on two cores: ~6 ms a call, ~0.13 ms
        a position, so ~45), so a wave is cut where padding would cost more (ARES on 20 PRMBench chains: 33% fewer
        positions, wall 3.4x -> 2.6x Entail-Prev's). On an accelerator a small model's call is
        launch-bound rather than compute-bound, so there the plan keeps the fewest calls (``ceil(n / batch_size)``,
        as fixed chunks would) and only places the cuts where they pad least. The prefix-cache path weighs its
        shared heads at :data:`CALL_COST` on every device, as before.
        """
        sequences = [item["input_ids"] for item in items]
        if self.prefix_cache:
            return plan_batches(sequences, self.batch_size)
        on_cpu = getattr(self.device, "type", "cpu") == "cpu"
        # on an accelerator: more than any padding a cut could save, so the fewest calls come first
        call_cost = CALL_COST if on_cpu else len(sequences) * max(map(len, sequences), default=0) + 1
        return plan_batches(sequences, self.batch_size, call_cost=call_cost, shared_heads=False)

    def score_encoded(self, items: Sequence[dict[str, Any]]) -> list[Any]:
        """Score encoded items in batches of at most ``batch_size``, each padded to its own longest item.

        Batches are length-sorted and, on a CPU, cut where padding would cost more than a model call; with
        ``prefix_cache`` on, they follow token-id order instead, cut where a new shared head starts
        (:meth:`batch_plan`). No cache: every item goes through the model (counted in ``stats``).

        Args:
            items: Encoded items (from :meth:`encode_pair`).

        Returns:
            One value per item, in order: the entailment probability (a PRM scoring a whole chain: one per step).
        """
        import torch

        batches = self.batch_plan(items)
        out: list[Any] = [None] * len(items)
        with torch.inference_mode():
            for chunk in batches:
                values = self._score_batch([items[i] for i in chunk])
                self.stats.forward_passes += 1
                self.stats.pairs_computed += len(chunk)
                for i, value in zip(chunk, values):
                    out[i] = value
        return out

    def forward_logits(self, batch: dict[str, Any], transform: Callable[[Any], Any] | None = None,
                       transform_key: Hashable | None = None) -> Any:
        """The model's per-token logits for one right-padded batch (from :meth:`pad`), its shared head run once.

        With ``prefix_cache`` on and a head shared by every row worth a second call (``(rows - 1) * head >``
        :data:`CALL_COST`; every row keeps at least one token of its own), the head runs once with a
        ``DynamicCache``, the cache is repeated to the batch, and the suffixes run on it with the full attention
        mask and positions continuing after the head. Otherwise one plain forward pass. With ``transform_key`` and
        the prefix store on (:mod:`~ares_rerank.backbones.kv_store`), a row that extends an input read earlier runs
        only its new tokens on that input's stored keys and values.

        Args:
            batch: ``{key: (rows, width)}`` tensors with ``attention_mask``, right-padded.
            transform: Applied to each (rows, length, classes) piece of logits before they are joined, to keep
                only what the caller reads (e.g. two vocabulary columns) instead of the whole vocabulary.
            transform_key: Names ``transform`` (the same key must mean the same transform): stored logits are
                reused only under it. ``None``: nothing is stored or reused across calls.

        Returns:
            ``(rows, width, ...)``: row b, position t < its length holds the (transformed) logits the full pass
            gives there (padding positions hold no meaning).
        """
        transform = transform or (lambda logits: logits)
        if transform_key is not None and self.prefix_store is not None:
            return self._logits_with_store(batch, transform, transform_key)
        return self._logits(batch, transform, want_cache=False)[0]

    def _logits(self, batch: dict[str, Any], transform: Callable[[Any], Any], want_cache: bool) -> tuple[Any, Any]:
        """``(logits, the filled KV cache or None)`` of one batch: the shared head once, else one plain pass."""
        mask = batch["attention_mask"]
        rows, width = mask.shape
        real = int(mask.sum())
        head = 0
        if self.prefix_cache and rows > 1:
            head = shared_prefix_length([r[: int(n)] for r, n in zip(batch["input_ids"].tolist(), mask.sum(1))])
        if (rows - 1) * head > CALL_COST:
            result = logits_with_shared_head(self.model, batch, head, self.cache_argument, transform,
                                             self.position_argument)
            if result is None:
                warnings.warn(
                    f"{type(self.model).__name__} took a KV cache but did not fill it: shared-prefix reuse is now off "
                    "for this backbone (pass prefix_cache=False to say so up front).", stacklevel=3,
                )
                self.prefix_cache, self.prefix_store = False, None
            else:
                self.stats.forward_passes += 1  # the shared head's own call (score_encoded counts the batch's)
                self.token_stats.tokens += real - (rows - 1) * head
                self.token_stats.positions += head + rows * (width - head)
                self.token_stats.reused += (rows - 1) * head
                self.token_stats.shared_heads += 1
                return result
        self.token_stats.tokens += real
        self.token_stats.positions += rows * width
        if not want_cache:
            return transform(output_logits(self.model(**batch))), None
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        output = self.model(**batch, **{self.cache_argument: cache}, use_cache=True)
        return transform(output_logits(output)), cache

    def _logits_with_store(self, batch: dict[str, Any], transform: Callable[[Any], Any],
                           transform_key: Hashable) -> Any:
        """:meth:`forward_logits` with the prefix store: the rows that extend a stored input run their new tokens in
        one call on the stored keys and values (:meth:`_extend_stored`); the others run as one batch; every row read is
        stored."""
        lengths = batch["attention_mask"].sum(1).tolist()
        ids = [row[:n] for row, n in zip(batch["input_ids"].tolist(), lengths)]
        found = [self.prefix_store.longest(transform_key, row) for row in ids]
        # a stored head saves a call's worth of tokens; ragged heads need explicit positions
        extend = [r for r, (_, n) in enumerate(found) if n > CALL_COST and self.position_argument]
        rest = [r for r in range(len(ids)) if r not in set(extend)]
        pieces: dict[int, Any] = {}
        if rest:
            width = max(lengths[r] for r in rest)
            logits, cache = self._logits({k: v[rest, :width] for k, v in batch.items()}, transform, want_cache=True)
            keep_layers = self._plain_layers(cache)
            for j, r in enumerate(rest):
                pieces[r] = logits[j, : lengths[r]]
                if keep_layers:
                    layers = [(layer.keys[j : j + 1, :, : lengths[r]], layer.values[j : j + 1, :, : lengths[r]])
                              for layer in cache.layers]
                    self.prefix_store.put(transform_key, ids[r], _cloned(layers), pieces[r].detach().clone())
        if extend:
            pieces.update(self._extend_stored(transform, transform_key, [ids[r] for r in extend],
                                              [found[r] for r in extend], extend))
            self.stats.forward_passes += 1 if rest else 0  # score_encoded counts one call per batch
        out = pieces[0].new_zeros((len(ids), batch["input_ids"].shape[1], *pieces[0].shape[1:]))
        for r, piece in pieces.items():
            out[r, : len(piece)] = piece
        return out

    def _extend_stored(self, transform: Callable[[Any], Any], transform_key: Hashable, ids: list[list[int]],
                       found: list[tuple[Any, int]], rows: list[int]) -> dict[int, Any]:
        """One call for rows whose first ``n`` tokens are stored: the stored keys and values, each row's padded to
        the longest head ``P`` (the padding masked out), then the new tokens at cache positions ``P, P + 1, ...`` with
        their true positions ``n, n + 1, ...``. Returns row -> logits of every position (stored ones for the head)."""
        import torch
        from transformers import DynamicCache

        heads = [n for _, n in found]
        news = [len(row) - n for row, n in zip(ids, heads)]
        width_head, width_new = max(heads), max(news)
        device = self.device
        past = []
        for layer in range(len(found[0][0].layers)):
            keys, values = [], []
            for stored, n in found:
                k, v = stored.layers[layer]
                pad = (0, 0, 0, width_head - n)  # (rows, heads, tokens, dim): zeros after the head, masked
                keys.append(torch.nn.functional.pad(k[..., :n, :], pad))
                values.append(torch.nn.functional.pad(v[..., :n, :], pad))
            past.append((torch.cat(keys).to(device), torch.cat(values).to(device)))
        cache = DynamicCache(ddp_cache_data=past, config=self.model.config)
        input_ids = torch.full((len(ids), width_new), self.pad_id, dtype=torch.long, device=device)
        mask = torch.zeros((len(ids), width_head + width_new), dtype=torch.long, device=device)
        positions = torch.zeros((len(ids), width_new), dtype=torch.long, device=device)
        for j, (row, n, s) in enumerate(zip(ids, heads, news)):
            input_ids[j, :s] = torch.tensor(row[n:], dtype=torch.long)
            mask[j, :n] = 1
            mask[j, width_head : width_head + s] = 1
            positions[j] = torch.arange(n, n + width_new)
        output = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            **{self.cache_argument: cache}, use_cache=True)
        new = transform(output_logits(output))  # (rows, width_new, ...)
        keep_layers = self._plain_layers(cache)
        out = {}
        for j, ((stored, n), s, r) in enumerate(zip(found, news, rows)):
            out[r] = torch.cat([stored.logits[:n].to(new.dtype), new[j, :s]], dim=0)
            if keep_layers:  # the row's head and its new tokens, without the padding between them
                real = torch.cat([torch.arange(n), torch.arange(width_head, width_head + s)]).to(device)
                layers = [(layer.keys[j : j + 1].index_select(2, real), layer.values[j : j + 1].index_select(2, real))
                          for layer in cache.layers]
                self.prefix_store.put(transform_key, ids[j], layers, out[r].detach().clone())
        self.token_stats.tokens += sum(news)
        self.token_stats.positions += len(ids) * width_new
        self.token_stats.reused += sum(heads)
        return out

    def _plain_layers(self, cache: Any) -> bool:
        """Whether ``cache`` holds only plain full-attention layers (whose head is a prefix's cache); if not, the
        prefix store is turned off (sliding windows, linear attention, ...)."""
        layers = getattr(cache, "layers", None)
        if layers and all(type(layer).__name__ == "DynamicLayer" for layer in layers):
            return self.prefix_store is not None
        self.prefix_store = None
        return False

    # -- for subclasses ------------------------------------------------------------------------------------------
    def _render(self, claims: list[str], roles: tuple | None, hypothesis: str, kept: list[int]) -> dict[str, Any]:
        raise NotImplementedError

    def _score_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        # the folder or hub id it was loaded from (an adapter's folder, not its base), else the model's own name
        name = getattr(self, "source", None) or getattr(getattr(self.model, "config", None), "_name_or_path", "")
        return f"{type(self).__name__}({name or type(self.model).__name__!r})"


def split_pairs(pairs: Any) -> tuple[list[list[str]], list[str]]:
    """``[(premises, hypothesis), ...]`` -> ``(premise lists, hypotheses)``; a string premise is a list of one.

    Raises:
        TypeError: ``pairs`` is not a list of 2-item pairs of text (the message names the pair and the fix).
    """
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence):
        raise TypeError(f"pairs is {type(pairs).__name__}: pass a list of (premises, hypothesis) pairs.")
    premises: list[list[str]] = []
    hypotheses: list[str] = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(
                f"pairs[{i}] is {type(pair).__name__} {str(pair)[:60]!r}, not a (premises, hypothesis) pair: pass a "
                "list of pairs, e.g. [(premises, hypothesis)] for one."
            )
        claims, hypothesis = pair
        claims = [claims] if isinstance(claims, str) else claims
        if not isinstance(hypothesis, str) or isinstance(claims, bytes) or not isinstance(claims, Sequence) or not all(
            isinstance(c, str) for c in claims
        ):
            raise TypeError(
                f"pairs[{i}] must be (a string or a list of strings, a string), got ({type(pair[0]).__name__}, "
                f"{type(hypothesis).__name__})."
            )
        premises.append(list(claims))
        hypotheses.append(hypothesis)
    return premises, hypotheses


def softmax_pick(logits: Any, index: int, temperature: float = 1.0, bias: float = 0.0) -> list[float]:
    """Probability of class ``index`` per row of ``logits`` (a torch tensor, rows x classes) after ``logits /
    temperature`` and ``bias`` added to class ``index``; a single logit is a sigmoid. The arithmetic (and its checks:
    finite logits, a valid scale) is :func:`~ares_rerank.calibration.entailment_probs_from_logits`, the one
    definition that calibration fits and reports on."""
    z = logits.detach().float().cpu().numpy()
    if z.shape[-1] == 1:  # binary log-odds: (n,) becomes [0, z], class 1
        z, index = z[:, 0], 1
    return entailment_probs_from_logits(z, index, temperature, bias).tolist()


def _cloned(layers: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Copies of ``(keys, values)`` views, so the batch's tensors they view are freed."""
    return [(k.clone(), v.clone()) for k, v in layers]

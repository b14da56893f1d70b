"""What every PRM family shares: roles of the premises, the whole-chain pass, and the three ways a PRM reads a score.

A PRM family is one module beside this one (:mod:`~ares_rerank.backbones.prms`): a subclass of
:class:`PRMBackbone` that implements :meth:`~PRMBackbone.encode_chain` (the family's own input for a question and
its steps: token ids and, per step, the position whose output scores it) and :meth:`~PRMBackbone.tag_probs` (the
score at those positions), usually by calling one of the readers here: :func:`positive_class_probs` (a token
classifier), :func:`token_pair_probs` (a causal LM's next-token ``good`` / ``bad`` logits) or
:func:`sigmoid_probs` (a scalar value head).

**ARES's premise masks** (ARES_SPEC section 3). The backbone protocol passes the included claims of each pair plus
``num_base`` (how many of them are base claims); the judged step comes last. The family's input for that pair is
exactly its input for the chain made of the subset: the included base claims joined into the question
(``question_separator``, default a newline), the included earlier steps, then the judged step, read at the judged
step's position. Two masks that differ in any claim render different inputs.

**One pass per chain.** Every family here reads every step of a chain in one forward pass (``prm-chain``), and on a
decoder the inputs of one ARES step share their head (system turn, question, first steps), which runs once with a KV
cache (``prefix_cache``, :meth:`~ares_rerank.backbones.hf.HFBackbone.forward_logits`).
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from ..cache import cached_value
from ..hf import HFBackbone


__all__ = [
    "PRMBackbone",
    "TaggedTextPRM",
    "encode_spans",
    "positive_class_probs",
    "sigmoid_probs",
    "token_pair_probs",
]

BASE, STEP = "base", "step"


class PRMBackbone(HFBackbone):
    """A process reward model as an ARES backbone: roles, whole-chain pass and the encode API of every family.

    Public beyond :class:`~ares_rerank.backbones.hf.HFBackbone`: :meth:`render` (the text the family's model
    reads), :meth:`encode_chain` (token ids and read positions, what PRM training labels), :meth:`tag_probs` (the
    per-step scores of encoded items) and :meth:`chain_step_probs` (the ``prm-chain`` baseline).

    Args:
        model: The loaded model.
        tokenizer: Its tokenizer.
        question_separator: Joins the included base claims into the question (default a newline; a chain built from
            one prompt with ``prompt_split="none"`` has one base claim, the prompt itself).
        **kwargs: ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``, ``overlong_steps``,
            ``window``, ``prefix_cache`` (see :class:`~ares_rerank.backbones.hf.HFBackbone`).
    """

    #: The family's name in the kinds table (``load_backbone(..., kind=...)``).
    kind = "prm"
    #: What the score is read from: ``"token-class"`` (a token classifier's labels), ``"next-token"`` (a causal LM's
    #: logits of a good and a bad token: servable over ``/v1/completions``) or ``"value"`` (a value head).
    reads = ""
    #: Hub ids of the family's published models (``load_backbone`` picks the family from them, any case).
    hub_ids: tuple[str, ...] = ()
    #: ``config.architectures`` names only this family uses (picked from them too).
    architectures: tuple[str, ...] = ()
    #: Whether :meth:`chain_step_probs` reads every step from one input (``method="prm-chain"`` counts one
    #: evaluation a chain); ``False``: one input per step (counted so).
    one_pass_chain = True
    #: Constructor defaults for a known hub id (lower case), e.g. the step separator a published PRM was trained with.
    hub_presets: dict[str, dict[str, Any]] = {}

    def __init__(self, model: Any, tokenizer: Any, *, question_separator: str = "\n", **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if not isinstance(question_separator, str):
            raise TypeError(f"question_separator={question_separator!r} must be a string, e.g. '\\n' or ' '.")
        self.question_separator = question_separator
        self._window_warned = False

    # -- what a family implements ---------------------------------------------------------------------------------
    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        """The text this PRM reads for these base claims and steps (the last step is the judged one)."""
        raise NotImplementedError

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        """The family's model input for a question (the base claims) and its steps, with no window policy.

        Returns:
            ``{"input_ids": [...], "tags": [...]}``: per step, in order, the position whose output scores it.
        """
        raise NotImplementedError

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """The "this step is correct" probability at the read positions of encoded items, one forward pass.

        Args:
            items: Encoded items (:meth:`encode_chain` / :meth:`encode_pair`); an item with ``"all_tags": True``
                is read at every step, any other at its last (the judged step) only.

        Returns:
            Per item, the probabilities at its wanted positions, in order.
        """
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------------------------
    def question(self, base_claims: Sequence[str]) -> str:
        """The included base claims as one question text."""
        return self.question_separator.join(base_claims)

    def entailment_probs(
        self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str], num_base: Sequence[int] | None = None
    ) -> list[float]:
        """Score of each hypothesis as the next step after its included premises (see the module docstring).

        Args:
            premises: Included claims per pair, in chain order (base claims first).
            hypotheses: The judged steps.
            num_base: How many of ``premises[i]`` are base claims (``score_chains`` passes it); without it every
                premise is a base claim (part of the question).
        """
        return self._probs(premises, hypotheses, num_base)

    def _roles(self, premises: Sequence[Sequence[str]], num_base: Sequence[int] | None) -> list[tuple[str, ...]]:
        """Base claims first (``num_base[i]`` of them; all premises without ``num_base``), then earlier steps."""
        if num_base is not None and len(num_base) != len(premises):
            raise ValueError(f"num_base has {len(num_base)} entries for {len(premises)} premise lists: give one each.")
        roles = []
        for i, claims in enumerate(premises):
            n = len(claims) if num_base is None else int(num_base[i])
            if not 0 <= n <= len(claims):
                raise ValueError(f"num_base[{i}]={n} is outside 0..{len(claims)} (the premise list's length).")
            roles.append((BASE,) * n + (STEP,) * (len(claims) - n))
        return roles

    def _render(self, claims: list[str], roles: tuple | None, hypothesis: str, kept: list[int]) -> dict[str, Any]:
        roles = roles or (BASE,) * len(claims)
        base = [claims[i] for i in kept if roles[i] == BASE]
        steps = [claims[i] for i in kept if roles[i] == STEP] + [hypothesis]
        return self.encode_chain(base, steps)

    def _encode_key(self, key: Any) -> dict[str, Any]:
        dropped = self.stats.premises_dropped
        item = super()._encode_key(key)
        if self.stats.premises_dropped > dropped and not self._window_warned:
            self._window_warned = True
            kept = "the latest kept: window='truncate'" if self.window == "truncate" else "most relevant kept"
            warnings.warn(
                f"{self!r}: a pair did not fit the window of {self.max_length} tokens, so "
                f"{self.stats.premises_dropped - dropped} of its {len(key[0])} premises were left out ({kept}; "
                "counted in .stats.premises_dropped / .pairs_windowed, said once per backbone). Pass a larger "
                "max_length if the model takes it, a premise_selection, or window= 'relevant' (keep the most "
                "relevant), 'truncate' (drop the earliest first) or 'refuse' (an error instead).", UserWarning,
                stacklevel=2,
            )
        return item

    def chain_step_probs(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[float]:
        """PRM whole-chain baseline: one pass over the question and all steps, the score at every step's position.

        If the chain does not fit the window, base claims are dropped as ``window`` says (``"relevant"``: least
        relevant to the steps first; ``"truncate"``: earliest first; ``"refuse"``: an error), counted in ``stats``;
        the steps are never cut (a ValueError naming the lengths if they alone do not fit).
        """
        key = ("chain", tuple(base_claims), tuple(steps))
        return list(cached_value(self.cache, self.stats, key, lambda: self._chain_values(base_claims, steps)))

    def _chain_values(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[float, ...]:
        steps = [str(s) for s in steps]
        base_claims = [str(c) for c in base_claims]
        item = self.encode_chain(base_claims, steps)
        if len(item["input_ids"]) <= self.max_length:
            return tuple(self.score_encoded([{**item, "all_tags": True}])[0])
        bare = len(self.encode_chain([], steps)["input_ids"])
        if bare > self.max_length:
            raise ValueError(
                f"the chain's {len(steps)} steps need {bare} tokens with no question, more than the window of "
                f"{self.max_length}: the whole-chain pass (method='prm-chain') never cuts steps, overlong_steps "
                "included. Score it per step (method='ares' or 'entail-prev', where a step is judged after its "
                "premises), split the chain, or pass a larger max_length if the model takes it."
            )

        def render_chain(claims: list[str], roles: Any, hypothesis: str, kept: list[int]) -> dict[str, Any]:
            return self.encode_chain([claims[i] for i in kept], steps)

        item = self.fit_window(base_claims, None, " ".join(steps), render=render_chain)
        return tuple(self.score_encoded([{**item, "all_tags": True}])[0])

    def tag_rows(self, items: Sequence[dict[str, Any]]) -> list[list[int]]:
        """The positions each item is read at: every step's (``"all_tags"``) or the judged step's."""
        return [item["tags"] if item.get("all_tags") else item["tags"][-1:] for item in items]

    def _score_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        probs = self.tag_probs(items)  # one list of per-step probabilities per item
        return [p if item.get("all_tags") else p[-1] for p, item in zip(probs, items)]


class TaggedTextPRM(PRMBackbone):
    """A family whose input is one text with a tag token after each step (Math-Shepherd, Math-psa, VersaPRM,
    ActPRM): a subclass writes :meth:`tagged_text` and sets ``tag_id``; rendering and encoding are written here once.
    """

    #: The tag's token id, which must end every span :meth:`tagged_text` reports (set by the subclass).
    tag_id: int

    def tagged_text(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
        """The family's text for a question and its steps, with the character span of each step's tag."""
        raise NotImplementedError

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        return self.tagged_text(base_claims, steps)[0]

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        text, spans = self.tagged_text(base_claims, steps)
        ids, tags = encode_spans(self.tokenizer, text, spans, add_special_tokens=True,
                                 expected_ids=[self.tag_id] * len(spans))
        return {"input_ids": ids, "tags": tags}


# -- the readers ------------------------------------------------------------------------------------------------------
def positive_class_probs(prm: PRMBackbone, items: Sequence[dict[str, Any]], positive_index: int) -> list[list[float]]:
    """A token classifier's softmax probability of ``positive_index`` at each item's read positions."""
    import torch

    logits = prm.forward_logits(prm.pad(items), transform_key="all")  # (batch, seq, labels)
    probs = torch.softmax(logits.float(), dim=-1)[..., positive_index]  # (batch, seq)
    return [probs[b, rows].tolist() for b, rows in enumerate(prm.tag_rows(items))]


def token_pair_probs(prm: PRMBackbone, items: Sequence[dict[str, Any]], good_id: int, bad_id: int) -> list[list[float]]:
    """A causal LM's ``P(good) / (P(good) + P(bad))`` from the next-token logits at each item's read positions
    (the softmax over the two columns, as Math-Shepherd's and RLHFlow's scoring code take it)."""
    import torch

    columns = [good_id, bad_id]
    logits = prm.forward_logits(prm.pad(items), lambda x: x[..., columns], ("columns", good_id, bad_id))  # (b, s, 2)
    pair = torch.softmax(logits.float(), dim=-1)[..., 0]  # (batch, seq)
    return [pair[b, rows].tolist() for b, rows in enumerate(prm.tag_rows(items))]


def sigmoid_probs(prm: PRMBackbone, items: Sequence[dict[str, Any]]) -> list[list[float]]:
    """A scalar value head's sigmoid at each item's read positions (the model's logits are ``(batch, seq, 1)``)."""
    import torch

    values = prm.forward_logits(prm.pad(items), transform_key="all")  # (batch, seq, 1)
    probs = torch.sigmoid(values.float()[..., 0])  # (batch, seq)
    return [probs[b, rows].tolist() for b, rows in enumerate(prm.tag_rows(items))]


def encode_spans(tokenizer: Any, text: str, spans: Sequence[tuple[int, int]], add_special_tokens: bool,
                 expected_ids: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """Tokenize ``text`` in one call (as a family's own ``tokenizer.encode(text)`` does) and find each character
    span's last token.

    Args:
        tokenizer: A fast tokenizer (it reports character offsets).
        text: The whole rendered input.
        spans: ``(start, end)`` character spans (a step tag, an answer token), in order.
        add_special_tokens: As the family's code tokenizes (Math-Shepherd's ``encode`` adds BOS; a chat template
            holds its own).
        expected_ids: Per span, the token id that must end it (the tag's id); a ValueError names the span whose
            text merged into another token.

    Returns:
        ``(input_ids, positions)``: one position per span, the index of the last token overlapping it.
    """
    try:
        encoded = tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True, verbose=False)
    except NotImplementedError as err:  # slow tokenizers report no offsets
        raise TypeError(f"{type(tokenizer).__name__} is not a fast tokenizer: load the PRM's tokenizer with "
                        "AutoTokenizer (use_fast=True), which reports the character offsets this family needs."
                        ) from err
    ids, offsets = list(encoded["input_ids"]), list(encoded["offset_mapping"])
    positions, t = [], 0
    for j, (start, end) in enumerate(spans):
        while t < len(offsets) and not (offsets[t][1] >= end and offsets[t][1] > offsets[t][0]):
            t += 1
        if t == len(offsets) or offsets[t][0] >= end or offsets[t][1] <= start:
            raise ValueError(f"no token ends the span {text[start:end]!r} at characters {start}-{end} of the input.")
        if expected_ids is not None and ids[t] != expected_ids[j]:
            raise ValueError(
                f"the span {text[start:end]!r} at characters {start}-{end} tokenized into "
                f"{tokenizer.convert_ids_to_tokens([ids[t]])} with its neighbours, not its own token "
                f"{tokenizer.convert_ids_to_tokens([expected_ids[j]])}: the text next to it merges with it."
            )
        positions.append(t)
        t += 1
    return ids, positions


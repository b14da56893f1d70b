"""A causal LM as an entailment judge (ARES_SPEC section 3), and the LLM-Judge whole-chain baseline.

**Yes/No mode** (default): a prompt with the context (included claims, newline-joined) and the hypothesis asks for
Yes or No; score = ``P(Yes) / (P(Yes) + P(No))`` from the next-token logits of one forward pass (no sampling).
**Likert mode**: the paper's 7-point scale (Very Likely 1.0 ... Very Unlikely 0.0) by constrained scoring: each label
is scored as a continuation of the prompt (sum of its token log-probabilities), the scores are normalised over the
seven labels, and the result is the expected value of the mapped numbers. Both modes are one mechanism: answer
options with values, ``score = sum_i P(option_i) * value_i`` with ``P`` normalised over the options. When every
option is a single token this is one pass over the prompt; otherwise one pass per (prompt, option), and the options'
sequences of one prompt share it as a head that runs once (``prefix_cache``, on by default, as the prompts of one
ARES step share their template and context: :meth:`~ares_rerank.backbones.hf.HFBackbone.forward_logits`).

:class:`JudgeBase` holds what this judge shares with the served
:class:`~ares_rerank.backbones.openai_judge.OpenAIJudge`: the pair prompt (:meth:`JudgeBase.render`) and the
LLM-Judge whole-chain baseline (:meth:`JudgeBase.chain_step_probs`: one greedy generation rating every step).
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

from .cache import LRUCache, ScoringStats, cached_value
from .hf import HFBackbone
from .tokenization import special_prefix, wants_chat_template


__all__ = [
    "CHAIN_PROMPT",
    "JUDGE_PROMPT",
    "LIKERT_OPTIONS",
    "NO_CONTEXT",
    "PLAIN_SUFFIX",
    "JudgeBase",
    "LLMJudge",
    "check_missing_rating",
    "numbered_steps",
    "parse_step_ratings",
]

JUDGE_PROMPT = (
    "Context:\n{context}\n\nHypothesis:\n{hypothesis}\n\n"
    "Does the context entail the hypothesis? Answer Yes or No."
)
LIKERT_PROMPT = (
    "Context:\n{context}\n\nHypothesis:\n{hypothesis}\n\n"
    "How likely is it that the context entails the hypothesis? Answer with one of: {labels}."
)
CHAIN_PROMPT = (
    "Context:\n{context}\n\nReasoning steps:\n{steps}\n\n"
    "For every step, rate how likely it is entailed by the context and the steps before it. Answer with one line per "
    "step, 'Step <number>: <rating>', the rating one of: {labels}."
)
LIKERT_OPTIONS: dict[str, float] = {
    "Very Likely": 1.0,
    "Likely": 0.8,
    "Somewhat Likely": 0.6,
    "Neutral": 0.5,
    "Somewhat Unlikely": 0.4,
    "Unlikely": 0.2,
    "Very Unlikely": 0.0,
}
NO_CONTEXT = "(none)"
# Ends the plain-text prompt (no chat template), local or served: the answer is the next token.
PLAIN_SUFFIX = "\nAnswer:"


def parse_step_ratings(text: str, num_steps: int, options: dict[str, float] | None = None) -> list[float | None]:
    """Read ``Step <i>: <rating>`` lines from a judge's answer; ``None`` for a step it did not rate.

    Ratings are the Likert labels (case-insensitive, the longest matching label wins, so "Very Unlikely" is not read
    as "Unlikely") or Yes / No (1.0 / 0.0). Steps are matched by their number, never by position, so a skipped or
    extra line cannot shift the others; numbers outside ``1..num_steps`` are ignored; the first rating of a step wins.
    """
    options = {**(options or LIKERT_OPTIONS), "Yes": 1.0, "No": 0.0}
    labels = sorted(options, key=len, reverse=True)
    pattern = re.compile(
        r"step\s*(\d+)\s*[:.)\-]?\s*\**\s*(" + "|".join(re.escape(label) for label in labels) + r")\b", re.IGNORECASE
    )
    lookup = {label.lower(): value for label, value in options.items()}
    ratings: list[float | None] = [None] * num_steps
    for match in pattern.finditer(text):
        i = int(match.group(1)) - 1
        if 0 <= i < num_steps and ratings[i] is None:
            ratings[i] = lookup[match.group(2).lower()]
    return ratings


class JudgeBase:
    """What the local and the served LLM judge share: the pair prompt and the LLM-Judge whole-chain baseline.

    A subclass sets ``prompt``, ``likert_options``, ``cache`` (:class:`~ares_rerank.backbones.cache.LRUCache`),
    ``stats``, ``max_new_tokens``, ``missing_rating`` and ``last_ratings``, and implements ``_generate``: where
    the model runs (:class:`LLMJudge`: locally, dropping base claims that do not fit its window;
    :class:`~ares_rerank.backbones.openai_judge.OpenAIJudge`: one request to the server).
    """

    prompt: str
    likert_options: dict[str, float]
    cache: LRUCache
    stats: ScoringStats
    max_new_tokens: int | None
    missing_rating: float | None
    last_ratings: list[float | None]

    def render(self, premises: Sequence[str], hypothesis: str) -> str:
        """The user text for one (premises, hypothesis) pair, before any chat template."""
        context = "\n".join(premises) or NO_CONTEXT
        return self.prompt.format(context=context, hypothesis=hypothesis, labels=", ".join(self.likert_options))

    def render_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        """The user text asking the judge to rate every step of a chain (:data:`CHAIN_PROMPT`)."""
        return CHAIN_PROMPT.format(context="\n".join(base_claims) or NO_CONTEXT, steps=numbered_steps(steps),
                                   labels=", ".join(self.likert_options))

    def chain_step_probs(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[float]:
        """LLM-Judge: one greedy generation rating every step; ratings parsed by step number (cached per chain).

        A step the answer does not rate gets ``missing_rating`` (0.5 by default; ``None`` -> ValueError); the ratings
        of the last generated answer are in ``self.last_ratings`` (``None`` for an unrated step). Extra or
        out-of-range lines are ignored. The generation budget is ``max_new_tokens``, default 12 per step + 16.
        """
        key = ("judge-chain", tuple(base_claims), tuple(steps))
        return list(cached_value(self.cache, self.stats, key, lambda: self._rate_chain(base_claims, steps)))

    def _rate_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[float, ...]:
        budget = self.max_new_tokens or 12 * len(steps) + 16
        answer = self._generate([str(c) for c in base_claims], [str(s) for s in steps], budget)
        self.last_ratings = parse_step_ratings(answer, len(steps), self.likert_options)
        missing = [i + 1 for i, r in enumerate(self.last_ratings) if r is None]
        if missing and self.missing_rating is None:
            raise ValueError(
                f"the judge rated {len(steps) - len(missing)} of {len(steps)} steps (missing: {missing}) in "
                f"{answer[:200]!r}: set missing_rating=0.5 to score unrated steps as neutral, or raise max_new_tokens."
            )
        return tuple(float(self.missing_rating if r is None else r) for r in self.last_ratings)

    def _generate(self, base_claims: list[str], steps: list[str], max_new_tokens: int) -> str:
        """The model's greedy answer (at most ``max_new_tokens``) to :meth:`render_chain`'s prompt."""
        raise NotImplementedError


def numbered_steps(steps: Sequence[str]) -> str:
    """``"Step 1: ...\\nStep 2: ..."``: the steps as the chain prompt lists them."""
    return "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps))


def check_missing_rating(missing_rating: float | None) -> float | None:
    """``missing_rating`` if it is a number in [0, 1] or ``None``, else a ValueError saying so."""
    if missing_rating is not None and not (isinstance(missing_rating, (int, float)) and 0 <= missing_rating <= 1):
        raise ValueError(f"missing_rating={missing_rating!r} must be a number in [0, 1] (e.g. 0.5) or None (raise).")
    return missing_rating


class LLMJudge(JudgeBase, HFBackbone):
    """A causal LM answering "does the context entail the hypothesis?" as an ARES backbone.

    Args:
        model: A loaded causal LM.
        tokenizer: Its tokenizer. With a chat template, the prompt is a user turn (after an optional system turn)
            followed by the generation prompt; without one, plain text ending in ``"\\nAnswer:"``.
        mode: ``"yes-no"`` or ``"likert"``.
        answer_tokens: ``(yes, no)`` strings for yes-no mode; default ``("Yes", "No")`` after a chat template,
            ``(" Yes", " No")`` after plain text. Multi-token answers are scored as sequences.
        likert_options: Label -> value for likert mode (default: the paper's 7 points).
        prompt: Template with ``{context}`` and ``{hypothesis}`` (and ``{labels}`` in likert mode).
        system_prompt: Optional system turn (chat template only).
        missing_rating: For :meth:`chain_step_probs`: the value of a step the judge did not rate (default 0.5, "no
            information"); ``None`` raises a ValueError instead.
        max_new_tokens: Generation budget of :meth:`chain_step_probs` (default: 12 per step + 16).
        **kwargs: ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``, ``prefix_cache``
            (default: on).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        mode: str = "yes-no",
        answer_tokens: tuple[str, str] | None = None,
        likert_options: dict[str, float] | None = None,
        prompt: str | None = None,
        system_prompt: str | None = None,
        use_chat_template: bool | None = None,
        missing_rating: float | None = 0.5,
        max_new_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if mode not in ("yes-no", "likert"):
            raise ValueError(f"mode={mode!r} is not supported: use 'yes-no' or 'likert'.")
        self.chat = wants_chat_template(tokenizer, use_chat_template)
        self.mode = mode
        self.system_prompt = system_prompt
        self.likert_options = dict(likert_options or LIKERT_OPTIONS)
        if mode == "likert":
            self.prompt = prompt or LIKERT_PROMPT
            options = self.likert_options
        else:
            self.prompt = prompt or JUDGE_PROMPT
            space = "" if self.chat else " "
            yes, no = answer_tokens or (space + "Yes", space + "No")
            options = {yes: 1.0, no: 0.0}
        self.options = self._encode_options(options)
        self.missing_rating = check_missing_rating(missing_rating)
        self.max_new_tokens = max_new_tokens
        self.last_ratings: list[float | None] = []

    def _encode_options(self, options: dict[str, float]) -> list[tuple[list[int], float]]:
        if len(options) < 2:
            raise ValueError(f"the judge needs at least two answer options, got {list(options)}.")
        encoded = []
        for text, value in options.items():
            if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"answer option {text!r} has value {value!r}: values must lie in [0, 1].")
            ids = self.tokenizer.encode(text, add_special_tokens=False, verbose=False)
            if not ids:
                raise ValueError(f"answer option {text!r} encodes to no tokens: pass a non-empty answer string.")
            encoded.append((ids, float(value)))
        if len({tuple(ids) for ids, _ in encoded}) < len(encoded):
            raise ValueError(f"answer options {list(options)} tokenize identically: pass distinguishable answers.")
        # The vocabulary columns scoring reads: the options' tokens (log-probabilities of the rest are never read).
        self._columns = sorted({t for ids, _ in encoded for t in ids})
        self._column = {t: j for j, t in enumerate(self._columns)}
        return encoded

    auto_class = "AutoModelForCausalLM"

    # -- rendering ---------------------------------------------------------------------------------------------------
    def _prompt_ids(self, user_text: str) -> list[int]:
        if not self.chat:
            ids = self.tokenizer.encode(user_text + PLAIN_SUFFIX, add_special_tokens=False, verbose=False)
            return special_prefix(self.tokenizer) + ids
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": user_text})
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.tokenizer.encode(text, add_special_tokens=False, verbose=False)

    def _render(self, claims: list[str], roles: tuple | None, hypothesis: str, kept: list[int]) -> dict[str, Any]:
        return {"input_ids": self._prompt_ids(self.render([claims[i] for i in kept], hypothesis))}

    def _encode_key(self, key: tuple) -> dict[str, Any]:
        claims, roles, hypothesis = key
        reserve = max(len(ids) for ids, _ in self.options)  # room for the longest answer
        return self.fit_window(list(claims), roles, hypothesis, reserve=reserve)

    def _compute(self, keys: list[tuple]) -> list[float]:
        items = [self._encode_key(key) for key in keys]
        if all(len(ids) == 1 for ids, _ in self.options):
            return self.score_encoded(items)
        # Multi-token options: one sequence per (item, option); log P(option | prompt) summed over its tokens.
        sequences = [
            {"input_ids": item["input_ids"] + ids, "answer": len(ids)} for item in items for ids, _ in self.options
        ]
        logps = self.score_encoded(sequences)
        k = len(self.options)
        return [self._expected(logps[i * k : (i + 1) * k]) for i in range(len(keys))]

    def _expected(self, logps: Sequence[float]) -> float:
        top = max(logps)
        weights = [math.exp(lp - top) for lp in logps]
        return sum(w * value for w, (_, value) in zip(weights, self.options)) / sum(weights)

    def _score_batch(self, items: list[dict[str, Any]]) -> list[float]:
        import torch

        batch = self.pad(items)
        columns = self._columns
        # (batch, seq, option tokens): next-token log-probabilities over the whole vocabulary, at the options' tokens
        logp = self.forward_logits(batch, lambda x: torch.log_softmax(x.float(), dim=-1)[..., columns])
        lengths = batch["attention_mask"].sum(dim=1)  # right padding: real tokens come first
        out = []
        for b, item in enumerate(items):
            n = int(lengths[b])
            if "answer" in item:  # a (prompt + option) sequence: sum log P of the option's tokens
                a = item["answer"]
                targets = [self._column[t] for t in batch["input_ids"][b, n - a : n].tolist()]
                index = torch.tensor(targets, device=logp.device)[:, None]
                out.append(float(logp[b, n - a - 1 : n - 1].gather(-1, index).sum()))
            else:  # the prompt alone: next-token distribution over the single-token options
                out.append(self._expected([float(logp[b, n - 1, self._column[ids[0]]]) for ids, _ in self.options]))
        return out

    # -- LLM-Judge whole-chain baseline (JudgeBase.chain_step_probs) ------------------------------------------------
    def _generate(self, base_claims: list[str], steps: list[str], max_new_tokens: int) -> str:
        """Greedy generation on the chain prompt; base claims that do not fit the window are dropped least relevant
        first, and the steps are never cut."""
        import torch

        def render_chain(claims: list[str], roles: Any, hypothesis: str, kept: list[int]) -> dict[str, Any]:
            return {"input_ids": self._prompt_ids(self.render_chain([claims[i] for i in kept], steps))}

        item = self.fit_window(base_claims, None, numbered_steps(steps), reserve=max_new_tokens, render=render_chain)
        ids = torch.tensor([item["input_ids"]], device=self.device)
        with torch.inference_mode():
            generated = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
                pad_token_id=self.pad_id,
            )
        self.stats.forward_passes += 1
        return self.tokenizer.decode(generated[0, ids.shape[1] :], skip_special_tokens=True)

"""Rerank N candidate completions of a prompt by their ARES chain score: ``score`` / ``rank`` / ``select``.

Data flow: prompt + completion -> :class:`~ares_rerank.chain.Chain` (prompt -> base claims, completion -> steps)
-> :func:`~ares_rerank.scoring.score_chains` (ARES or a baseline; the candidates of all prompts go through the
estimator together, ``batch_size`` chains per call, so one backbone call per step wave of a batch) -> per-step scores
-> an aggregate (:mod:`ares_rerank.aggregate`) -> one score per candidate -> sorted records, like
sentence-transformers' ``CrossEncoder.predict`` / ``rank``.

Like ``CrossEncoder``, the reranker takes ``batch_size`` (here: chains per estimator call) and ``show_progress_bar``
(a tqdm bar over chains for calls longer than one batch), and ``rank`` records carry ``corpus_id`` (with ``index`` as
an alias). It warns once (:class:`~ares_rerank.DemoBackboneWarning`) when the embedded demo head scores text
outside its domain.

Prompts and completions may be strings or conversations (lists of ``{"role", "content"}`` messages, TRL's
conversational format): the contents of the ``prompt_roles`` messages become the prompt text, the contents of the
assistant messages the completion text. A string that a chat template rendered (OpenRLHF's and verl's prompts, a
query decoded with its special tokens) is read back the same way (:mod:`ares_rerank.chat_templates`): role headers,
end markers and ``<think>`` tags never become part of a claim or a step.

About 560 lines, most of them the public verbs' docstrings (score / rank / select, each also batched); the records,
answers and votes it uses are modules of their own.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from typing import Any, Sequence

from . import fingerprint
from ..aggregate import Aggregate, aggregate_scores, get_aggregate
from .answers import AnswerFn, AnswerMatcher, answer_matcher
from ..backbones.base import Backbone, is_sampled
from ..utils.http import is_outage
from ..baselines import check_method_backbone
from ..chain import (COMPLETION_ROLES, DEFAULT_THRESHOLD, PROMPT_ROLES, Chain, ChainScores, message_text, split_prompt,
                     split_steps)
from ..chat_templates import ChatLayout, prompt_text, resolve_layout, response_text
from ..backbones.demo import DemoBackboneWarning, demo_warning_message, is_demo_backbone, off_domain_reason
from ..estimator.batch import check_sampled_mode
from ..estimator.config import AresConfig, flag_threshold
from ..utils.checks import is_int
from .records import (NO_STEPS, Ranking, certificate, check_candidate_lists, empty_record, rank_record,
                      rank_records)
from ..scoring import METHODS, check_batch_size, length_error, progress_bar, score_chains
from .voting import check_selection, order_by_vote


__all__ = ["AresReranker", "message_text", "rank_records", "resolve_backbone"]

logger = logging.getLogger(__name__)

_ON_ERROR = ("raise", "none")


def _load_backbone(spec: str, **kwargs: Any) -> Backbone:
    """Load a backbone by name or path (imported here: loading pulls in transformers)."""
    from ..backbones.loading import load_backbone

    return load_backbone(spec, **kwargs)


def resolve_backbone(backbone: Backbone | str, **load_kwargs: Any) -> Backbone:
    """Return ``backbone`` itself, or load it when it is a name / path (``"default"``, a checkpoint directory, ...).

    Args:
        backbone: A backbone object, or a spec for ``ares_rerank.load_backbone``.
        **load_kwargs: Passed to ``load_backbone`` for a spec (e.g. ``kind="nli"``).
    """
    if isinstance(backbone, str):
        return _load_backbone(backbone, **load_kwargs)
    if not hasattr(backbone, "entailment_probs"):
        raise TypeError(
            f"backbone={backbone!r} has no entailment_probs(premises, hypotheses) method: pass a backbone object, "
            "a name or path for ares_rerank.load_backbone (e.g. 'default'), or wrap a function with FunctionBackbone."
        )
    return backbone


class AresReranker:
    """Score, rank and select candidate reasoning chains with ARES (or a baseline) on any backbone.

    Args:
        backbone: An object with ``entailment_probs(premises, hypotheses)``, or a name / path for
            ``ares_rerank.load_backbone`` (``"default"``, a checkpoint directory, ...).
        config: ARES estimator settings (``AresConfig()`` when ``None``); ignored by baselines.
        method: ``"ares"`` or a baseline of :data:`~ares_rerank.scoring.METHODS` (``"entail-prev"``, ...), so the
            same data can be scored both ways. Underscores are accepted for dashes.
        step_separator: Splits a completion into steps: a literal string, ``"re:<regex>"``, or ``None`` for
            sentences.
        prompt_split: How the prompt becomes base claims: ``"none"`` (one claim), ``"sentences"`` or ``"lines"``.
        aggregate: Default chain score: ``"final"``, ``"mean"``, ``"min"``, ``"product"`` or a callable.
        prompt_roles: For conversational prompts, the roles whose messages form the prompt text.
        completion_roles: For conversational completions, the roles whose messages form the completion text.
        batch_size: Chains per estimator call (each call sends one step wave of all its chains to the backbone as
            one batch; the backbone's own ``batch_size`` sets its forward passes); ``None``: all chains of a call
            at once. Scores do not depend on it. Every scoring method takes a per-call ``batch_size=`` too.
        show_progress_bar: A tqdm bar over chains on stderr: ``None`` (default) shows it for calls longer than one
            batch, ``False`` never, ``True`` always; every scoring method takes a per-call override.
        selection: How :meth:`rank` / :meth:`select` choose: ``"best"`` (the highest chain score), or an
            answer-aware vote over the candidates' final answers: ``"majority"``, ``"weighted"`` (summed chain
            scores per answer) or ``"sound-weighted"`` (summed scores of the chains with no flagged step); see
            :mod:`ares_rerank.rerank.voting`. Per-call override ``selection=``.
        answer_fn: How final answers are read and compared for the votes: ``"standard"`` (``\\boxed{}``,
            "The answer is", ``# Answer``), ``"math-verify"`` (the ``math`` extra, as TRL's accuracy reward) or a
            callable ``fn(completion_text) -> key``; see :mod:`ares_rerank.rerank.answers`.
        chat_layout: How string prompts and completions that a chat template rendered are read back
            (:mod:`ares_rerank.chat_templates`): ``"auto"`` (default; the known layouts -- ChatML, Llama 3,
            DeepSeek-R1, Mistral, Gemma, Phi -- detected per text, plain text kept but for end markers at its end
            and ``<think>`` tags), a layout name of :data:`~ares_rerank.chat_templates.LAYOUTS`, a
            :class:`~ares_rerank.chat_templates.ChatLayout`, or ``"none"`` (strings used as they are).
        tokenizer: The policy's tokenizer (or its folder / hub id): its chat template and special tokens give the
            layout, for a template none of the known layouts covers. Give it or ``chat_layout``, not both.
        threshold: A step is flagged unsound iff tau <= threshold (the records' ``first_error``, early rejection,
            the rewards' ``first_error`` / ``flagged_frac``); default 0.5, or a deprecated ``AresConfig(threshold=)``
            (forwarded for one release).

    Example:
        >>> from ares_rerank import FunctionBackbone
        >>> overlap = FunctionBackbone(lambda P, H: [float(h.split()[-1] in " ".join(p)) for p, h in zip(P, H)])
        >>> reranker = AresReranker(overlap, prompt_split="lines")
        >>> [r["corpus_id"] for r in reranker.rank("a\\nb", ["so b", "so c"])]
        [0, 1]
    """

    # class-level fallbacks for objects pickled before these settings existed
    batch_size: int | None = 64
    show_progress_bar: bool | None = None
    selection: str = "best"
    answers: AnswerMatcher = AnswerMatcher()
    chat_layout: ChatLayout | str = "auto"
    threshold: float = DEFAULT_THRESHOLD
    _demo_warned = False

    def __init__(
        self,
        backbone: Backbone | str,
        config: AresConfig | None = None,
        method: str = "ares",
        step_separator: str | None = "\n\n",
        prompt_split: str = "none",
        aggregate: Aggregate = "final",
        prompt_roles: Sequence[str] = PROMPT_ROLES,
        completion_roles: Sequence[str] = COMPLETION_ROLES,
        batch_size: int | None = 64,
        show_progress_bar: bool | None = None,
        selection: str = "best",
        answer_fn: AnswerFn = "standard",
        chat_layout: ChatLayout | str = "auto",
        tokenizer: Any = None,
        threshold: float | None = None,
    ) -> None:
        if config is not None and not isinstance(config, AresConfig):
            raise TypeError(f"AresReranker(config=...) must be an AresConfig or None, got {type(config).__name__}.")
        method = method.replace("_", "-") if isinstance(method, str) else method
        if method not in METHODS:
            raise ValueError(f"AresReranker(method={method!r}) is unknown: use one of {list(METHODS)}.")
        split_prompt("x", prompt_split)  # validates prompt_split now, not on the first call
        split_steps("x", step_separator)  # validates step_separator
        get_aggregate(aggregate)
        for name, roles in (("prompt_roles", prompt_roles), ("completion_roles", completion_roles)):
            if isinstance(roles, str) or not isinstance(roles, Sequence) or not all(isinstance(r, str) for r in roles):
                raise TypeError(f"AresReranker({name}={roles!r}) must be a list of role names, e.g. ['user'].")
        check_batch_size(batch_size, "AresReranker")
        progress_bar(0, show_progress_bar, 0, "", "")  # validates show_progress_bar
        layout = resolve_layout(chat_layout, tokenizer)  # before the backbone loads
        self.backbone = resolve_backbone(backbone)
        check_method_backbone(method, self.backbone)  # now, not at the first call
        self.config = config or AresConfig()
        if method == "ares" and is_sampled(self.backbone):  # now: not a failed (unscored) completion per call
            check_sampled_mode(self.backbone, self.config)
        self.threshold = flag_threshold(self.config, threshold, "AresReranker(threshold")
        self.method = method
        self.step_separator = step_separator
        self.prompt_split = prompt_split
        self.aggregate = aggregate
        self.prompt_roles = tuple(prompt_roles)
        self.completion_roles = tuple(completion_roles)
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar
        self.selection = check_selection(selection, "AresReranker(selection)")
        self.answers = answer_matcher(answer_fn)
        self.chat_layout = layout
        self._demo_warned = False
        fingerprint.register(type(self))

    def __repr__(self) -> str:
        return (
            f"AresReranker(backbone={self.backbone!r}, method={self.method!r}, aggregate={self.aggregate!r}, "
            f"step_separator={self.step_separator!r}, prompt_split={self.prompt_split!r}, "
            f"selection={self.selection!r})"
        )

    # -- building chains ----------------------------------------------------------------------------------------
    def to_chain(self, prompt: Any, completion: Any) -> Chain | None:
        """The chain for one (prompt, completion) pair; ``None`` when the completion has no step (empty/blank).

        Raises:
            TypeError: The prompt or completion is neither a string nor a list of messages.
            ValueError: Their text cannot be encoded as UTF-8 (a lone surrogate), see :class:`Chain`; or the
                completion has more steps than ``config.max_steps``.
        """
        prompt_text, completion_text = self.texts(prompt, completion)
        steps = split_steps(completion_text, self.step_separator)
        if not steps:
            return None
        too_long = length_error(len(steps), self.config)
        if too_long:  # refused before the steps are checked one by one, or any memory is taken for them
            raise ValueError(too_long)
        return Chain(split_prompt(prompt_text, self.prompt_split), steps)

    def texts(self, prompt: Any, completion: Any) -> tuple[str, str]:
        """The prompt text and the completion text that a pair's chain is built from: a conversation's messages of
        ``prompt_roles`` / ``completion_roles``, and a string read back by ``chat_layout`` (see the class)."""
        prompt_str = message_text(prompt, self.prompt_roles, "prompt")
        completion_str = message_text(completion, self.completion_roles, "completion")
        if self.chat_layout == "none":
            return prompt_str, completion_str
        layout = self.chat_layout if isinstance(self.chat_layout, ChatLayout) else None
        if isinstance(prompt, str):
            prompt_str = prompt_text(prompt_str, layout, self.prompt_roles)
        if isinstance(completion, str):
            completion_str = response_text(completion_str, layout, self.completion_roles)
        return prompt_str, completion_str

    # -- scoring ------------------------------------------------------------------------------------------------
    def score_pairs(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        aggregate: Aggregate | None = None,
        on_error: str = "raise",
        *,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
    ) -> list[dict[str, Any]]:
        """Score aligned (prompt, completion) pairs, ``batch_size`` chains per estimator call.

        Args:
            prompts: One prompt per completion (strings or message lists).
            completions: The completions (strings or message lists).
            aggregate: Chain score for this call (default: the reranker's).
            on_error: ``"raise"`` propagates bad input (types, text that cannot be encoded) and backbone errors;
                ``"none"`` turns them into a record with ``score=None`` and the message in ``"error"`` (used by
                rewards: nothing escapes).
            batch_size: Chains per estimator call for this call (default: the reranker's).
            show_progress_bar: Progress bar for this call (default: the reranker's).

        Returns:
            One record per pair, in order: ``index``, ``text`` (the completion as given), ``steps``,
            ``step_scores`` (tau per step), ``score`` (the aggregate; ``None`` when the completion has no step or
            could not be scored), ``first_error`` (first step with tau <= threshold, -1 if none), ``certificate``
            (method, mode, eps, delta, num_samples, error_bounds, evaluations) and ``error``.
        """
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error={on_error!r} is not supported: use 'raise' or 'none'.")
        if isinstance(completions, str) or isinstance(prompts, str):
            raise TypeError("score_pairs(prompts, completions) takes two lists, got a string; wrap it in a list.")
        for name, value in (("prompts", prompts), ("completions", completions)):
            if not isinstance(value, Sequence):
                raise TypeError(
                    f"score_pairs({name}=...) is {type(value).__name__}: pass a list with one entry per completion."
                )
        if len(prompts) != len(completions):
            raise ValueError(
                f"score_pairs got {len(prompts)} prompts for {len(completions)} completions: pass one prompt per "
                "completion (repeat a prompt for each of its candidates)."
            )
        aggregate = self.aggregate if aggregate is None else aggregate
        get_aggregate(aggregate)
        batch_size = self.batch_size if batch_size is None else check_batch_size(batch_size, "score_pairs")
        show = self.show_progress_bar if show_progress_bar is None else show_progress_bar
        records = [empty_record(i, c) for i, c in enumerate(completions)]
        chains, owners = [], []
        for record, prompt, completion in zip(records, prompts, completions):
            try:
                chain = self.to_chain(prompt, completion)
            except (TypeError, ValueError) as err:  # not text, or text that cannot be encoded (a lone surrogate)
                if on_error == "raise":
                    raise
                record["error"] = str(err)
                continue
            if chain is None:
                record["error"] = NO_STEPS
                continue
            record["steps"] = list(chain.steps)
            chains.append(chain)
            owners.append(record)
        results = self._score_chains(chains, on_error, batch_size or max(len(chains), 1), show)
        for record, result in zip(owners, results):
            self._fill(record, result, aggregate, on_error)
        self._check_domain([r for r in owners if r["certificate"] is not None])
        return records

    def _score_chains(
        self, chains: list[Chain], on_error: str, batch_size: int, show_progress_bar: bool | None
    ) -> list[ChainScores | Exception]:
        """``batch_size`` chains per estimator call, with a progress bar over chains."""
        starts = range(0, len(chains), batch_size)
        out: list[ChainScores | Exception] = []
        with progress_bar(len(chains), show_progress_bar, len(starts), f"scoring ({self.method})", "chain") as bar:
            for start in starts:
                out += self._score_chunk(chains[start : start + batch_size], on_error)
                if bar is not None:
                    bar.update(min(batch_size, len(chains) - start))
        return out

    def _score_chunk(self, chains: list[Chain], on_error: str) -> list[ChainScores | Exception]:
        """One estimator call for the chunk; with ``on_error="none"``, a failure is retried chain by chain."""
        try:
            return list(score_chains(chains, self.backbone, self.method, self.config))
        except Exception as err:  # noqa: BLE001 -- isolated below, or re-raised
            if on_error == "raise":
                raise
            if is_outage(err):  # the server, not one chain: one at a time would pay its time limit once per chain
                logger.warning("Scoring %d chains failed with the server unavailable (%r); not retried.", len(chains),
                               err)
                return [err] * len(chains)
            first = err
        out: list[ChainScores | Exception] = []
        for chain in chains:
            try:
                out.append(score_chains([chain], self.backbone, self.method, self.config)[0])
            except Exception as err:  # noqa: BLE001 -- reported in the record, never raised (on_error="none")
                out.append(err)
        failed = sum(isinstance(result, Exception) for result in out)
        # one line per call, whatever the number of chains (a reward is called every training step)
        logger.warning("Scoring %d chains together failed (%r); scored one at a time, %d of them failed.",
                       len(chains), first, failed)
        return out

    def _fill(
        self, record: dict[str, Any], result: ChainScores | Exception, aggregate: Aggregate, on_error: str
    ) -> None:
        if isinstance(result, Exception):
            record["error"] = f"{type(result).__name__}: {result}"
            return
        try:
            record["score"] = aggregate_scores(result.step_scores, aggregate)
        except (TypeError, ValueError) as err:
            if on_error == "raise":
                raise
            record["error"] = str(err)
        except Exception as err:  # noqa: BLE001 -- a custom aggregate's own failure, named (on_error="none": kept)
            message = f"aggregate={aggregate!r} raised {type(err).__name__}: {err} on step scores {result.step_scores}"
            if on_error == "raise":
                raise ValueError(message) from err
            record["error"] = message
        record["step_scores"] = [float(s) for s in result.step_scores]
        record["first_error"] = result.first_error(self.threshold)
        record["certificate"] = certificate(result)

    def _check_domain(self, scored: list[dict[str, Any]]) -> None:
        """Warn once (:class:`DemoBackboneWarning`) when the demo head scores text outside its domain."""
        if self._demo_warned or not scored or not is_demo_backbone(self.backbone):
            return
        reason = off_domain_reason([r["steps"] for r in scored], [r["step_scores"] for r in scored])
        if reason is not None:
            self._demo_warned = True
            warnings.warn(demo_warning_message("AresReranker", reason) + " Shown once per reranker.",
                          DemoBackboneWarning, stacklevel=4)

    def score_batch(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Sequence[Any]],
        aggregate: Aggregate | None = None,
        *,
        on_error: str = "raise",
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Score the candidates of many prompts, ``batch_size`` chains per estimator call.

        Args:
            prompts: P prompts.
            completions: P lists of candidates (``completions[i]`` belong to ``prompts[i]``).
            aggregate: Chain score for this call (default: the reranker's).
            on_error: ``"raise"`` (default), or ``"none"``: a candidate that cannot be scored gets ``score=None``
                and an ``"error"`` (see :meth:`score_pairs`), and the others keep their scores.
            batch_size, show_progress_bar: Overrides of the reranker's settings for this call.

        Returns:
            P lists of records (see :meth:`score_pairs`); ``index`` is the candidate's position in its list.
        """
        check_candidate_lists(prompts, completions)
        flat_prompts, flat_completions, sizes = [], [], []
        for prompt, candidates in zip(prompts, completions):
            flat_prompts += [prompt] * len(candidates)
            flat_completions += list(candidates)
            sizes.append(len(candidates))
        flat = self.score_pairs(flat_prompts, flat_completions, aggregate=aggregate, on_error=on_error,
                                batch_size=batch_size, show_progress_bar=show_progress_bar)
        out, start = [], 0
        for size in sizes:
            group = flat[start : start + size]
            for j, record in enumerate(group):
                record["index"] = j
            out.append(group)
            start += size
        return out

    def score(
        self,
        prompt: Any,
        completions: Sequence[Any],
        aggregate: Aggregate | None = None,
        *,
        on_error: str = "raise",
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
    ) -> list[dict]:
        """Score the candidates of one prompt: one record per candidate, in input order (see :meth:`score_pairs`;
        ``on_error="none"`` keeps the others when one cannot be scored)."""
        return self.score_batch([prompt], [completions], aggregate=aggregate, on_error=on_error,
                                batch_size=batch_size, show_progress_bar=show_progress_bar)[0]

    # -- ranking ------------------------------------------------------------------------------------------------
    def order(
        self, records: Sequence[dict[str, Any]], selection: str | None = None, answer_fn: AnswerFn | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Score records (one prompt's, from :meth:`score`) best first under a selection rule.

        Returns:
            ``(records, groups)``: the records in selection order, each with ``answer`` / ``group`` / ``votes``
            (its group's vote) added for an answer-aware rule; and the groups' votes, best first (``answer``,
            ``size``, ``votes``, ``sound``, ``members``); empty for ``"best"``.
        """
        selection = self.selection if selection is None else check_selection(selection)
        if selection == "best":
            return rank_records(records), []
        matcher = self.answers if answer_fn is None else answer_matcher(answer_fn)
        texts = []
        for record in records:
            try:
                texts.append(message_text(record["text"], self.completion_roles, "completion"))
            except (TypeError, ValueError):
                texts.append(None)  # not text: no answer
        groups, answers = matcher.group(texts)
        sound = [r["first_error"] == -1 for r in records]
        order, votes = order_by_vote([r["score"] for r in records], groups, answers, selection, sound)
        by_group = {v.group: v.votes for v in votes}
        ordered = []
        for i in order:
            ordered.append({**records[i], "answer": answers[i], "group": groups[i],
                            "votes": by_group.get(groups[i]) if groups[i] is not None else None})
        return ordered, [v.to_dict() for v in votes]

    def rank_batch(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Sequence[Any]],
        top_k: int | None = None,
        aggregate: Aggregate | None = None,
        return_documents: bool = True,
        **options: Any,
    ) -> list[list[dict[str, Any]]]:
        """:meth:`rank` for many prompts, ``batch_size`` chains per estimator call.

        ``options``: :meth:`rank`'s keywords (``on_error``, ``batch_size``, ``show_progress_bar``, ``selection``,
        ``answer_fn``); written there once, an unknown one is a TypeError naming it."""
        return [ranked for ranked, _ in self._rank_with_groups(
            "rank_batch", prompts, completions, top_k, aggregate, return_documents, **options)]

    def _rank_with_groups(
        self, where: str, prompts: Sequence[Any], completions: Sequence[Sequence[Any]], top_k: int | None,
        aggregate: Aggregate | None, return_documents: bool, **options: Any
    ) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        unknown = sorted(set(options) - set(_RANK_OPTIONS))
        if unknown:
            raise TypeError(f"{where}() got unexpected keyword arguments {unknown}: it takes {list(_RANK_OPTIONS)}.")
        if top_k is not None and (not is_int(top_k) or top_k < 1):
            raise ValueError(f"top_k={top_k!r} must be a positive int or None (all candidates).")
        kwargs = {**_RANK_OPTIONS, **options}
        selection, answer_fn = kwargs.pop("selection"), kwargs.pop("answer_fn")
        if selection is not None:
            check_selection(selection)
        if answer_fn is not None:
            answer_fn = answer_matcher(answer_fn)  # checked before scoring
        out = []
        for records in self.score_batch(prompts, completions, aggregate=aggregate, **kwargs):
            ordered, groups = self.order(records, selection, answer_fn)
            ranked = []
            for record in ordered[:top_k]:
                ranked.append(rank_record(record, return_documents))
                if "answer" in record:
                    ranked[-1].update(answer=record["answer"], group=record["group"], votes=record["votes"])
            out.append((ranked, groups))
        return out

    def rank(
        self,
        prompt: Any,
        completions: Sequence[Any],
        top_k: int | None = None,
        aggregate: Aggregate | None = None,
        return_documents: bool = True,
        *,
        on_error: str = "raise",
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        selection: str | None = None,
        answer_fn: AnswerFn | None = None,
    ) -> list[dict[str, Any]]:
        """Candidates sorted best first, as ``{"corpus_id", "index", "score", "text"}`` records (CrossEncoder.rank's
        shape; ``index`` is an alias of ``corpus_id``), in a :class:`~ares_rerank.rerank.records.Ranking`: a list
        that a notebook draws as the candidates side by side.

        Under ``selection="best"`` the order is by chain score: ties keep input order (the lower index first);
        candidates with no score (no steps) come last with ``score=None``. Under an answer-aware selection the
        winning answer's candidates come first (by score), then the next answer's, ...; each record also has
        ``answer``, ``group`` and ``votes`` (its group's vote).

        Args:
            prompt: The prompt (string or messages).
            completions: The candidates.
            top_k: Keep only the best k (default: all).
            aggregate: Chain score for this call (default: the reranker's).
            return_documents: Include ``"text"`` (the candidate as given). ``True`` by default, unlike
                ``CrossEncoder.rank``: the candidates are the caller's own completions, and the text of the best
                one is usually what is wanted next.
            on_error: ``"raise"`` (default), or ``"none"``: a candidate that cannot be scored (e.g. a step longer
                than the backbone's window) ranks last with ``score=None`` instead of failing the call.
            batch_size, show_progress_bar, selection, answer_fn: Overrides of the reranker's settings for this
                call.
        """
        ranked = self._rank_with_groups("rank", [prompt], [completions], top_k, aggregate, return_documents,
                                        on_error=on_error, batch_size=batch_size, show_progress_bar=show_progress_bar,
                                        selection=selection, answer_fn=answer_fn)[0][0]
        return Ranking(ranked, prompt)  # a list that a notebook draws

    def select_batch(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Sequence[Any]],
        aggregate: Aggregate | None = None,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """:meth:`select` for many prompts, ``batch_size`` chains per estimator call.

        ``options``: :meth:`select`'s keywords (``batch_size``, ``show_progress_bar``, ``selection``,
        ``answer_fn``)."""
        return self._select("select_batch", prompts, completions, aggregate, options)

    def _select(self, where: str, prompts: Sequence[Any], completions: Sequence[Sequence[Any]],
                aggregate: Aggregate | None, options: dict[str, Any]) -> list[dict[str, Any]]:
        if "on_error" in options:  # a selection needs every candidate scored
            raise TypeError(f"{where}() got an unexpected keyword argument 'on_error' (a failed candidate fails the "
                            "call: use rank(on_error='none') to rank around it).")
        check_candidate_lists(prompts, completions)
        for i, candidates in enumerate(completions):
            if len(candidates) == 0:
                raise ValueError(f"select: completions[{i}] is empty; there is nothing to select from.")
        out = []
        for ranked, groups in self._rank_with_groups(where, prompts, completions, 1, aggregate, True, **options):
            best = ranked[0]
            if groups:
                best["groups"] = groups
            out.append(best)
        return out

    def select(
        self,
        prompt: Any,
        completions: Sequence[Any],
        aggregate: Aggregate | None = None,
        *,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        selection: str | None = None,
        answer_fn: AnswerFn | None = None,
    ) -> dict[str, Any]:
        """The chosen candidate as a ``{"corpus_id", "index", "score", "text"}`` record (``"best"``: the highest
        chain score, ties to the lower index). Under an answer-aware ``selection`` it is the best-scoring candidate
        of the winning answer, with ``answer``, ``group``, ``votes`` and ``groups`` (every answer's vote, best
        first)."""
        return self._select("select", [prompt], [completions], aggregate, {
            "batch_size": batch_size, "show_progress_bar": show_progress_bar, "selection": selection,
            "answer_fn": answer_fn})[0]


#: :meth:`AresReranker.rank`'s keyword-only options and their defaults, read off its signature (their one home):
#: ``rank_batch``, ``select`` and ``select_batch`` take them too (the selections all but ``on_error``).
_RANK_OPTIONS: dict[str, Any] = {p.name: p.default for p in inspect.signature(AresReranker.rank).parameters.values()
                                 if p.kind is p.KEYWORD_ONLY}

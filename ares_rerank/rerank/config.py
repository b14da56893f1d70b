"""The reranker's settings as a dataclass, the one home of their names, defaults and help: ``ares-rerank rank``,
``serve``, ``search``, ``score``, ``view`` and ``eval --task bon`` generate their flags from its fields (as
``HfArgumentParser`` does for TRL's configs; :func:`~ares_rerank.commands.options.add_rerank_arguments`), and
:meth:`RerankConfig.reranker_kwargs` turns them into :class:`~ares_rerank.rerank.AresReranker` keywords.

Fields hold what a command line holds (text): ``step_separator`` with ``\\n`` escapes and ``"sentences"`` for
sentence splitting, ``answer_fn`` a built-in name or ``module:function``, ``tokenizer`` a folder or hub id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..aggregate import AGGREGATES
from ..chain import DEFAULT_THRESHOLD, PROMPT_SPLITS, check_threshold, parse_separator
from ..chat_templates import LAYOUTS, resolve_layout
from .answers import ANSWER_FNS, answer_fn_from_spec
from .voting import SELECTIONS


__all__ = ["RerankConfig"]


@dataclass
class RerankConfig:
    """How candidates become chains, scores and a choice (the reranker's flags; see the module docstring)."""

    method: str = field(default="ares", metadata={
        "help": "'ares' or a baseline of the paper, e.g. 'entail-prev' (the same backbone, to compare)."})
    aggregate: str = field(default="final", metadata={
        "choices": list(AGGREGATES), "help": f"Step scores -> one score per chain: {', '.join(AGGREGATES)}."})
    step_separator: str = field(default="\\n\\n", metadata={
        "help": "Splits a completion into steps; '\\n' and '\\t' escapes are understood, 're:<pattern>' is a "
                "regular expression, 'sentences' splits into sentences. Default: a blank line."})
    prompt_split: str = field(default="none", metadata={
        "choices": list(PROMPT_SPLITS), "help": "How the prompt becomes base claims: one claim (none), sentences or "
                                                "non-empty lines."})
    selection: str = field(default="best", metadata={
        "choices": list(SELECTIONS),
        "help": "How the best candidate is chosen: 'best' (highest chain score) or a vote over final answers: "
                "'majority', 'weighted' (summed chain scores), 'sound-weighted' (summed scores of chains with no "
                "flagged step)."})
    answer_fn: str = field(default="standard", metadata={
        "help": f"How final answers are read and compared: {' or '.join(ANSWER_FNS)} (the 'math' extra), or "
                "'module:function' naming a Python function text -> answer. standard reads \\boxed{}, 'The answer "
                "is', '# Answer'."})
    chat_layout: str = field(default="auto", metadata={
        "choices": ["auto", "none", *LAYOUTS],
        "help": "Role headers and end markers that a chat template wrote into string prompts and completions are "
                "removed before scoring: auto detects ChatML, Llama 3, DeepSeek-R1, Mistral, Gemma and Phi text; a "
                "name forces that layout; none reads the text as it is."})
    threshold: float = field(default=DEFAULT_THRESHOLD, metadata={
        "help": "A step is flagged unsound iff tau_k <= threshold: the records' first_error, the rewards' "
                "first_error / flagged_frac and early rejection read it."})
    tokenizer: str | None = field(default=None, metadata={
        "metavar": "PATH_OR_HUB_ID",
        "help": "The policy's tokenizer (folder or hub id, cached when offline): its chat template and special "
                "tokens give the layout, for a template the known layouts do not cover. Instead of --chat-layout."})

    def __post_init__(self) -> None:
        for name, choices in (("aggregate", list(AGGREGATES)), ("prompt_split", list(PROMPT_SPLITS)),
                              ("selection", list(SELECTIONS)), ("chat_layout", ["auto", "none", *LAYOUTS])):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r} (--{name.replace('_', '-')}) is not one of "
                                 f"{choices}.")
        parse_separator(self.step_separator)  # the escapes and the pattern, checked now
        self.threshold = check_threshold(self.threshold, "--threshold")
        if self.tokenizer is not None and self.chat_layout != "auto":
            raise ValueError(f"--chat-layout {self.chat_layout} and --tokenizer {self.tokenizer} are both given: pass "
                             "one (the tokenizer's chat template gives the layout).")

    def reranker_kwargs(self, load_tokenizer: bool = True) -> dict[str, Any]:
        """:class:`~ares_rerank.rerank.AresReranker` keywords: the separator decoded, the answer function
        imported, the layout resolved (the tokenizer loaded, unless ``load_tokenizer`` is false: then
        ``chat_layout`` is left to the caller)."""
        kwargs: dict[str, Any] = {
            "method": self.method, "aggregate": self.aggregate, "step_separator": parse_separator(self.step_separator),
            "prompt_split": self.prompt_split, "selection": self.selection,
            "answer_fn": answer_fn_from_spec(self.answer_fn), "threshold": self.threshold,
        }
        if load_tokenizer:
            kwargs["chat_layout"] = resolve_layout(self.chat_layout, self.tokenizer, "--chat-layout")
        return kwargs

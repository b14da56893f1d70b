"""Reasoning chains: base claims (the problem) followed by derived claims (the steps), and their scores.

Data flow: text -> :class:`Chain` -> backbone + estimator -> :class:`ChainScores`.

About 600 lines: the chain, its scores, the one rows -> Chain reader and the text splitters (steps, sentences,
prompt lines, messages) are the vocabulary every layer above reads; the module imports nothing of the package, so
it stays at the bottom of the layers.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Sequence


__all__ = [
    "ARES_MODES",
    "PROMPT_SPLITS",
    "ROW_KEYS",
    "COMPLETION_ROLES",
    "PROMPT_ROLES",
    "DEFAULT_THRESHOLD",
    "OPTIONAL_SCORE_FIELDS",
    "Chain",
    "ChainScores",
    "check_separator",
    "check_threshold",
    "message_text",
    "parse_separator",
    "read_chains",
    "split_prompt",
    "split_sentences",
    "split_steps",
]

#: The modes an ARES estimate comes out in (:attr:`ChainScores.mode`); baselines report ``"direct"``.
ARES_MODES = ("exact", "stratified", "sample")
#: A step is flagged unsound iff its tau <= this (the default of :meth:`ChainScores.flags`, the reranker's
#: ``threshold`` and so of the rewards' first errors, early rejection and the CLI's ``--threshold``).
DEFAULT_THRESHOLD = 0.5


def check_threshold(value: Any, where: str = "threshold") -> float:
    """``value`` as a float if it is a number in [0, 1] (a flag threshold: scores are probabilities), else a
    ValueError naming ``where`` (``"AresReranker(threshold"``: the parenthesis is closed)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= value <= 1.0:  # NaN fails too
        shown = f"{where}={value!r}" + (")" if "(" in where else "")
        raise ValueError(f"{shown} must be a number in [0, 1] (scores are probabilities), e.g. {DEFAULT_THRESHOLD}.")
    return float(value)


@dataclass(frozen=True)
class Chain:
    """A reasoning chain ``C_1..C_n`` (base claims, assumed given) followed by ``C_{n+1}..C_{n+m}`` (steps).

    Args:
        base_claims: The context / problem statement, one string per claim. May be empty (no context); a blank base
            claim is kept (it adds nothing to a premise).
        steps: The derived claims an LLM wrote, in order. At least one, none blank.
        labels: Optional gold labels, one per step: ``1`` = unsound, ``0`` = sound.
        id: Optional identifier (kept through scoring; used to split data by chain).
        meta: Free-form metadata (task name, source record, ...).

    Raises:
        TypeError: ``base_claims`` / ``steps`` is not a list of strings (``None``, a number, one string, a dict),
            ``labels`` is not a list, or ``meta`` is not a dict; the message names the field and the value.
        ValueError: No step, a blank step, text that cannot be encoded as UTF-8 (a lone surrogate such as
            ``"\\udcff"``; the message names the chain id and the index), or labels that are not one 0/1 per step.
    """

    base_claims: tuple[str, ...]
    steps: tuple[str, ...]
    labels: tuple[int, ...] | None = None
    id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __init__(
        self,
        base_claims: Sequence[str],
        steps: Sequence[str],
        labels: Sequence[int] | None = None,
        id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        if id is not None and not isinstance(id, str):  # a list was kept, and hashing the chain then failed
            raise TypeError(f"Chain(id={_short(id)}) is {type(id).__name__}: pass a string (e.g. str({_short(id)})) or "
                            "None.")
        base_claims = _as_str_tuple(base_claims, "base_claims", id)
        steps = _as_str_tuple(steps, "steps", id)
        if not steps:
            raise ValueError(
                "Chain(steps=[]) has no steps to score: pass at least one derived claim "
                "(a completion with no text gives no chain; skip it or give it a score yourself)."
            )
        for k, step in enumerate(steps):
            if not _has_text(step):
                raise ValueError(
                    f"Chain{_named(id)} steps[{k}] is blank ({step!r}): a step with no text cannot be judged (the "
                    "reward calls such a completion unscorable). Drop blank steps (split_steps / Chain.from_text do) "
                    "or give the step its text."
                )
        if labels is not None:
            labels = _as_labels(labels, len(steps))
        if meta is not None and not isinstance(meta, Mapping):
            raise TypeError(
                f"Chain(meta={_short(meta)}) is {type(meta).__name__}: pass a dict (free-form metadata) or None."
            )
        object.__setattr__(self, "base_claims", base_claims)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "meta", dict(meta or {}))

    @property
    def claims(self) -> tuple[str, ...]:
        """All claims in order: base claims then steps."""
        return self.base_claims + self.steps

    @property
    def num_base(self) -> int:
        return len(self.base_claims)

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def fingerprint(self) -> str:
        """A stable hash of the chain's text (base claims and steps), independent of labels and id."""
        h = hashlib.sha256()
        for part in ("B",) + self.base_claims + ("S",) + self.steps:
            h.update(part.encode("utf-8"))
            h.update(b"\x00")
        return h.hexdigest()

    @classmethod
    def from_text(
        cls,
        prompt: str,
        completion: str,
        step_separator: str | None = "\n\n",
        prompt_split: str = "none",
        labels: Sequence[int] | None = None,
        id: str | None = None,
    ) -> Chain:
        """Build a chain from a prompt and a completion.

        Args:
            prompt: The problem; becomes the base claims.
            completion: The model's reasoning; split into steps.
            step_separator: Splits the completion into steps (default: a blank line). A regex when it starts with
                ``re:``; ``None`` splits into sentences.
            prompt_split: ``"none"`` keeps the prompt as one base claim, ``"sentences"`` splits it into sentences,
                ``"lines"`` into non-empty lines.
        """
        if not isinstance(prompt, str):
            raise TypeError(f"Chain.from_text(prompt=...) must be a string, got {type(prompt).__name__}.")
        if not isinstance(completion, str):
            raise TypeError(f"Chain.from_text(completion=...) must be a string, got {type(completion).__name__}.")
        base = split_prompt(prompt, prompt_split)
        steps = split_steps(completion, step_separator)
        return cls(base, steps, labels=labels, id=id)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], step_separator: str | None = "\n\n", prompt_split: str = "none",
                    default_id: str | None = None) -> Chain:
        """The one reader of a data row: ``{"base_claims": [...], "steps": [...]}`` or ``{"prompt": "...",
        "completion": "..."}`` (split as :meth:`from_text` splits), with optional ``id`` (default: ``default_id``),
        ``labels`` (one per step, 1 = unsound) and, with ``steps``, ``meta``. JSONL lines (:func:`read_chains`) and
        ``datasets`` rows (:func:`~ares_rerank.distributed.chains_from_rows`) both go through it.

        A key the row lacks, when the row has a key that reads like it (``base_claim``, ``question`` for
        ``prompt``, ``label``), is an error naming both: read silently, the chain would be scored without its base
        claims, its prompt or its gold labels. Other keys (a data set's own columns) are left alone.

        Raises:
            ValueError: The row has neither layout, a misspelled key, or a bad ``id``.
        """
        _check_row_keys(record)
        chain_id = record.get("id")
        if chain_id is None:  # absent or null
            chain_id = default_id
        elif isinstance(chain_id, bool) or not isinstance(chain_id, (str, int)):
            raise ValueError(f"id={chain_id!r} must be a string or an integer (or absent: the line number).")
        chain_id = None if chain_id is None else str(chain_id)
        if "steps" in record:
            return cls(record.get("base_claims", []), record["steps"], labels=record.get("labels"), id=chain_id,
                       meta=record.get("meta"))
        if "completion" in record:
            return cls.from_text(record.get("prompt") or "", record["completion"], step_separator=step_separator,
                                 prompt_split=prompt_split, labels=record.get("labels"), id=chain_id)
        raise ValueError("needs 'steps' (with 'base_claims') or 'completion' (with 'prompt').")


#: The keys :meth:`Chain.from_record` reads, and the words data sets use for them (-> the key meant).
ROW_KEYS = ("id", "base_claims", "steps", "prompt", "completion", "labels", "meta")
_ROW_ALIASES = {"question": "prompt", "problem": "prompt", "query": "prompt", "context": "base_claims",
                "premises": "base_claims", "response": "completion", "answer": "completion", "output": "completion",
                "chain": "steps", "label": "labels", "gold": "labels"}


def _check_row_keys(record: Mapping[str, Any]) -> None:
    """A ValueError for a key of ``record`` that stands for a row key it lacks (see :meth:`Chain.from_record`)."""
    import difflib

    for key in record:
        if key in ROW_KEYS or not isinstance(key, str):
            continue
        meant = _ROW_ALIASES.get(key.lower()) or next(iter(difflib.get_close_matches(key, ROW_KEYS, 1, 0.8)), None)
        if meant is None or meant in record:
            continue
        if meant == "completion" and "steps" in record or meant == "prompt" and "base_claims" in record:
            continue  # the other layout's key, beside a layout that is complete
        raise ValueError(f"has the key {key!r} and no {meant!r}: rename {key!r} to {meant!r} (the keys read are "
                         f"{', '.join(ROW_KEYS)}), or drop it.")
    if "steps" in record and "prompt" in record and "base_claims" not in record:
        raise ValueError("has 'steps' and 'prompt' but no 'base_claims': a row of steps takes its base claims from "
                         "'base_claims' (a list), a row with a 'prompt' splits its 'completion'; give one layout.")


def read_chains(path: str | os.PathLike[str], step_separator: str | None = "\n\n",
                prompt_split: str = "none") -> list[Chain]:
    """The chains of a JSONL file (``-`` = standard input), one per non-empty line, read by
    :meth:`Chain.from_record` (``id`` defaults to the line number; ``meta``, e.g. the ``rules`` of a ClaimTrees
    chain, lets training build oracle pairs).

    Raises:
        ValueError: A line is not such an object; the message names the file, the line and what is missing.
    """
    from .utils.io import read_jsonl

    chains = []
    for lineno, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{lineno} must be a JSON object, got {type(record).__name__}.")
        try:
            chains.append(Chain.from_record(record, step_separator, prompt_split, default_id=str(lineno)))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}:{lineno} {err}") from err
    return chains


def _named(chain_id: Any) -> str:
    return "" if chain_id is None else f" {chain_id!r}"


def _has_text(text: str) -> bool:
    """Whether ``text`` holds a visible character: not only whitespace and format characters (zero-width space,
    joiners, byte-order marks)."""
    stripped = text.strip()
    if not stripped:
        return False
    if unicodedata.category(stripped[0]) != "Cf":  # the common case, without a Python loop over the characters
        return True
    return any(not c.isspace() and unicodedata.category(c) != "Cf" for c in stripped)


#: The longest claim a Chain takes, in characters (about 250k tokens, beyond any backbone's window).
MAX_CLAIM_CHARS = 1_000_000


def _as_str_tuple(values: Any, name: str, chain_id: Any = None) -> tuple[str, ...]:
    """``values`` as a tuple of strings that can be UTF-8 encoded (hashing, tokenizers and JSON output need it)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"Chain({name}=...) got a single string; pass a list of strings (one per claim).")
    if values is None or isinstance(values, (Mapping, set, frozenset)) or not isinstance(values, Iterable):
        raise TypeError(
            f"Chain({name}={_short(values)}) is {type(values).__name__}: pass a list of strings, one per claim"
            + (" ([] for no context)." if name == "base_claims" else " (at least one step).")
        )
    out = tuple(values)
    for i, v in enumerate(out):
        if not isinstance(v, str):
            raise TypeError(f"Chain({name}[{i}]) is {type(v).__name__} ({_short(v)}), expected str: pass the text.")
        if len(v) > MAX_CLAIM_CHARS:
            raise ValueError(
                f"Chain{_named(chain_id)} {name}[{i}] is {len(v):,} characters, more than any backbone reads (at most "
                f"{MAX_CLAIM_CHARS:,}; tokenizing it alone takes GBs): split it into claims or steps, or shorten it."
            )
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"Chain{_named(chain_id)} {name}[{i}] cannot be encoded as UTF-8 ({v[err.start:err.end]!r} at "
                f"position {err.start}, a lone surrogate): decode the input with errors='replace' or remove the "
                "character."
            ) from None
    return out


def _as_labels(values: Any, num_steps: int) -> tuple[int, ...]:
    """Gold labels as a tuple of 0/1 ints, one per step."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise TypeError(
            f"Chain(labels={_short(values)}) is {type(values).__name__}: pass a list of 0/1 ints, one per step "
            "(1 = unsound, 0 = sound), or labels=None."
        )
    labels = tuple(values)
    if len(labels) != num_steps:
        raise ValueError(
            f"Chain(labels=...) has {len(labels)} labels for {num_steps} steps: give one label per step "
            "(1 = unsound, 0 = sound) or labels=None."
        )
    for i, x in enumerate(labels):
        numeric = isinstance(x, Real) or getattr(getattr(x, "dtype", None), "kind", "") == "b"  # numpy bools too
        if not numeric or x not in (0, 1):
            raise ValueError(
                f"Chain(labels=...) contains {x!r} at index {i}: labels must be 0 (sound) or 1 (unsound)."
            )
    return tuple(int(x) for x in labels)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: How a prompt becomes base claims (``prompt_split``): one claim, sentences, or non-empty lines.
PROMPT_SPLITS = ("none", "sentences", "lines")


def parse_separator(text: str, flag: str = "--step-separator") -> str | None:
    """The step separator a command line's text means: ``\\n`` / ``\\t`` escapes decoded, ``"sentences"`` ->
    ``None`` (split into sentences), a ``re:`` pattern kept; a ValueError naming ``flag`` for one that splits nothing
    or every character, or an unfinished escape."""
    if text == "sentences":
        return None
    if text == "":
        raise ValueError(f"{flag}='' would make every character a step: give e.g. '\\n\\n' or 'sentences'.")
    decoded = text
    if "\\" in text:
        try:
            decoded = text.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError as err:  # a trailing backslash, or an unfinished escape such as \x4
            raise ValueError(f"{flag}={text!r} has an unfinished escape ({err.reason}): write '\\n' or "
                             "'\\t', or '\\\\' for a backslash.") from err
    check_separator(decoded)  # a re: pattern that compiles and splits on something
    return decoded


def split_prompt(prompt: str, mode: str = "none") -> list[str]:
    """Turn a prompt into base claims: ``"none"`` (one claim), ``"sentences"`` or ``"lines"``."""
    if not isinstance(prompt, str):
        raise TypeError(f"split_prompt(prompt=...) must be a string, got {type(prompt).__name__}.")
    if mode == "none":
        return [prompt.strip()] if prompt.strip() else []
    if mode == "sentences":
        return split_sentences(prompt)
    if mode == "lines":
        return [line.strip() for line in prompt.splitlines() if line.strip()]
    raise ValueError(f"prompt_split={mode!r} is not supported: use 'none', 'sentences' or 'lines'.")


def check_separator(separator: str) -> re.Pattern[str] | None:
    """Check a ``step_separator`` string (a literal, or ``re:<pattern>``): the compiled pattern for ``re:``, ``None``
    for a literal; a ValueError naming it when it would split nothing or every character."""
    if not isinstance(separator, str):
        raise TypeError(
            f"step_separator={separator!r} is {type(separator).__name__}: pass a string (e.g. '\\n\\n'), "
            "'re:<pattern>' or None."
        )
    if separator == "":
        raise ValueError("step_separator='' would split nothing: use e.g. '\\n\\n', '\\n', 're:<pattern>' or None.")
    if separator.startswith("re:"):
        try:
            pattern = re.compile(separator[3:])
        except re.error as err:
            raise ValueError(
                f"step_separator={separator!r} is not a valid regular expression ({err}): fix the pattern after "
                "'re:', or pass a literal separator without the 're:' prefix."
            ) from None
        if pattern.fullmatch(""):
            raise ValueError(
                f"step_separator={separator!r} matches the empty string, so every character would be a step: make "
                "the pattern match at least one character (e.g. 're:\\n+' rather than 're:\\n*')."
            )
        return pattern
    return None


def split_steps(text: str, separator: str | None = "\n\n") -> list[str]:
    r"""Split a completion into non-empty, stripped steps.

    ``separator`` is a literal string, a regex when prefixed with ``re:``, or ``"sentences"`` (``None``, its older
    spelling) for sentence splitting: the same word as ``--step-separator sentences``. What a regex matches is never
    a step, its groups included (``re:(Step \d+:)`` splits at the labels and drops them). A literal separator
    without ``\r`` also splits Windows (``\r\n``) and old Mac (``\r``) line endings.
    """
    if not isinstance(text, str):
        raise TypeError(f"split_steps(text=...) must be a string, got {type(text).__name__}.")
    if separator is None or separator == "sentences":
        return split_sentences(text)
    pattern = check_separator(separator)
    if pattern is not None:
        parts = pattern.split(text)[:: pattern.groups + 1]  # re.split puts each match's groups between the parts
    else:
        if "\r" not in separator:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        parts = text.split(separator)
    return [p.strip() for p in parts if _has_text(p)]


# A sentence ends at . ! or ? followed by whitespace and an upper-case letter, digit, quote or bracket, unless the
# period belongs to an abbreviation ("e.g.", "Dr."), an initial ("J. Smith") or a step label that opens the sentence
# after it ("Step 1.", "1.", "(b)."). A period inside a number never ends one ("3.5", "1.5 m." ends after "m.").
# Rule-based, no downloads (no punkt).
_ABBREVIATIONS = {
    "approx", "cf", "ch", "dr", "e.g", "eq", "eqs", "etc", "fig", "figs", "i.e", "incl", "mr", "mrs", "ms", "no",
    "prof", "ref", "resp", "sec", "st", "vol", "vs",
}
_SENT_END = re.compile(r"([.!?])(\s+)(?=[\"'(\[A-Z0-9$\\])")
_STEP_LABEL = re.compile(r"\(?(?:(?:step|part|case|problem|question|q)\s*)?(?:\d+|[a-z]|[ivx]+)\)?", re.IGNORECASE)


def _ends_sentence(segment: str, mark: str) -> bool:
    """Whether ``mark`` (``.``, ``!`` or ``?``) closes ``segment``, the text since the previous sentence end."""
    if mark != ".":
        return True
    segment = segment.strip()
    last = segment.rsplit(None, 1)[-1] if segment else ""
    if last.lower().rstrip(".") in _ABBREVIATIONS:
        return False
    if len(last) == 1 and last.isupper():  # an initial such as "J. Smith" (a lower-case "x." or "m." ends one)
        return False
    return not _STEP_LABEL.fullmatch(segment)  # "Step 1." / "2." label the sentence that follows


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with a small rule-based splitter.

    Numbers, units, abbreviations, initials and step labels stay inside their sentence: ``"Step 1. The rod is 1.5 m.
    So x = 3, e.g. 3.0. 2. Add 4."`` gives ``["Step 1. The rod is 1.5 m.", "So x = 3, e.g. 3.0.", "2. Add 4."]``.
    """
    sentences: list[str] = []
    start = 0
    for match in _SENT_END.finditer(text):
        if not _ends_sentence(text[start : match.start(1)], match.group(1)):
            continue
        sentences.append(text[start : match.start(1) + 1].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if _has_text(s)]


@dataclass
class ChainScores:
    """Per-step soundness scores of one chain, with the certificate that came with them.

    Attributes:
        step_scores: ``tau_k`` per step, in [0, 1]; high = the step is entailed by accepted earlier claims.
        evaluations: Distinct backbone evaluations (premise set, step) spent on this chain.
        evaluations_per_step: The same, per step.
        method: ``"ares"`` or a baseline name.
        mode: ``"exact"``, ``"sample"``, ``"stratified"`` (ARES: auto mode's exact masks plus a sampled tail) or
            ``"direct"`` (baselines: one deterministic score per step).
        eps, delta: The Hoeffding guarantee of sample and stratified mode: with probability >= 1 - delta every
            ``|tau_k - true| <= eps``. ``None`` when nothing was sampled.
        num_samples: The number of i.i.d. trajectories: N (sample mode) or the tail's (stratified), else ``None``.
        error_bounds: Per step, a bound on ``|tau_k - true tau_k|``: hard (exact mode; ``0`` when nothing was
            pruned), or holding with the probability above (stratified, each <= eps). ``None`` in sample mode (see
            eps / delta) and for baselines.
        chain_id: The chain's id, if it had one.
        stopping: Sample mode's stopping rule when it is not the fixed Hoeffding N of a deterministic backbone:
            ``"betting"`` (anytime-valid bounds, ``error_bounds`` per step, each <= eps) or ``"hoeffding"`` (a
            sampled backbone at the fixed N); ``None`` otherwise.
        verdicts: A sampled backbone (a generative verifier): the fresh verdict samples drawn for this chain.
        generated_tokens: The tokens the verifier generated for them (rationales, verdicts).
        requests: The model calls (local) or HTTP requests (served) they took.

    The last four are ``None`` (and left out of :meth:`to_dict`) where they do not apply, so records of
    deterministic backbones are as they were.
    """

    step_scores: list[float]
    evaluations: int
    evaluations_per_step: list[int]
    method: str = "ares"
    mode: str = "direct"
    eps: float | None = None
    delta: float | None = None
    num_samples: int | None = None
    error_bounds: list[float] | None = None
    chain_id: str | None = None
    stopping: str | None = None
    verdicts: int | None = None
    generated_tokens: int | None = None
    requests: int | None = None

    def flags(self, threshold: float = DEFAULT_THRESHOLD) -> list[bool]:
        """Steps flagged unsound: ``tau_k <= threshold`` (a threshold in [0, 1])."""
        threshold = check_threshold(threshold)
        return [bool(s <= threshold) for s in self.step_scores]

    def first_error(self, threshold: float = DEFAULT_THRESHOLD) -> int:
        """0-based index of the first flagged step, or -1 if none is flagged (ProcessBench's convention)."""
        return next((i for i, f in enumerate(self.flags(threshold)) if f), -1)

    def certificate(self) -> str:
        """What the scores guarantee, in one line (``ares-rerank score`` prints it per chain): the largest hard bound
        (exact), N, eps and delta (sample), the tail's size and largest bound with its probability (stratified)."""
        if self.mode == "exact":
            return f"exact, bound {max(self.error_bounds or [0.0]):.3g}"
        cost = (f", {self.verdicts} verdicts, {self.generated_tokens} generated tokens, {self.requests} requests"
                if self.verdicts is not None else "")
        if self.mode == "sample" and self.stopping == "betting":
            return (f"sampled N={self.num_samples} (betting bounds), bound {max(self.error_bounds or [0.0]):.3g} "
                    f"with probability >= {1 - (self.delta or 0.0):.3g}{cost}")
        if self.mode == "sample":
            return f"sampled N={self.num_samples}, eps={self.eps}, delta={self.delta}{cost}"
        if self.mode == "stratified":
            return (f"exact + sampled tail n={self.num_samples}, bound {max(self.error_bounds or [0.0]):.3g} with "
                    f"probability >= {1 - (self.delta or 0.0):.3g}")
        return self.mode

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["step_scores"] = [float(s) for s in self.step_scores]
        for name in OPTIONAL_SCORE_FIELDS:
            if out[name] is None:
                del out[name]
        return out

    def __post_init__(self) -> None:
        if any(not (0.0 <= s <= 1.0) or math.isnan(s) for s in self.step_scores):
            raise ValueError(f"ChainScores.step_scores must lie in [0, 1], got {self.step_scores}.")

    def _repr_html_(self) -> str:
        """The scores drawn for a notebook (Jupyter calls this): each step's tau as a bar, the flags at 0.5 and the
        first error, the certificate (:func:`ares_rerank.viewer.chain_scores_html` adds step text and labels)."""
        from .viewer import chain_scores_html  # only when displayed: the viewer is not needed to score

        return chain_scores_html(self)


# ChainScores fields added after its records were first written: left out of to_dict while None.
OPTIONAL_SCORE_FIELDS = ("stopping", "verdicts", "generated_tokens", "requests")

# The roles whose messages form the text of a conversational prompt / completion (AresReranker's defaults).
PROMPT_ROLES = ("user",)
COMPLETION_ROLES = ("assistant",)


def message_text(value: Any, roles: Sequence[str], what: str = "value") -> str:
    """The text of a string, or of a conversation (list of ``{"role", "content"}`` messages).

    Args:
        value: A string, or a list of messages whose ``content`` is a string or a list of ``{"type": "text",
            "text": ...}`` parts or strings (other parts, e.g. images, are skipped). A message's
            ``reasoning_content`` (the ``<think>`` part a reasoning model wrote, as TRL and vLLM parse it) comes
            before its content: it is the chain to score.
        roles: Messages with these roles contribute their content, joined by a blank line.
        what: Name used in error messages.

    Returns:
        The text (possibly empty).

    Raises:
        TypeError: ``value`` is neither a string nor a list of message dicts, a message has no role, or non-text
            content.
        ValueError: No message has one of ``roles``.
    """
    if isinstance(value, str):
        return value
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, dict) for m in value):
        raise TypeError(
            f"{what} is {type(value).__name__}: pass a string or a list of {{'role', 'content'}} messages."
        )
    if any("role" not in m for m in value):
        keys = sorted({k for m in value for k in m})
        raise TypeError(f"{what} has a message without a 'role' (keys {keys}): pass {{'role', 'content'}} messages "
                        "(ShareGPT's {'from', 'value'} rows need converting).")
    if value and not any(m["role"] in roles for m in value):
        found = sorted({str(m["role"]) for m in value})
        raise ValueError(f"{what} has no message of the roles {list(roles)} (its roles: {found}), so no text to "
                         "score: name the roles that hold it (AresReranker(prompt_roles=..., completion_roles=...)).")
    parts = []
    for message in value:
        if message["role"] not in roles:
            continue
        reasoning = message.get("reasoning_content")  # a reasoning model's chain, as TRL and vLLM parse <think>
        if isinstance(reasoning, str) and reasoning.strip():
            parts.append(reasoning)
        content = message.get("content")
        if isinstance(content, list):  # content parts: keep the text ones (images and the like are skipped)
            content = "\n".join(p if isinstance(p, str) else p["text"] for p in content
                                if isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str)))
        if content is None and (message.get("tool_calls") or isinstance(reasoning, str)):
            continue  # a tool call, or reasoning alone, has no content text
        if not isinstance(content, str):
            raise TypeError(f"{what} has a {message.get('role')!r} message whose content is {type(content).__name__}.")
        parts.append(content)
    return "\n\n".join(parts)

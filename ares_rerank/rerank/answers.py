"""Final answers of candidate chains, and which answers are the same: what answer-aware best-of-N votes group by.

Data flow: candidate text -> an :class:`AnswerMatcher` extracts its final answer -> equal answers form one group ->
:mod:`ares_rerank.rerank.voting` selects a group (majority, weighted, ...) -> the chosen candidate.

Three ways to read and compare answers (``answer_fn`` wherever a reranker, ``best_of_n`` or the evaluation takes one):

- ``"standard"`` (default, no extra dependency): the last ``\\boxed{...}`` (or ``\\fbox{...}``), else the text after
  ``# Answer`` (PRM800K's format), else after the last "The answer is" / "The final answer is"; compared after a
  light normalization (``$``, spaces, ``\\left`` / ``\\right``, ``\\dfrac`` -> ``\\frac``, ``\\text{..}`` unwrapped,
  a trailing period, thousands separators, and numbers by value: ``0.50`` = ``.5`` = ``1/2``).
- ``"math-verify"``: Hugging Face's ``math-verify`` (``pip install 'ares-rerank[math]'``), parsed and compared as
  TRL's ``accuracy_reward`` does: boxed answers first, symbolic equality (``\\frac{1}{2}`` = ``0.5``).
- a callable ``fn(text) -> key``: any hashable key (``None``: no answer), for other domains (a code's test
  outcome, a recipe's final dish, a ClaimTrees chain's last state).

Gold answers (:meth:`AnswerMatcher.is_correct`) are read by the same ``answer_fn`` as the candidates, so both sides
are compared in one form:

- ``"standard"``: the gold's own ``\\boxed{}`` / ``# Answer`` / "The answer is" when it has one, else the whole
  gold (a bare answer such as MATH's ``2\\sqrt{2}``), normalized as the candidates' answers are.
- ``"math-verify"``: a gold written as text with LaTeX delimiters (``$..$``, ``\\(..\\)``, ``\\[..\\]``,
  ``\\boxed{}``) or over several lines (a worked solution) is parsed exactly as TRL's ``accuracy_reward`` parses its
  ``solution`` column (math-verify's default extraction). A bare one-line gold -- MATH-500's and search-and-learn's
  ``answer`` field -- is read as ``\\boxed{gold}``, the form of a candidate that boxes it: math-verify reads LaTeX only
  inside delimiters (its maintainers say so in huggingface/Math-Verify#74), and a bare ``2\\sqrt{2}`` parses as 2,
  ``\\pi`` as nothing. A gold it cannot read either way is an error naming it (TRL skips such a row; here every
  candidate of the problem would silently count as wrong).
- a callable: ``fn(gold)``; when that is ``None`` (a function that reads a candidate's format, given a bare gold), the
  gold as written.

A candidate without an answer joins no group: it cannot win a vote (it can still win ``selection="best"``).

Time bounds (``timeout``, default 20 s per call), from any thread: math-verify runs in a worker process, where its
own ``signal``-based limits work (10 s to parse, 5 s to compare: on the main thread only, so in a server's or an
executor's thread it had none) and which is killed when a call still runs past ``timeout`` (sympy on
``\\boxed{10^{10^{100}}}``); such an answer counts as none, a comparison as unequal, as math-verify's own timeout
does, with a warning. A callable runs in a worker thread and is waited for at most ``timeout``: one that does not
return is an error naming it and the text (the thread is abandoned; a function cannot be stopped from outside).
"""

from __future__ import annotations

import math
import re
import threading
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Sequence, Union

from ..utils.bounded import CallFailed, CallTimedOut, WorkerProcess, call_with_timeout


__all__ = ["ANSWER_FNS", "DEFAULT_ANSWER_TIMEOUT", "UNREAD_CHECK_AFTER", "AnswerFn", "AnswerMatcher",
           "AnswerReadWarning", "answer_fn_from_spec", "answer_matcher", "extract_answer", "normalize_answer"]

AnswerFn = Union[str, Callable[[str], Any], "AnswerMatcher"]

#: The built-in ways to read answers (see the module docstring).
ANSWER_FNS = ("standard", "math-verify")
#: Seconds one call of math-verify or of an answer callable may take, unless the matcher is given another.
DEFAULT_ANSWER_TIMEOUT = 20.0

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_HEADING = re.compile(r"^#+\s*Answer\s*:?\s*$", re.IGNORECASE | re.MULTILINE)
_ANSWER_IS = re.compile(r"(?:final\s+)?answer\s+is\s*:?\s*", re.IGNORECASE)
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_FRAC = re.compile(r"^([-+]?)\\frac\{([-+]?\d+)\}\{(\d+)\}$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
#: LaTeX delimiters in a gold text: math-verify reads LaTeX inside them only.
_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\(?:boxed|fbox)\s*\{")


def _braced(text: str, start: int) -> str | None:
    """The contents of the brace group opened just before ``start`` (balanced), or ``None`` when it never closes."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def extract_answer(text: str) -> str | None:
    """The final answer a chain states, as written (not normalized), or ``None``.

    In order: the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces kept); the first non-empty line after a
    ``# Answer`` heading; the rest of the line after the last "the (final) answer is" (a trailing period dropped).
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_answer(text=...) takes a string, got {type(text).__name__}.")
    boxes = list(_BOX.finditer(text))
    for match in reversed(boxes):
        inner = _braced(text, match.end())
        if inner is not None and inner.strip():
            return inner.strip()
    headings = list(_ANSWER_HEADING.finditer(text))
    if headings:
        rest = [line.strip() for line in text[headings[-1].end():].splitlines() if line.strip()]
        if rest:
            return rest[0]
    said = list(_ANSWER_IS.finditer(text))
    if said:
        line = text[said[-1].end():].strip().splitlines()
        answer = line[0].strip() if line else ""
        answer = answer[:-1].strip() if answer.endswith(".") else answer
        return answer or None
    return None


def _number(text: str) -> Fraction | None:
    if _NUMBER.fullmatch(text):
        try:
            return Fraction(text)
        except (ValueError, ZeroDivisionError):
            return None
    frac = _FRAC.match(text) or re.fullmatch(r"([-+]?)(\d+)/(\d+)", text)
    if frac and int(frac.group(3)) != 0:
        value = Fraction(int(frac.group(2)), int(frac.group(3)))
        return -value if frac.group(1) == "-" else value
    return None


def normalize_answer(answer: str) -> str:
    """A light canonical form of an answer string, so that ``$\\dfrac{1}{2}$``, ``0.5`` and ``1/2`` compare equal.

    Drops ``$``, ``\\left`` / ``\\right``, ``\\!`` / ``\\,`` spacing, whitespace, a trailing period and thousands
    separators; unwraps ``\\text{..}``-like commands; ``\\dfrac`` / ``\\tfrac`` become ``\\frac``; a number (or a
    fraction of integers) becomes its exact value (``"0.50"`` -> ``"1/2"``, ``"3.0"`` -> ``"3"``). Not a CAS: use
    ``answer_fn="math-verify"`` for symbolic equality.
    """
    text = answer.strip().strip("$").strip()
    text = _TEXT.sub(r"\1", text)
    for old, new in (("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\dfrac", "\\frac"),
                     ("\\tfrac", "\\frac"), ("^\\circ", ""), ("^{\\circ}", "")):
        text = text.replace(old, new)
    text = _THOUSANDS.sub("", text)
    text = re.sub(r"\s+", "", text).rstrip(".")
    text = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)
    value = _number(text)
    if value is not None:
        return str(value)
    return text


#: Candidates an :class:`AnswerMatcher` sees before it judges whether its answer function fits them.
UNREAD_CHECK_AFTER = 8


class AnswerReadWarning(UserWarning):
    """Most candidates had no final answer the answer function could read (:attr:`AnswerMatcher.seen`)."""


class AnswerMatcher:
    """Reads final answers and decides which are the same (see the module docstring for the three kinds).

    Args:
        answer_fn: ``"standard"``, ``"math-verify"`` or a callable ``fn(text) -> hashable key or None``.
        timeout: Seconds one call of math-verify or of the callable may take (see the module docstring; default
            :data:`DEFAULT_ANSWER_TIMEOUT`).

    Attributes:
        name: ``"standard"``, ``"math-verify"`` or the callable's ``__name__``.
        timeouts: math-verify calls cut at ``timeout`` (their answer counted as none, or unequal).
        seen, read: Candidate texts :meth:`group` was given, and those it read an answer from. Once at least
            :data:`UNREAD_CHECK_AFTER` were seen and most gave none, :meth:`group` warns once
            (:class:`AnswerReadWarning`, :meth:`unread_message`): an answer function that does not fit the
            candidates silently turns an answer vote into a ranking by score.
    """

    def __init__(self, answer_fn: str | Callable[[str], Any] = "standard", timeout: float | None = None) -> None:
        timeout = DEFAULT_ANSWER_TIMEOUT if timeout is None else timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or \
                timeout <= 0:
            raise ValueError(f"AnswerMatcher(timeout={timeout!r}) must be a finite number of seconds > 0, e.g. 20.")
        self.timeout, self.timeouts = float(timeout), 0
        self.seen, self.read, self.warned = 0, 0, False
        if isinstance(answer_fn, str):
            if answer_fn not in ANSWER_FNS:
                raise ValueError(f"answer_fn={answer_fn!r} is unknown: use one of {list(ANSWER_FNS)} or a callable "
                                 "fn(completion_text) -> answer key (None: no answer).")
            if answer_fn == "math-verify":
                _math_verify()  # installed? said now, not at the first vote
            self.name = answer_fn
        elif callable(answer_fn):
            self.name = getattr(answer_fn, "__name__", type(answer_fn).__name__)
        else:
            raise TypeError(f"answer_fn must be one of {list(ANSWER_FNS)} or a callable, got "
                            f"{type(answer_fn).__name__}.")
        self.answer_fn = answer_fn

    def __repr__(self) -> str:
        return f"AnswerMatcher({self.name!r})"

    def parse(self, text: Any) -> Any:
        """The answer of one candidate in comparable form, or ``None`` (no answer, or not text)."""
        if not isinstance(text, str):
            return None
        if self.answer_fn == "standard":
            answer = extract_answer(text)
            return None if answer is None else normalize_answer(answer)
        if self.answer_fn == "math-verify":
            return self._math("parse_answer", text)
        key = self._call(text)
        if key is not None and not isinstance(key, Hashable):
            raise TypeError(f"answer_fn {self.name!r} returned {type(key).__name__} {key!r:.60}: return a hashable "
                            "key (a string, number or tuple), or None for no answer.")
        return key

    def same(self, a: Any, b: Any) -> bool:
        """Whether two parsed answers are equivalent (``None`` matches nothing)."""
        if a is None or b is None:
            return False
        if self.answer_fn == "math-verify":
            return self._math_equal(a, b)
        return a == b

    def _call(self, text: str) -> Any:
        """The callable on ``text``, within ``timeout`` from any thread."""
        try:
            return call_with_timeout(self.answer_fn, (text,), self.timeout, name="ares-answer-fn")
        except CallTimedOut:
            raise ValueError(f"answer_fn {self.name!r} did not return within {self.timeout:g} s on the text "
                             f"{text[:80]!r}{'...' if len(text) > 80 else ''}: fix the function (it is left running "
                             "in the background), or give it longer with AnswerMatcher(fn, timeout=...).") from None

    def _math(self, op: str, text: str) -> _MathAnswer | None:
        """math-verify's parse of ``text`` in the worker process: a handle naming it, or ``None`` (no answer, or
        past the bound)."""
        try:
            found, shown = _math_verify().call(op, (text,), self.timeout)
        except CallTimedOut:
            self._timed_out(f"parsing {text[:60]!r}")
            return None
        except CallFailed:  # math-verify raised on it: no answer, never a crash (a dead worker is an error)
            return None
        return _MathAnswer(op, text, shown) if found else None

    def _math_equal(self, gold: _MathAnswer, answer: _MathAnswer) -> bool:
        try:
            return bool(_math_verify().call("equal", (gold.op, gold.source, answer.op, answer.source), self.timeout))
        except CallTimedOut:
            self._timed_out(f"comparing {gold.shown[:40]!r} with {answer.shown[:40]!r}")
            return False
        except CallFailed:
            return False

    def _timed_out(self, what: str) -> None:
        self.timeouts += 1
        warnings.warn(f"answer_fn='math-verify' did not return within {self.timeout:g} s {what}: counted as no "
                      "answer (a comparison as unequal), as math-verify's own timeout does.", RuntimeWarning,
                      stacklevel=4)

    def group(self, texts: Sequence[Any]) -> tuple[list[int | None], list[Any]]:
        """Group candidates by answer.

        Returns:
            ``(group per candidate, answer per candidate)``: groups are numbered 0, 1, ... in order of first
            appearance (``None`` for a candidate without an answer); answers are the parsed answers (display form).
        """
        parsed = [self.parse(t) for t in texts]
        self.seen += sum(isinstance(t, str) for t in texts)
        self.read += sum(a is not None for a, t in zip(parsed, texts) if isinstance(t, str))
        if not self.warned and self.seen >= UNREAD_CHECK_AFTER and self.unread * 2 > self.seen:
            self.warned = True
            warnings.warn(self.unread_message(), AnswerReadWarning, stacklevel=3)
        groups: list[int | None] = []
        representatives: list[Any] = []
        index: dict[Any, int] = {}
        for answer in parsed:
            if answer is None:
                groups.append(None)
                continue
            if self.answer_fn != "math-verify":
                groups.append(index.setdefault(answer, len(index)))
                continue
            found = next((g for g, rep in enumerate(representatives)
                          if rep == answer or self.same(rep, answer)), None)
            if found is None:
                found = len(representatives)
                representatives.append(answer)
            groups.append(found)
        return groups, [self.display(a) for a in parsed]

    @property
    def unread(self) -> int:
        """Candidate texts :meth:`group` read no answer from."""
        return self.seen - self.read

    def unread_message(self, option: str = "answer_fn", custom: str = "answer_fn=<your function>") -> str:
        """What :class:`AnswerReadWarning` says (the CLI names its flags with ``option`` and ``custom``)."""
        return (f"{option} {self.name!r} read no final answer from {self.unread} of {self.seen} candidates (they vote "
                "for no answer, so an answer-aware selection picks among the rest, or by score alone): check that "
                f"the answer function fits how your candidates state their answers, or pass your own ({custom}).")

    def display(self, parsed: Any) -> Any:
        """A JSON-friendly form of a parsed answer (math-verify's parse is shown as its string form)."""
        if parsed is None or isinstance(parsed, (str, int, float, bool)):
            return parsed
        if isinstance(parsed, _MathAnswer):
            return parsed.shown
        return parsed if isinstance(parsed, (list, tuple)) else str(parsed)

    def gold_key(self, gold: Any) -> Any:
        """The gold answer in the form :meth:`parse` gives a candidate's (see the module docstring), ``None`` for no
        gold.

        Raises:
            ValueError: math-verify cannot read the gold answer.
        """
        if gold is None:
            return None
        if self.answer_fn == "standard":
            written = str(gold)
            found = extract_answer(written)
            return normalize_answer(written if found is None else found)
        if self.answer_fn == "math-verify":
            parsed = self._math("parse_gold", str(gold))
            if parsed is None:
                raise ValueError(f"answer_fn='math-verify' cannot read the gold answer {str(gold)!r:.120} (neither as "
                                 "written nor as \\boxed{...}): fix that record's gold answer, or use "
                                 "answer_fn='standard'.")
            return parsed
        key = self.parse(gold if isinstance(gold, str) else str(gold))  # a JSON number as its text: fn reads text
        return gold if key is None else key

    def is_correct(self, text: Any, gold: Any) -> bool:
        """Whether a candidate's answer equals the gold answer, both read by this matcher (:meth:`parse` for the
        candidate, :meth:`gold_key` for the gold: a bare answer or text stating it)."""
        answer = self.parse(text)
        if answer is None or gold is None:
            return False
        if self.answer_fn == "math-verify":
            return self._math_equal(self.gold_key(gold), answer)
        return self.gold_key(gold) == answer


def answer_matcher(answer_fn: AnswerFn | None = None) -> AnswerMatcher:
    """An :class:`AnswerMatcher` from a name, a callable or a matcher (``None``: ``"standard"``)."""
    if isinstance(answer_fn, AnswerMatcher):
        return answer_fn
    return AnswerMatcher("standard" if answer_fn is None else answer_fn)


@dataclass(frozen=True)
class _MathAnswer:
    """A math-verify parse as the caller holds it: which parse (``op``), of what text, and its display form; the
    sympy objects stay in the worker process (nothing of sympy crosses the pipe)."""

    op: str
    source: str
    shown: str


class _MathVerify:
    """math-verify, configured as TRL 1.16's ``accuracy_reward``: answers parsed with boxed first and no anchor-free
    guessing, gold texts with math-verify's defaults; bare gold answers boxed first (see the module docstring).
    Runs in the worker process (:func:`_math_verify_op`), on its main thread, where math-verify's own time limits
    work."""

    def __init__(self) -> None:
        try:
            import math_verify
            from latex2sympy2_extended import NormalizationConfig
        except ImportError as err:
            raise ImportError("answer_fn='math-verify' needs Hugging Face's math-verify: pip install "
                              "'ares-rerank[math]' (or pip install math-verify), or use answer_fn='standard'.") from err
        self.module = math_verify
        self.answer_config = [math_verify.LatexExtractionConfig(
            normalization_config=NormalizationConfig(nits=False, malformed_operators=False, basic_latex=True,
                                                     boxed="all", units=True),
            boxed_match_priority=0, try_extract_without_anchor=False)]
        self.golds: dict[str, list] = {}  # one problem's gold is compared with each of its N candidates
        self.answers: dict[str, list] = {}  # a candidate's parse, compared with each group's representative

    @staticmethod
    def timeout(seconds: int) -> int | None:
        """math-verify's time limits use ``signal.alarm``, which works on the main thread only (the worker's);
        elsewhere it runs without one, and only the caller's bound on the worker holds."""
        return seconds if threading.current_thread() is threading.main_thread() else None

    def parse_answer(self, text: str) -> list:
        if text not in self.answers:
            if len(self.answers) > 4096:
                self.answers.clear()
            self.answers[text] = self.module.parse(text, extraction_config=self.answer_config,
                                                   extraction_mode="first_match", parsing_timeout=self.timeout(10))
        return self.answers[text]

    def parse_gold(self, gold: str) -> list:
        """TRL's parse of a gold text; a bare one-line answer read as ``\\boxed{gold}`` (then as written)."""
        if gold not in self.golds:
            text = gold.strip()
            tries = [text] if _DELIMITED.search(text) or "\n" in text else ["\\boxed{" + text + "}", text]
            parsed: list = []
            for attempt in tries:
                parsed = self.module.parse(attempt, parsing_timeout=self.timeout(10))
                if parsed:
                    break
            if len(self.golds) > 4096:
                self.golds.clear()
            self.golds[gold] = parsed
        return self.golds[gold]

    def equal(self, gold: list, answer: list) -> bool:
        if not gold or not answer:
            return False
        try:
            return bool(self.module.verify(gold, answer, timeout_seconds=self.timeout(5)))
        except Exception:  # noqa: BLE001 -- math-verify raises on some inputs; not equal, never a crash
            return False

    @staticmethod
    def text(parsed: list) -> str:
        return str(parsed[-1]) if parsed else ""


_WORKER_MATH_VERIFY: _MathVerify | None = None  # in the worker process
_MATH_VERIFY: WorkerProcess | None = None  # in the caller's


def _math_verify_op(op: str, *args: str) -> Any:
    """The worker process's handler: ``parse_answer`` / ``parse_gold`` (text) -> ``(parsed?, display)``; ``equal``
    (gold op, gold text, answer op, answer text) -> bool (each text parsed again from the worker's cache)."""
    global _WORKER_MATH_VERIFY
    if _WORKER_MATH_VERIFY is None:
        _WORKER_MATH_VERIFY = _MathVerify()
    verifier = _WORKER_MATH_VERIFY
    if op == "start":  # WorkerProcess's start_op: math-verify imported and its grammar loaded, before any timed call
        verifier.parse_answer("\\boxed{1}")
        return None
    if op == "equal":
        gold_op, gold, answer_op, answer = args
        return verifier.equal(getattr(verifier, gold_op)(gold), getattr(verifier, answer_op)(answer))
    if op not in ("parse_answer", "parse_gold"):
        raise ValueError(f"unknown math-verify operation {op!r}")
    parsed = getattr(verifier, op)(args[0])
    return bool(parsed), verifier.text(parsed)


def _math_verify() -> WorkerProcess:
    """The math-verify worker process (started at its first call); math-verify's presence is checked here, in
    the caller, so a missing package is said when the matcher is made."""
    global _MATH_VERIFY
    if _MATH_VERIFY is None:
        import importlib.util

        if any(importlib.util.find_spec(name) is None for name in ("math_verify", "latex2sympy2_extended")):
            raise ImportError("answer_fn='math-verify' needs Hugging Face's math-verify: pip install "
                              "'ares-rerank[math]' (or pip install math-verify), or use answer_fn='standard'.")
        _MATH_VERIFY = WorkerProcess("ares_rerank.rerank.answers:_math_verify_op", "math-verify", start_op="start")
    return _MATH_VERIFY


def answer_fn_from_spec(value: str, flag: str = "--answer-fn") -> AnswerMatcher:
    """The matcher a command line's text names: a built-in (:data:`ANSWER_FNS`), or ``module:function`` imported
    (a function text -> answer); a ValueError naming ``flag`` otherwise."""
    import importlib

    if value in ANSWER_FNS:
        return answer_matcher(value)
    module_name, _, attr = value.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{flag}={value!r} is neither {' nor '.join(ANSWER_FNS)} nor 'module:function' (e.g. "
                         "'my_answers:extract' for a function extract(text) -> answer in my_answers.py).")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{flag}={value!r}: cannot import {attr!r} from {module_name!r} ({err}); the module "
                         "must be importable from the working directory or the environment.") from err
    if not callable(fn):
        raise ValueError(f"{flag}={value!r} names a {type(fn).__name__}, not a function text -> answer.")
    return answer_matcher(fn)

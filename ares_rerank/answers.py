"""Final answers of candidate chains, and which answers are the same: what answer-aware best-of-N votes group by.

Data flow: candidate text -> an :class:`AnswerMatcher` extracts its final answer -> equal answers form one group ->
:mod:`ares_rerank.voting` selects a group (majority, weighted, ...) -> the chosen candidate.

Three ways to read and compare answers (``answer_fn`` wherever a reranker, ``best_of_n`` or the evaluation takes one):

- ``"standard"`` (default, no extra dependency): the last ``\\boxed{...}`` (or ``\\fbox{...}``), else the text after
  ``# Answer`` (PRM800K's format), else after the last "The answer is" / "The final answer is"; compared after a
  light normalization (``$``, spaces, ``\\left`` / ``\\right``, ``\\dfrac`` -> ``\\frac``, ``\\text{..}`` unwrapped,
  a trailing period, thousands separators, and numbers by value: ``0.50`` = ``.5`` = ``1/2``).
- ``"math-verify"``: Hugging Face's ``math-verify`` (``pip install 'ares-rerank[math]'``), parsed and compared as
  TRL's ``accuracy_reward`` does: boxed answers first, symbolic equality (``\\frac{1}{2}`` = ``0.5``).
- a callable ``fn(text) -> key``: any hashable key (``None``: no answer), for other domains (a code's test
  outcome, a recipe's final dish, a ClaimTrees chain's last state).

A candidate without an answer joins no group: it cannot win a vote (it can still win ``selection="best"``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Hashable
from fractions import Fraction
from typing import Any, Callable, Sequence, Union


__all__ = ["ANSWER_FNS", "AnswerFn", "AnswerMatcher", "answer_matcher", "extract_answer", "normalize_answer"]

AnswerFn = Union[str, Callable[[str], Any], "AnswerMatcher"]

#: The built-in ways to read answers (see the module docstring).
ANSWER_FNS = ("standard", "math-verify")

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_HEADING = re.compile(r"^#+\s*Answer\s*:?\s*$", re.IGNORECASE | re.MULTILINE)
_ANSWER_IS = re.compile(r"(?:final\s+)?answer\s+is\s*:?\s*", re.IGNORECASE)
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_FRAC = re.compile(r"^([-+]?)\\frac\{([-+]?\d+)\}\{(\d+)\}$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


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


class AnswerMatcher:
    """Reads final answers and decides which are the same (see the module docstring for the three kinds).

    Args:
        answer_fn: ``"standard"``, ``"math-verify"`` or a callable ``fn(text) -> hashable key or None``.

    Attributes:
        name: ``"standard"``, ``"math-verify"`` or the callable's ``__name__``.
    """

    def __init__(self, answer_fn: str | Callable[[str], Any] = "standard") -> None:
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
            parsed = _math_verify().parse_answer(text)
            return parsed or None
        key = self.answer_fn(text)
        if key is not None and not isinstance(key, Hashable):
            raise TypeError(f"answer_fn {self.name!r} returned {type(key).__name__} {key!r:.60}: return a hashable "
                            "key (a string, number or tuple), or None for no answer.")
        return key

    def same(self, a: Any, b: Any) -> bool:
        """Whether two parsed answers are equivalent (``None`` matches nothing)."""
        if a is None or b is None:
            return False
        if self.answer_fn == "math-verify":
            return _math_verify().equal(a, b)
        return a == b

    def group(self, texts: Sequence[Any]) -> tuple[list[int | None], list[Any]]:
        """Group candidates by answer.

        Returns:
            ``(group per candidate, answer per candidate)``: groups are numbered 0, 1, ... in order of first
            appearance (``None`` for a candidate without an answer); answers are the parsed answers (display form).
        """
        parsed = [self.parse(t) for t in texts]
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
            found = next((g for g, rep in enumerate(representatives) if self.same(rep, answer)), None)
            if found is None:
                found = len(representatives)
                representatives.append(answer)
            groups.append(found)
        return groups, [self.display(a) for a in parsed]

    def display(self, parsed: Any) -> Any:
        """A JSON-friendly form of a parsed answer (math-verify's parse is shown as its string form)."""
        if parsed is None or isinstance(parsed, (str, int, float, bool)):
            return parsed
        if self.answer_fn == "math-verify":
            return _math_verify().text(parsed)
        return parsed if isinstance(parsed, (list, tuple)) else str(parsed)

    def is_correct(self, text: Any, gold: Any) -> bool:
        """Whether a candidate's answer equals the gold answer (``gold`` as written in the data set: for the
        standard matcher a ``\\boxed{}`` answer or a bare one; for math-verify anything it parses)."""
        answer = self.parse(text)
        if answer is None or gold is None:
            return False
        if self.answer_fn == "math-verify":
            return _math_verify().equal(_math_verify().parse_gold(str(gold)), answer)
        if self.answer_fn == "standard":
            gold = str(gold)
            found = extract_answer(gold) if _BOX.search(gold) else gold
            return found is not None and normalize_answer(found) == answer
        return answer == gold


def answer_matcher(answer_fn: AnswerFn | None = None) -> AnswerMatcher:
    """An :class:`AnswerMatcher` from a name, a callable or a matcher (``None``: ``"standard"``)."""
    if isinstance(answer_fn, AnswerMatcher):
        return answer_fn
    return AnswerMatcher("standard" if answer_fn is None else answer_fn)


class _MathVerify:
    """math-verify, configured as TRL's ``accuracy_reward``: gold parsed with the defaults, answers with boxed
    first and no anchor-free guessing."""

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

    @staticmethod
    def timeout() -> int | None:
        """math-verify's time limit (5 s) uses ``signal.alarm``, which works on the main thread only; elsewhere (a
        server's worker, an async reward's thread) it runs without one."""
        return 5 if threading.current_thread() is threading.main_thread() else None

    def parse_answer(self, text: str) -> list:
        return self.module.parse(text, extraction_config=self.answer_config, extraction_mode="first_match",
                                 parsing_timeout=self.timeout())

    def parse_gold(self, text: str) -> list:
        return self.module.parse(text, extraction_mode="first_match", parsing_timeout=self.timeout())

    def equal(self, gold: list, answer: list) -> bool:
        if not gold or not answer:
            return False
        try:
            return bool(self.module.verify(gold, answer, timeout_seconds=self.timeout()))
        except Exception:  # noqa: BLE001 -- math-verify raises on some inputs; not equal, never a crash
            return False

    @staticmethod
    def text(parsed: list) -> str:
        return str(parsed[-1]) if parsed else ""


_MATH_VERIFY: _MathVerify | None = None


def _math_verify() -> _MathVerify:
    global _MATH_VERIFY
    if _MATH_VERIFY is None:
        _MATH_VERIFY = _MathVerify()
    return _MATH_VERIFY

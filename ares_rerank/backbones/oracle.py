"""A deterministic rule oracle for ClaimTrees: the ground-truth backbone for tests and demos (no model).

A ClaimTrees step ``I have P, I use rule (P -> Q) to derive Q, now I have Q`` is entailed by a premise set iff
(1) P is held: the fact ``I have P`` or an earlier step concluding ``now I have P`` is among the premises, and
(2) the rule ``P -> Q`` is among the premises. Claims are parsed with regexes built from the (possibly reworded)
:class:`~ares_rerank.data.claimtrees.ClaimTreesTemplates`.
"""

from __future__ import annotations

import re
import string
from typing import Sequence

from ..data.claimtrees import ClaimTreesTemplates


__all__ = ["ClaimTreesOracle"]

_SYMBOL = r"[A-Za-z0-9_]+"


class _TemplateParser:
    """Match text against one template and return its fields, requiring repeated fields to agree."""

    def __init__(self, template: str, symbol: str) -> None:
        parts, self.fields = [], []
        for literal, field, _, _ in string.Formatter().parse(template):
            parts.append(re.escape(literal))
            if field is not None:
                parts.append(f"({symbol})")
                self.fields.append(field)
        self.regex = re.compile("".join(parts))

    def parse(self, text: str) -> dict[str, str] | None:
        """``{"p": .., "q": ..}`` on a match; ``{}`` when it matches but a repeated field disagrees; else ``None``."""
        match = self.regex.fullmatch(text.strip())
        if match is None:
            return None
        values: dict[str, set[str]] = {}
        for field, value in zip(self.fields, match.groups()):
            values.setdefault(field, set()).add(value)
        if any(len(v) > 1 for v in values.values()):
            return {}
        return {field: next(iter(v)) for field, v in values.items()}


class ClaimTreesOracle:
    """Backbone that returns 1.0 iff a ClaimTrees step follows from its premises by one rule application, else 0.0.

    Premises are read as rules (``P -> Q``), facts (``I have P``) and earlier steps (which make their conclusion
    ``Q`` held). Premises matching no template, or whose repeated fields disagree, are ignored. A hypothesis whose
    repeated fields disagree (e.g. ``I have A, I use rule (B -> C) ...``) is not entailed (0.0).

    Args:
        templates: The templates the chains were generated with; ``None`` uses the paper's.
        symbol: Regex for one state name (default: letters, digits and ``_``).

    Example:
        >>> oracle = ClaimTreesOracle()
        >>> rule = "Rule: A -> B (meaning that if I have A, I can derive B)"
        >>> step = "I have A, I use rule (A -> B) to derive B, now I have B"
        >>> oracle.entailment_probs([[rule, "I have A"], [rule]], [step, step])
        [1.0, 0.0]
    """

    def __init__(self, templates: ClaimTreesTemplates | None = None, symbol: str = _SYMBOL) -> None:
        if templates is not None and not isinstance(templates, ClaimTreesTemplates):
            raise TypeError(
                f"ClaimTreesOracle(templates=...) must be a ClaimTreesTemplates, got {type(templates).__name__}."
            )
        self.templates = templates or ClaimTreesTemplates()
        self._step = _TemplateParser(self.templates.step, symbol)
        self._rule = _TemplateParser(self.templates.rule, symbol)
        self._fact = _TemplateParser(self.templates.fact, symbol)

    def _knowledge(self, premises: Sequence[str]) -> tuple[set[str], set[tuple[str, str]]]:
        """The held states and the known rules in a premise list."""
        held: set[str] = set()
        rules: set[tuple[str, str]] = set()
        for claim in premises:
            if fields := self._step.parse(claim):
                held.add(fields["q"])
            elif fields := self._rule.parse(claim):
                rules.add((fields["p"], fields["q"]))
            elif fields := self._fact.parse(claim):
                held.add(fields["p"])
        return held, rules

    def _judge(self, premises: Sequence[str], hypothesis: str) -> float:
        fields = self._step.parse(hypothesis)
        if fields is None:
            raise ValueError(
                f"ClaimTreesOracle cannot parse hypothesis {hypothesis[:120]!r}: it judges only ClaimTrees steps of "
                f"the form {self.templates.step!r}; pass the templates the chain was generated with "
                "(ClaimTreesOracle(templates=...))."
            )
        if not fields:  # a step whose repeated fields disagree applies no single rule
            return 0.0
        held, rules = self._knowledge(premises)
        return float(fields["p"] in held and (fields["p"], fields["q"]) in rules)

    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> list[float]:
        """One 0/1 entailment value per ``(premises[i], hypotheses[i])`` pair.

        Raises:
            ValueError: The two lists differ in length, or a hypothesis is not a ClaimTrees step.
        """
        if len(premises) != len(hypotheses):
            raise ValueError(
                f"ClaimTreesOracle.entailment_probs got {len(premises)} premise lists for {len(hypotheses)} "
                "hypotheses: pass one premise list per hypothesis."
            )
        return [self._judge(p, h) for p, h in zip(premises, hypotheses)]

    def __repr__(self) -> str:
        if self.templates == ClaimTreesTemplates():
            return "ClaimTreesOracle()"
        return f"ClaimTreesOracle({self.templates})"

"""Deterministic ground-truth oracles (no model): ClaimTrees rules, and CaptainCookRecipes recipe graphs.

A ClaimTrees step ``I have P, I use rule (P -> Q) to derive Q, now I have Q`` is entailed by a premise set iff
(1) P is held: the fact ``I have P`` or an earlier step concluding ``now I have P`` is among the premises, and
(2) the rule ``P -> Q`` is among the premises. Claims are parsed with regexes built from the (possibly reworded)
:class:`~ares_rerank.data.claimtrees.ClaimTreesTemplates`.

A CaptainCookRecipes step claim is entailed iff the premises hold its rule, a completion of every predecessor step
(``We now START.`` for the start node) and ``We have <x>.`` for every ingredient it needs (:class:`RecipeOracle`).
"""

from __future__ import annotations

import re
import string
from typing import Any, Iterable, Sequence

from ..data.claimtrees import ClaimTreesTemplates
from .base import check_pairs


__all__ = ["ClaimTreesOracle", "RecipeOracle"]

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
        symbol: Regex for one state name (default: the templates' ``name_pattern``, else letters, digits and ``_``).

    Example:
        >>> oracle = ClaimTreesOracle()
        >>> rule = "Rule: A -> B (meaning that if I have A, I can derive B)"
        >>> step = "I have A, I use rule (A -> B) to derive B, now I have B"
        >>> oracle.entailment_probs([[rule, "I have A"], [rule]], [step, step])
        [1.0, 0.0]
    """

    def __init__(self, templates: ClaimTreesTemplates | None = None, symbol: str | None = None) -> None:
        if templates is not None and not isinstance(templates, ClaimTreesTemplates):
            raise TypeError(
                f"ClaimTreesOracle(templates=...) must be a ClaimTreesTemplates, got {type(templates).__name__}."
            )
        self.templates = templates or ClaimTreesTemplates()
        symbol = symbol or self.templates.name_pattern or _SYMBOL
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
        premises, hypotheses = check_pairs(premises, hypotheses, "ClaimTreesOracle.entailment_probs")
        return [self._judge(p, h) for p, h in zip(premises, hypotheses)]

    def __repr__(self) -> str:
        if self.templates == ClaimTreesTemplates():
            return "ClaimTreesOracle()"
        return f"ClaimTreesOracle({self.templates})"


class RecipeOracle:
    """Backbone that returns 1.0 iff a CaptainCookRecipes step claim follows from its premises, else 0.0.

    Step ``s`` is entailed iff the premises hold (1) its rule claim (when it has predecessors), (2) for each
    predecessor: ``We now START.`` for the start node, else a step claim that completes a step of that text, and
    (3) ``We have <x>.`` for each canonical ingredient ``x`` it needs. Claims are matched as the exact texts the
    recipe generator writes (:func:`~ares_rerank.data.recipes.recipe_steps`); other premises are ignored. On the
    sound prefixes of the evaluation chains this reproduces the spec's labels (tests/backbones/test_oracle.py). Built
    from several graphs, a step claim that two recipes write alike is entailed when either recipe's needs are met.

    Args:
        graphs: One recipe graph (a dict from :func:`~ares_rerank.data.recipes.load_recipe_graphs`) or several.

    Example:
        >>> from ares_rerank.data import load_recipes
        >>> from ares_rerank.data.recipes import load_recipe_graphs
        >>> chain = load_recipes(1)[0]
        >>> oracle = RecipeOracle(dict(load_recipe_graphs())[chain.meta["recipe"]])
        >>> oracle.entailment_probs([chain.base_claims], [chain.steps[0]])
        [1.0]
    """

    def __init__(self, graphs: dict[str, Any] | Iterable[dict[str, Any]]) -> None:
        from ..data.recipes import START_CLAIM, ingredient_claim, recipe_steps

        graph_list = [graphs] if isinstance(graphs, dict) else list(graphs)
        if not graph_list or not all(isinstance(g, dict) and "steps" in g for g in graph_list):
            raise TypeError("RecipeOracle(graphs=...) takes a recipe graph dict (with 'steps', 'edges', ...) or a "
                            "list of them, e.g. [g for _, g in load_recipe_graphs()].")
        self._completes: dict[str, str] = {}
        # step claim -> the requirement sets of every graph that writes it (two recipes can write the same step
        # claim with other canonical ingredients: "garlic clove" / "garlic"); any one satisfied entails it
        self._needs: dict[str, set[tuple[tuple[str, str], ...]]] = {}
        for graph in graph_list:
            for step in recipe_steps(graph):
                needs = [("claim", step.rule)] if step.rule is not None else []
                needs += [("claim", START_CLAIM) if p == "START" else ("done", p) for p in step.predecessors]
                needs += [("claim", ingredient_claim(x)) for x in step.ingredients]
                self._completes[step.claim] = step.text
                self._needs.setdefault(step.claim, set()).add(tuple(needs))

    def _judge(self, premises: Sequence[str], hypothesis: str) -> float:
        needs = self._needs.get(hypothesis.strip())
        if needs is None:
            raise ValueError(
                f"RecipeOracle cannot judge hypothesis {hypothesis[:120]!r}: it is no step claim of its recipe graphs; "
                "build the oracle from the graph the chain was generated from."
            )
        held = {p.strip() for p in premises}
        done = {self._completes[p] for p in held if p in self._completes}
        return float(any(all(value in (held if kind == "claim" else done) for kind, value in option)
                         for option in needs))

    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> list[float]:
        """One 0/1 entailment value per ``(premises[i], hypotheses[i])`` pair.

        Raises:
            ValueError: The two lists differ in length, or a hypothesis is not a step claim of the graphs.
        """
        premises, hypotheses = check_pairs(premises, hypotheses, "RecipeOracle.entailment_probs")
        return [self._judge(p, h) for p, h in zip(premises, hypotheses)]

    def __repr__(self) -> str:
        return f"RecipeOracle({len(self._needs)} step claims)"

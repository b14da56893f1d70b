"""ClaimTrees: synthetic rule-chaining chains with a known unsound suffix (ARES paper, section 5 of ARES_SPEC).

Task metadata:
    name: ClaimTrees-L (the paper's ``vanilla3_no_repeat``, L states, 2-character names), plus the multi-source
        single-sink ``sXdY`` and the insertion ``vVi I`` variants.
    base claims: rules ``P -> Q`` and the starting fact ``I have s_0``, with one base claim deleted (vanilla, sXdY)
        and the rest shuffled.
    steps: ``I have P, I use rule (P -> Q) to derive Q, now I have Q`` along the chain.
    labels: ``1`` = unsound: every step from the deleted rule on (vanilla, sXdY), the inserted steps (insertion).
    source: "Probabilistic Soundness Guarantees in LLM Reasoning Chains" (arXiv 2507.12948); generator rebuilt from
        the spec and checked against its golden vectors and per-fold prevalences.

Known flaw of the research code: when the deleted base claim is the starting fact, it labels every step sound,
although no step is then grounded. We label every step unsound; ``paper_compat=True`` reproduces the flaw (needed to
match the paper's folds and numbers).
"""

from __future__ import annotations

import itertools
import random
import re
import string
from dataclasses import dataclass, field
from functools import lru_cache

from ..chain import Chain


__all__ = [
    "ClaimTreesTemplates",
    "VARIANTS",
    "claimtrees_example",
    "claimtrees_insertion",
    "claimtrees_multi_source",
    "claimtrees_names",
    "claimtrees_vanilla",
    "load_claimtrees",
    "name_capacity",
]

VARIANTS = ("vanilla", "multi_source", "insertion")
_NAME_SEED = 42
_FIRST_CHARS = string.ascii_uppercase
_OTHER_CHARS = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class ClaimTreesTemplates:
    """The three sentence templates of ClaimTrees; ``{p}`` / ``{q}`` are state names. Defaults = the paper's."""

    rule: str = field(
        default="Rule: {p} -> {q} (meaning that if I have {p}, I can derive {q})",
        metadata={"help": "A rule base claim; fields {p} (premise state) and {q} (derived state)."},
    )
    fact: str = field(default="I have {p}", metadata={"help": "The starting fact; field {p}."})
    step: str = field(
        default="I have {p}, I use rule ({p} -> {q}) to derive {q}, now I have {q}",
        metadata={"help": "A derived claim applying rule p -> q; fields {p} and {q}."},
    )
    name_pattern: str | None = field(
        default=None,
        metadata={"help": "Regex of one state name, for parsers of these templates (ClaimTreesOracle); None = one "
                          "run of letters, digits and '_'. Names with spaces (e.g. 'old mill') need a pattern that "
                          "allows them."},
    )

    def __post_init__(self) -> None:
        for name, needed in (("rule", {"p", "q"}), ("fact", {"p"}), ("step", {"p", "q"})):
            template = getattr(self, name)
            if not isinstance(template, str):
                raise TypeError(f"ClaimTreesTemplates({name}=...) must be a string, got {type(template).__name__}.")
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
            if fields != needed:
                raise ValueError(
                    f"ClaimTreesTemplates({name}={template!r}) uses the fields {sorted(fields)}: it must use exactly "
                    f"{sorted(needed)} (written {{p}} / {{q}}; escape literal braces as {{{{ and }}}})."
                )
        if self.name_pattern is not None:
            try:
                re.compile(self.name_pattern)
            except (re.error, TypeError) as exc:
                raise ValueError(
                    f"ClaimTreesTemplates(name_pattern={self.name_pattern!r}) is not a regex: {exc}."
                ) from None


_DEFAULT_TEMPLATES = ClaimTreesTemplates()


@lru_cache(maxsize=4)
def _all_names(name_length: int) -> tuple[str, ...]:
    # First character A-Z (outer loop), the others from A-Z0-9, in itertools.product order.
    tails = ["".join(c) for c in itertools.product(_OTHER_CHARS, repeat=name_length - 1)]
    return tuple(first + tail for first in _FIRST_CHARS for tail in tails)


@lru_cache(maxsize=256)
def _sampled_names(num_states: int, name_length: int) -> tuple[str, ...]:
    return tuple(random.Random(_NAME_SEED).sample(_all_names(name_length), num_states))


def name_capacity(name_length: int) -> int:
    """How many distinct state names of ``name_length`` characters exist (first A-Z, the others A-Z0-9): 936 for the
    paper's two."""
    if not isinstance(name_length, int) or isinstance(name_length, bool) or not 1 <= name_length <= 3:
        raise ValueError(f"name_length={name_length!r} is not supported: use 1, 2 (the paper's) or 3.")
    return len(_FIRST_CHARS) * len(_OTHER_CHARS) ** (name_length - 1)


def claimtrees_names(num_states: int, name_length: int = 2) -> list[str]:
    """The fixed name set for ``num_states`` states: ``random.Random(42).sample(all names, num_states)``.

    Args:
        num_states: How many distinct state names (L for vanilla chains).
        name_length: Characters per name, 1 to 3: first char A-Z, the others A-Z0-9 (2 in the paper).

    Returns:
        ``num_states`` distinct names; the same list for the same arguments (cached).
    """
    capacity = name_capacity(name_length)
    if not isinstance(num_states, int) or not 1 <= num_states <= capacity:
        raise ValueError(
            f"num_states={num_states!r} must be an int in [1, {capacity}] for name_length={name_length}: "
            "use fewer states or longer names."
        )
    return list(_sampled_names(num_states, name_length))


def _shuffled(items: list, seed: int) -> list:
    out = list(items)
    random.Random(seed).shuffle(out)
    return out


def _delete_and_shuffle(claims: list[str], idx: int) -> tuple[list[str], int]:
    """Delete one claim (``Random(idx).randint``) and shuffle the rest with ``Random(idx + 1)``."""
    deleted = random.Random(idx).randint(0, len(claims) - 1)
    return _shuffled(claims[:deleted] + claims[deleted + 1:], idx + 1), deleted


def _suffix_labels(num_steps: int, deleted: int, fact_index: int, paper_compat: bool) -> list[int]:
    """Steps from the deleted rule on are unsound; without the fact nothing is grounded (unless paper_compat)."""
    if deleted == fact_index and not paper_compat:
        return [1] * num_steps
    return [1 if i >= deleted else 0 for i in range(num_steps)]


def _check_idx(idx: int) -> None:
    if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
        raise ValueError(f"idx={idx!r} must be a non-negative int (the example index; it seeds the example).")


#: The most examples :func:`load_claimtrees` builds in one call (every chain is held in memory).
MAX_EXAMPLES = 1_000_000


def _check_int(name: str, value: int, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an int >= {minimum}.")


def _name_tag(name_length: int) -> str:
    return "" if name_length == 2 else f"n{name_length}"


def claimtrees_vanilla(
    idx: int,
    length: int = 10,
    *,
    paper_compat: bool = False,
    name_length: int = 2,
    templates: ClaimTreesTemplates | None = None,
) -> Chain:
    """ClaimTrees-L example ``idx``: one chain s_0 -> ... -> s_{L-1} with one base claim deleted.

    Args:
        idx: Example index (seeds the state order, the deletion and the shuffle).
        length: L, the number of states (L - 1 rules, L - 1 steps).
        paper_compat: Reproduce the research code's labels (all sound when the fact is deleted).
        name_length: Characters per state name (2 in the paper).
        templates: Sentence templates; ``None`` uses the paper's.

    Returns:
        A :class:`Chain` with id ``claimtrees-L{length}-{idx}``; ``meta`` holds names, states, rules, the deleted
        index and claim.
    """
    _check_idx(idx)
    _check_int("length", length, 2)
    t = templates or _DEFAULT_TEMPLATES
    names = claimtrees_names(length, name_length)
    states = _shuffled(names, idx)
    rules = list(zip(states[:-1], states[1:]))
    claims = [t.rule.format(p=p, q=q) for p, q in rules] + [t.fact.format(p=states[0])]
    base, deleted = _delete_and_shuffle(claims, idx)
    steps = [t.step.format(p=p, q=q) for p, q in rules]
    meta = {
        "task": "claimtrees", "variant": "vanilla", "names": names, "states": states, "rules": rules,
        "deleted_index": deleted, "deleted_claim": claims[deleted], "paper_compat": paper_compat,
    }
    labels = _suffix_labels(len(steps), deleted, len(claims) - 1, paper_compat)
    return Chain(base, steps, labels=labels, id=f"claimtrees-L{length}{_name_tag(name_length)}-{idx}", meta=meta)


def claimtrees_multi_source(
    idx: int,
    sources: int = 3,
    depth: int = 3,
    *,
    paper_compat: bool = False,
    name_length: int = 2,
    templates: ClaimTreesTemplates | None = None,
) -> Chain:
    """Multi-source single-sink ``sXdY`` example: X chains of Y states sharing one sink; only chain 0 is grounded.

    Args:
        idx: Example index.
        sources: X, the number of source chains (each of depth - 1 own states plus the shared sink).
        depth: Y, states per chain including the sink (Y - 1 rules per chain, Y - 1 steps along chain 0).
        paper_compat, name_length, templates: As in :func:`claimtrees_vanilla`.

    Returns:
        A :class:`Chain` with id ``claimtrees-s{X}d{Y}-{idx}``. Deleting another chain's rule leaves every step sound.
    """
    _check_idx(idx)
    _check_int("sources", sources, 1)
    _check_int("depth", depth, 2)
    t = templates or _DEFAULT_TEMPLATES
    names = claimtrees_names(sources * (depth - 1) + 1, name_length)
    states = _shuffled(names, idx)
    sink = states[-1]
    rules = []
    for c in range(sources):
        own = states[c * (depth - 1): (c + 1) * (depth - 1)]
        rules += list(zip(own, own[1:] + [sink]))
    claims = [t.rule.format(p=p, q=q) for p, q in rules] + [t.fact.format(p=states[0])]
    base, deleted = _delete_and_shuffle(claims, idx)
    steps = [t.step.format(p=p, q=q) for p, q in rules[: depth - 1]]  # chain 0's rules come first
    meta = {
        "task": "claimtrees", "variant": "multi_source", "names": names, "states": states, "rules": rules,
        "sink": sink, "deleted_index": deleted, "deleted_claim": claims[deleted], "paper_compat": paper_compat,
    }
    labels = _suffix_labels(len(steps), deleted, len(claims) - 1, paper_compat)
    cid = f"claimtrees-s{sources}d{depth}{_name_tag(name_length)}-{idx}"
    return Chain(base, steps, labels=labels, id=cid, meta=meta)


def claimtrees_insertion(
    idx: int,
    valid: int = 5,
    inserted: int = 1,
    *,
    name_length: int = 2,
    templates: ClaimTreesTemplates | None = None,
) -> Chain:
    """Insertion ``vVi I`` example: a complete valid chain of V states plus I steps that use a non-existent rule.

    Nothing is deleted. Insertion j (state ``s_{V+j}``) sits after valid step ``Random(idx + j).randint(0, V - 2)``;
    it is unsound, and no later step uses it.

    Args:
        idx: Example index.
        valid: V, the number of valid states (V - 1 sound steps).
        inserted: I, the number of inserted (unsound) steps.
        name_length, templates: As in :func:`claimtrees_vanilla`.

    Returns:
        A :class:`Chain` with id ``claimtrees-v{V}i{I}-{idx}`` and ``V - 1 + I`` steps.
    """
    _check_idx(idx)
    _check_int("valid", valid, 2)
    _check_int("inserted", inserted, 0)
    t = templates or _DEFAULT_TEMPLATES
    names = claimtrees_names(valid + inserted, name_length)
    states = _shuffled(names, idx)
    rules = list(zip(states[: valid - 1], states[1:valid]))
    base = _shuffled([t.rule.format(p=p, q=q) for p, q in rules] + [t.fact.format(p=states[0])], idx + 1)
    positions = [random.Random(idx + j).randint(0, valid - 2) for j in range(inserted)]
    steps, labels = [], []
    for i, (p, q) in enumerate(rules):
        steps.append(t.step.format(p=p, q=q))
        labels.append(0)
        for j in (j for j, pos in enumerate(positions) if pos == i):
            steps.append(t.step.format(p=p, q=states[valid + j]))
            labels.append(1)
    meta = {
        "task": "claimtrees", "variant": "insertion", "names": names, "states": states, "rules": rules,
        "insertion_positions": positions, "deleted_index": None,
    }
    cid = f"claimtrees-v{valid}i{inserted}{_name_tag(name_length)}-{idx}"
    return Chain(base, steps, labels=labels, id=cid, meta=meta)


def claimtrees_example(
    idx: int,
    length: int = 10,
    *,
    variant: str = "vanilla",
    sources: int = 3,
    depth: int = 3,
    valid: int = 5,
    inserted: int = 1,
    paper_compat: bool = False,
    name_length: int = 2,
    templates: ClaimTreesTemplates | None = None,
) -> Chain:
    """One ClaimTrees example of any variant.

    Args:
        idx: Example index.
        length: L, states of a ``"vanilla"`` chain (ignored by the other variants).
        variant: ``"vanilla"`` (ClaimTrees-L), ``"multi_source"`` (sXdY) or ``"insertion"`` (vVi I).
        sources, depth: X and Y of ``"multi_source"``.
        valid, inserted: V and I of ``"insertion"``.
        paper_compat: Reproduce the research code's deleted-fact labels (vanilla and multi_source; insertion deletes
            nothing).
        name_length: Characters per state name (2 in the paper).
        templates: Sentence templates; ``None`` uses the paper's.

    Returns:
        The example as a labelled :class:`Chain`.
    """
    common = {"name_length": name_length, "templates": templates}
    if variant == "vanilla":
        return claimtrees_vanilla(idx, length, paper_compat=paper_compat, **common)
    if variant == "multi_source":
        return claimtrees_multi_source(idx, sources, depth, paper_compat=paper_compat, **common)
    if variant == "insertion":
        return claimtrees_insertion(idx, valid, inserted, **common)
    raise ValueError(f"variant={variant!r} is not a ClaimTrees variant: use one of {', '.join(map(repr, VARIANTS))}.")


def load_claimtrees(n: int, length: int = 10, start: int = 0, **kwargs) -> list[Chain]:
    """Examples ``start .. start + n - 1`` of a ClaimTrees variant.

    Args:
        n: Number of examples.
        length: L of vanilla chains.
        start: First example index.
        **kwargs: Keyword arguments of :func:`claimtrees_example` (``variant``, ``sources``, ``depth``, ``valid``,
            ``inserted``, ``paper_compat``, ``name_length``, ``templates``).

    Returns:
        ``n`` labelled chains, in index order.
    """
    _check_int("n", n, 0)
    if n > MAX_EXAMPLES:
        raise ValueError(f"n={n:,} examples are more than one call builds (at most {MAX_EXAMPLES:,}, a few GB of "
                         "chains in memory): load them in slices with start=, e.g. n=100000, start=100000.")
    _check_int("start", start, 0)
    return [claimtrees_example(i, length, **kwargs) for i in range(start, start + n)]

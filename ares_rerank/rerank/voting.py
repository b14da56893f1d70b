"""Answer-aware best-of-N selection: group candidates by final answer, then vote.

Data flow: chain scores (:mod:`ares_rerank.aggregate`) + answer groups (:mod:`ares_rerank.rerank.answers`) -> a vote per
group -> the winning group's best-scoring candidate. The rules, as search-and-learn (``pred_naive`` /
``pred_weighted`` / ``pred_maj``) and OpenR report them, plus one that reads ARES's flags:

==================  =====================================================================================
selection           picks
==================  =====================================================================================
``best``            the candidate with the highest chain score (answers not read; search-and-learn's naive)
``majority``        the answer given by the most candidates (self-consistency; scores not used to vote)
``weighted``        the answer whose candidates' chain scores sum highest (weighted vote / PRM-vote)
``sound-weighted``  the answer whose *sound* candidates (no step flagged: every step score above the
                    threshold) have the highest summed score; answers backed only by flagged chains come
                    after, ordered by their plain weighted sum
==================  =====================================================================================

Ties between groups go to the group whose answer appeared first (search-and-learn's rule). Within the winning group
the candidate with the highest chain score is returned (ties: the lower index). Candidates without an answer join
no group; when no candidate has one, every rule falls back to ``best``. Unscored candidates (``None``) count as
score 0 in sums and are never sound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


__all__ = ["SELECTIONS", "GroupVote", "check_selection", "order_by_vote"]

SELECTIONS = ("best", "majority", "weighted", "sound-weighted")


def check_selection(selection: str, where: str = "selection") -> str:
    """``selection`` with underscores read as dashes, or a ValueError naming the choices."""
    name = selection.replace("_", "-") if isinstance(selection, str) else selection
    if name not in SELECTIONS:
        raise ValueError(f"{where}={selection!r} is unknown: use one of {list(SELECTIONS)}.")
    return name


@dataclass
class GroupVote:
    """One answer group and its vote.

    Attributes:
        group: The group number (0, 1, ... in order of first appearance).
        answer: The group's answer (display form).
        members: Candidate indices in the group.
        votes: The group's vote under the selection (size, summed score, or summed sound score).
        sound: How many members have no flagged step.
    """

    group: int
    answer: Any
    members: list[int] = field(default_factory=list)
    votes: float = 0.0
    sound: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "answer": self.answer, "size": len(self.members), "votes": self.votes,
                "sound": self.sound, "members": list(self.members)}


def _score(value: float | None) -> float:
    return 0.0 if value is None else float(value)


def _by_score(indices: Sequence[int], scores: Sequence[float | None]) -> list[int]:
    """Highest score first, ties by lower index, unscored last."""
    return sorted(indices, key=lambda i: (scores[i] is None, -_score(scores[i]), i))


def order_by_vote(
    scores: Sequence[float | None],
    groups: Sequence[int | None],
    answers: Sequence[Any],
    selection: str,
    sound: Sequence[bool] | None = None,
) -> tuple[list[int], list[GroupVote]]:
    """Candidates ordered best first under ``selection``, and the groups' votes (best group first).

    Args:
        scores: One chain score per candidate (``None``: unscored).
        groups: One answer group per candidate (``None``: no answer), numbered in order of first appearance.
        answers: One answer (display form) per candidate.
        selection: A rule of :data:`SELECTIONS`.
        sound: Per candidate, whether no step was flagged (needed by ``sound-weighted``).

    Returns:
        ``(order, votes)``: every candidate index once: the winning group's members by score, then the next
        group's, ..., then the candidates without an answer by score. For ``best`` (or when no candidate has an
        answer) the order is by score alone and ``votes`` is empty.
    """
    selection = check_selection(selection)
    if not len(scores) == len(groups) == len(answers):
        raise ValueError(f"order_by_vote: {len(scores)} scores, {len(groups)} groups and {len(answers)} answers; "
                         "give one of each per candidate.")
    if selection == "sound-weighted" and (sound is None or len(sound) != len(scores)):
        raise ValueError("selection='sound-weighted' needs one sound flag per candidate (no step flagged).")
    everyone = list(range(len(scores)))
    if selection == "best" or all(g is None for g in groups):
        return _by_score(everyone, scores), []
    table: dict[int, GroupVote] = {}
    for i, group in enumerate(groups):
        if group is None:
            continue
        vote = table.setdefault(group, GroupVote(group, answers[i]))
        vote.members.append(i)
        vote.sound += bool(sound[i]) if sound is not None else 0
    keys: dict[int, tuple[float, ...]] = {}
    for group, vote in table.items():
        weighted = sum(_score(scores[i]) for i in vote.members)
        if selection == "majority":
            vote.votes = float(len(vote.members))
        elif selection == "weighted":
            vote.votes = weighted
        else:
            vote.votes = float(sum(_score(scores[i]) for i in vote.members if sound[i]))
        keys[group] = (vote.votes, weighted) if selection == "sound-weighted" else (vote.votes,)
    ranked = sorted(table.values(), key=lambda v: tuple(-k for k in keys[v.group]) + (v.group,))
    order = [i for vote in ranked for i in _by_score(vote.members, scores)]
    order += _by_score([i for i in everyone if groups[i] is None], scores)
    return order, ranked

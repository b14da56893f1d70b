"""Best-of-N candidate sets with gold answers: the files users have, and generated sets.

Task metadata:
    name: ``bon``, evaluated with accuracy against N (:mod:`ares_rerank.evaluation.bon`), not per-step labels.
    schemas (one JSON object per problem, ``.jsonl`` or a ``.json`` list; ``schema="auto"`` tells them apart by
        their keys):

        - ``search-and-learn`` (huggingface/search-and-learn's completions data sets): ``problem``, ``answer``
          (gold), ``completions`` (N strings), optionally ``scores`` (one list of per-step PRM scores per
          completion: scored as the method ``given``). A completion is correct when its final answer equals the gold
          answer under ``answer_fn``.
        - ``rlhflow`` (RLHFlow's ``Mistral-`` / ``Deepseek-GSM8K-Test`` and ``-MATH500-Test``): ``prompt``,
          ``answers`` (N strings), ``label`` or ``labels`` (1 = correct, one per answer; ``label`` is what its
          ``prm_evaluate.py`` reads, ``labels`` what its README shows).

    steps: split on ``step_separator``; ``"auto"`` splits on Math-Shepherd's ``ки`` step tag where a completion has
        one (RLHFlow's Mistral sets) and on blank lines otherwise, as RLHFlow's evaluation does.
    generated: ``claimtrees`` and ``recipes`` (:mod:`ares_rerank.data.bon`), with their own answer functions.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...rerank.answers import AnswerFn, answer_matcher
from ...chain import Chain, split_prompt, split_steps
from ...data.bon import claimtrees_answer, claimtrees_bon, recipe_answer, recipes_bon

from .base import iter_records


__all__ = ["BON_SCHEMAS", "BonProblem", "BonTask", "load_bon_file", "load_bon_generated"]

BON_SCHEMAS = ("auto", "search-and-learn", "rlhflow")
_STEP_TAG = "ки"  # Math-Shepherd's step tag, in RLHFlow's Mistral candidate sets


@dataclass
class BonProblem:
    """One problem and its N candidates.

    Attributes:
        id: A stable id (file line, or generated id).
        texts: The candidates' text (what answers are read from).
        chains: One chain per candidate (``None``: no step to score).
        correct: Per candidate, whether its final answer is right.
        given_scores: Per candidate, per-step scores shipped with the data (search-and-learn's ``scores``), or
            ``None``.
    """

    id: str
    texts: list[str]
    chains: list[Chain | None]
    correct: list[bool]
    given_scores: list[list[float] | None] | None = None


@dataclass
class BonTask:
    """Candidate sets for accuracy against N.

    Attributes:
        name: Display name.
        key: File-name-safe key of the task and every option that changes it (cache paths).
        problems: The problems.
        answer_fn: How answers are read and compared (the votes group by it).
        info: How the data was read.
    """

    name: str
    key: str
    problems: list[BonProblem]
    answer_fn: AnswerFn = "standard"
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def max_n(self) -> int:
        """The smallest candidate count of any problem (accuracy@N is reported up to it)."""
        return min(len(p.texts) for p in self.problems)

    def subsample(self, k: int, seed: int = 0) -> "BonTask":
        """``k`` problems drawn at random (seeded), in their original order; the key names the sample."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k={k!r} must be a positive integer (the number of problems to sample).")
        if k >= len(self.problems):
            return self
        keep = sorted(random.Random(seed).sample(range(len(self.problems)), k))
        return BonTask(f"{self.name} (sample {k}/{len(self.problems)})", f"{self.key}-sample{k}s{seed}",
                       [self.problems[i] for i in keep], self.answer_fn,
                       {**self.info, "sample": {"k": k, "seed": seed, "of": len(self.problems)}})


def _schema(record: dict[str, Any], path: str) -> str:
    if {"problem", "completions"} <= set(record):
        return "search-and-learn"
    if {"prompt", "answers"} <= set(record):
        return "rlhflow"
    raise ValueError(f"path={path!r}: a record with keys {sorted(record)} is neither search-and-learn's (problem, "
                     "answer, completions[, scores]) nor RLHFlow's (prompt, answers, label/labels) best-of-N "
                     "schema: rename its fields, or pass schema=.")


def _steps(text: str, step_separator: str | None) -> list[str]:
    if step_separator == "auto":
        if _STEP_TAG in text:
            return [s.strip() for s in text.split(_STEP_TAG) if s.strip()]
        return split_steps(text, "\n\n")
    return split_steps(text, step_separator)


def _correct_labels(labels: Any, count: int, where: str) -> list[bool]:
    """RLHFlow's ``label`` / ``labels``: one per answer, each ``1`` / ``true`` (correct) or ``0`` / ``false``. Anything
    else is refused naming the record, the answer and the value: ``bool()`` of it would read ``"0"``, ``"False"``,
    ``2``, ``-1`` and ``0.5`` as correct."""
    if not isinstance(labels, list) or len(labels) != count:
        raise ValueError(f"{where}: 'label'/'labels' must list one 0/1 per answer ({count} answers), got "
                         f"{_short(labels)}.")
    for i, y in enumerate(labels):
        if isinstance(y, bool) or (type(y) in (int, float) and y in (0, 1)):
            continue
        hint = (" (a string: write the number or true/false without quotes)" if isinstance(y, str) else
                " (a score, not a label: threshold it into 0/1 first)" if isinstance(y, (int, float)) else "")
        raise ValueError(f"{where}: label {i} is {y!r}{hint}; each label must be 1 or true (a correct answer) or 0 "
                         "or false (a wrong one).")
    return [bool(y) for y in labels]


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_bon_file(
    path: str | os.PathLike[str],
    schema: str = "auto",
    answer_fn: AnswerFn = "standard",
    step_separator: str | None = "auto",
    prompt_split: str = "none",
    n: int | None = None,
) -> BonTask:
    """Candidate sets from a JSONL / JSON file in one of :data:`BON_SCHEMAS`.

    Args:
        path: The file.
        schema: ``"auto"`` (by the record's keys), ``"search-and-learn"`` or ``"rlhflow"``.
        answer_fn: Reads and compares answers (``"standard"``, ``"math-verify"`` or a callable); search-and-learn
            correctness is judged with it against the gold ``answer``.
        step_separator: ``"auto"`` (see the module docstring), a literal, ``"re:<regex>"`` or ``None`` (sentences).
        prompt_split: How the problem text becomes base claims (``"none"``: one claim).
        n: Keep the first ``n`` problems.
    """
    if schema not in BON_SCHEMAS:
        raise ValueError(f"schema={schema!r} is unknown: use one of {list(BON_SCHEMAS)}.")
    if step_separator != "auto":
        split_steps("x", step_separator)  # validates it
    matcher = answer_matcher(answer_fn)
    problems, skipped = [], 0
    for number, record in enumerate(iter_records(path), 1):
        if n is not None and len(problems) >= n:
            break
        kind = _schema(record, str(path)) if schema == "auto" else schema
        where = f"path={str(path)!r} record {number}"
        if kind == "search-and-learn":
            prompt, texts = record.get("problem"), record.get("completions")
            gold = record.get("answer")
            if gold is None:
                raise ValueError(f"{where} has no 'answer' (the gold answer search-and-learn compares against).")
            given = record.get("scores")
        else:
            prompt, texts = record.get("prompt"), record.get("answers")
            labels = record.get("label", record.get("labels"))
            given = None
        if not isinstance(prompt, str) or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{where}: the problem must be a string and the candidates a list of strings.")
        if not texts:
            skipped += 1
            continue
        if kind == "search-and-learn":
            correct = [matcher.is_correct(t.replace(_STEP_TAG, ""), gold) for t in texts]
        else:
            correct = _correct_labels(labels, len(texts), where)
        if given is not None and (not isinstance(given, list) or len(given) != len(texts)):
            raise ValueError(f"{where}: 'scores' must hold one list of step scores per completion.")
        base = split_prompt(prompt, prompt_split)
        chains = []
        for t in texts:
            steps = _steps(t, step_separator)
            chains.append(Chain(list(base), steps) if steps else None)
        texts = [t.replace(_STEP_TAG, "") for t in texts]  # "The answer is: 18 ки" reads as 18
        problems.append(BonProblem(f"{number}", texts, chains, correct, given))
    if not problems:
        raise ValueError(f"path={str(path)!r} holds no problem with candidates.")
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    key = f"bon-{stem}-{matcher.name}-" + ("auto" if step_separator == "auto" else "sep")
    return BonTask(f"BoN {stem}", key, problems, matcher,
                   {"schema": schema, "skipped_empty": skipped, "answer_fn": matcher.name})


def load_bon_generated(
    kind: str,
    n: int | None = None,
    candidates: int = 16,
    seed: int = 0,
    recipes: Sequence[str] | str | None = "heldout",
    data_dir: str | None = None,
) -> BonTask:
    """A generated candidate set (:mod:`ares_rerank.data.bon`): ``"claimtrees"`` (200 problems by default) or
    ``"recipes"`` (60; ``recipes="heldout"``: the six graphs the default head never trained on)."""
    if kind == "claimtrees":
        sets, answer_fn = claimtrees_bon(n or 200, candidates, seed=seed), claimtrees_answer
        name, key = "ClaimTrees-BoN", f"bon-claimtrees-n{n or 200}-c{candidates}-s{seed}"
    elif kind == "recipes":
        tag = "all" if recipes is None else recipes if recipes == "heldout" else "-".join(sorted(recipes))
        if recipes == "heldout":
            from ...training.mix import HELDOUT_RECIPES

            recipes = HELDOUT_RECIPES
        sets = recipes_bon(n or 60, candidates, recipes=recipes, seed=seed, data_dir=data_dir)
        answer_fn = recipe_answer
        name, key = "Recipes-BoN", f"bon-recipes-{tag}-n{n or 60}-c{candidates}-s{seed}"
    else:
        raise ValueError(f"generate={kind!r} is unknown: use 'claimtrees' or 'recipes'.")
    problems = [BonProblem(s.id, ["\n\n".join(c.steps) for c in s.candidates], list(s.candidates), s.correct)
                for s in sets]
    return BonTask(name, key, problems, answer_matcher(answer_fn),
                   {"generated": kind, "candidates": candidates, "seed": seed})


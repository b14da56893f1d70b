"""A report from an output file (``ares-rerank view``), and notebook views of Python objects (``_repr_html_``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from .html import Settings, fragment, page
from .records import KINDS, SIGNS, ChainView, PromptView, StepsView, detect_kind, first_flag, read_records
from .views import bon_view, rank_views, ranking_view, score_views, search_views


__all__ = ["MAX_RECORDS", "Report", "chain_scores_html", "render_file", "view"]

#: Records a report holds unless told: 20,000 chains (score) or prompts (rank / search); a 10,000-chain file
#: renders in about 2 s to some 30 MB (``python -m eval.bench_viewer``).
MAX_RECORDS = 20_000


@dataclass
class Report:
    """A rendered report: its ``html``, the record ``kind``, how many records it shows and left out, a summary."""

    html: str
    kind: str
    shown: int
    left_out: int
    summary: str
    warnings: list[str] = field(default_factory=list)  # said on the page, and by the command on stderr

    def _repr_html_(self) -> str:
        return self.html


def render_file(path: str | os.PathLike[str], *, kind: str = "auto", chains: Sequence[Any] | None = None,
                chains_path: str = "--chains", step_separator: str | None = "\n\n", threshold: float = 0.5,
                page_size: int = 50, max_records: int = MAX_RECORDS, max_text: int = 2000,
                prompt_key: str = "prompt", candidates_key: str = "candidates") -> Report:
    """The report of one output file of ``score`` / ``rank`` / ``search`` / ``eval --task bon``.

    Args:
        path: The file (``-``: standard input).
        kind: ``"auto"`` (detected from the first record) or a key of :data:`KINDS`.
        chains: ``score`` only: the chains it scored (:func:`~ares_rerank.chain.read_chains`), for the steps' text,
            base claims and gold labels.
        step_separator: ``rank`` only: how candidates were split into steps (``None``: sentences).
        threshold: Flags steps of records that carry no flags (``rank`` / ``search``): ``tau <= threshold``.
        page_size, max_records, max_text: Cards a page; records read (the rest counted and said); characters of one
            text shown.

    Raises:
        ValueError: The file is not one of those outputs, or a record is malformed (file and line named).
    """
    if kind != "auto" and kind not in KINDS:
        raise ValueError(f"kind={kind!r} is unknown: use 'auto' or one of {', '.join(KINDS)}.")
    for value, name in ((page_size, "page_size"), (max_records, "max_records"), (max_text, "max_text")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive int.")
    records, left_out = read_records(path, max_records)
    source = str(path)
    if not records:
        raise ValueError(f"{source!r} holds no records: nothing to view (give the file that ares-rerank score / "
                         "rank / search or eval --task bon wrote).")
    found = kind if kind != "auto" else detect_kind(records[0][1])
    if found is None:
        raise ValueError(f"{source}:{records[0][0]} is none of the records ares-rerank view reads ({SIGNS}): view "
                         "the output of one of those commands, or name the kind with --kind.")
    for lineno, record in records:
        if not isinstance(record, dict) or (kind == "auto" and detect_kind(record) != found):
            other = detect_kind(record)
            raise ValueError(f"{source}:{lineno} is {'a ' + other + ' record' if other else 'not a record of any kind'}"
                             f", but line {records[0][0]} is a {found} record: view one command's output per report.")
    if chains is not None and found != "score":
        raise ValueError(f"--chains gives the steps' text of score records; {source} holds {found} records (the text "
                         "is in them, or there is none): drop --chains.")
    settings = Settings(threshold=threshold, page_size=page_size, max_text=max_text)
    if found == "score":
        views: list[Any] = score_views(records, source, threshold, chains, chains_path)
    elif found == "rank":
        views = rank_views(records, source, threshold, step_separator, prompt_key, candidates_key)
    elif found == "search":
        views = search_views(records, source, threshold, prompt_key)
    else:
        views = [bon_view(records, source)]
    summary = _summary(found, views, threshold)
    banners = [f"{left_out:,} more records of this file are not shown: only the first {max_records:,} are read "
               "(raise --max-records, or split the file)."] if left_out else []
    unsplit = sum(c.steps.note is not None for v in views if isinstance(v, PromptView) for c in v.candidates)
    if unsplit:
        shown = "sentences" if step_separator is None else repr(step_separator)
        banners.append(f"{unsplit:,} candidates do not split into one step per score at the step separator {shown}: "
                       "their text is shown whole, beside their step scores. Pass the --step-separator the command "
                       "used.")
    return Report(page(found, views, source, settings, summary, banners), found, len(views), left_out, summary,
                  banners)


def _summary(kind: str, views: Sequence[Any], threshold: float) -> str:
    if kind == "bon":
        return "accuracy against N for every method and selection"
    if kind == "score":
        steps = sum(len(v.steps.taus) for v in views)
        flagged = sum(sum(v.steps.flags) for v in views)
        chains = sum(any(v.steps.flags) for v in views)
        text = (f"{len(views):,} chains, {steps:,} steps; {flagged:,} steps flagged in {chains:,} chains "
                "(the flags score wrote)")
        labelled = [v for v in views if v.steps.labels is not None]
        if labelled:
            agree = sum(bool(y) == f for v in labelled for y, f in zip(v.steps.labels, v.steps.flags))
            total = sum(len(v.steps.labels) for v in labelled)
            text += f"; flags agree with the gold labels on {agree:,} of {total:,} steps"
        return text
    candidates = sum(len(v.candidates) for v in views)
    chosen_flagged = sum(any(c.steps.flags) for v in views for c in v.candidates if c.chosen)
    what = "prompts" if kind == "rank" else "problems"
    return (f"{len(views):,} {what}, {candidates:,} candidates; the chosen candidate has a flagged step (tau <= "
            f"{threshold:g}) in {chosen_flagged:,}")


def chain_scores_html(scores: Any, steps: Sequence[str] | None = None, labels: Sequence[int] | None = None,
                      threshold: float = 0.5) -> str:
    """A notebook card for one :class:`~ares_rerank.chain.ChainScores`: each step's tau as a bar, flags at
    ``threshold`` and the first error, the certificate; ``steps`` / ``labels`` add the text and the gold labels."""
    return fragment([_chain_view(scores, steps, labels, threshold)], Settings(threshold=threshold))


def _chain_view(scores: Any, steps: Sequence[str] | None, labels: Sequence[int] | None,
                threshold: float) -> ChainView:
    flags = scores.flags(threshold)
    count = len(flags)
    for given, name in ((steps, "steps"), (labels, "labels")):
        if given is not None and len(given) != count:
            raise ValueError(f"{name} has {len(given)} entries for {count} step scores: give one per step.")
    view = ChainView(str(scores.chain_id) if scores.chain_id is not None else "chain", [],
                     StepsView(list(steps) if steps is not None else [None] * count, list(scores.step_scores), flags,
                               first_flag(flags), None if labels is None else [int(y) for y in labels],
                               scores.error_bounds), scores)
    return view


def view(obj: Any, prompt: Any = "", threshold: float = 0.5, step_separator: str | None = "\n\n") -> Report:
    """A notebook view of a Python result: a :class:`~ares_rerank.chain.ChainScores` (or a list of them), an
    ``AresReranker.rank`` ranking or ``score_batch`` records (a list of dicts; ``prompt`` shown above), or one
    output record of ``score`` / ``rank`` / ``search`` / ``eval --task bon``. Display it (Jupyter calls
    ``_repr_html_``), or write ``.html`` to a file."""
    from ..chain import ChainScores

    items = obj if isinstance(obj, (list, tuple)) else [obj]
    if items and all(isinstance(s, ChainScores) for s in items):
        views = [_chain_view(s, None, None, threshold) for s in items]
        return Report(fragment(views, Settings(threshold)), "score", len(items), 0, f"{len(items)} chains")
    if items and all(isinstance(r, dict) and detect_kind(r) is None for r in items):
        return Report(fragment([ranking_view(items, prompt, threshold, step_separator)], Settings(threshold)),
                      "rank", 1, 0, f"{len(items)} candidates")
    if isinstance(obj, dict) and detect_kind(obj) is not None:
        kind = detect_kind(obj)
        records = [(1, obj)]
        builders = {"score": lambda: score_views(records, "record", threshold),
                    "rank": lambda: rank_views(records, "record", threshold, step_separator),
                    "search": lambda: search_views(records, "record", threshold),
                    "bon": lambda: [bon_view(records, "record")]}
        views = builders[kind]()
        return Report(fragment(views, Settings(threshold)), kind, len(views), 0, kind)
    raise TypeError(f"view({type(obj).__name__}) shows ChainScores, a ranking (list of dicts from AresReranker.rank / "
                    "score_batch) or one output record of score / rank / search / eval --task bon.")


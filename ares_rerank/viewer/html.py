"""View objects rendered as HTML on the server side: every text from the data goes through :func:`esc`, and the
markup is built here alone (the page's script only pages and filters the cards).

A report is one static page: the inline style sheet, a header with the counts, a pager with a filter, and one card
per chain (``score``), prompt (``rank`` / ``search``) or results table (``eval --task bon``). Cards past the first
page carry ``hidden``; without the script they all show.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Sequence

from .assets import NOSCRIPT, SCRIPT, STYLE
from .records import KINDS, BonView, CandidateView, ChainView, PromptView, StepsView


__all__ = ["Settings", "card", "esc", "fragment", "page"]

CHECK, CROSS = "\u2713", "\u2717"  # the gold label agrees / disagrees with the flag


@dataclass(frozen=True)
class Settings:
    """How a report is drawn: ``threshold`` (flags of records that carry none), ``page_size`` cards a page,
    ``max_text`` characters of one text shown (the rest is cut, and the cut said)."""

    threshold: float = 0.5
    page_size: int = 50
    max_text: int = 2000


def esc(text: Any) -> str:
    """``text`` as HTML text or attribute value: ``& < > " '`` escaped, so data is never markup."""
    return html.escape(str(text), quote=True)


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return esc(text)
    return f'{esc(text[:limit])}<span class="note"> ... {len(text) - limit:,} more characters</span>'


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _frac(value: float) -> str:
    """A fraction in [0, 1] for a CSS custom property, short (``.950``, ``1``, ``0``)."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text.removeprefix("0") if text.startswith("0.") else text


def _bar(tau: float) -> str:
    return f'<span class="bar" style="--t:{_frac(tau)}"></span>'


def steps_html(steps: StepsView, max_text: int) -> str:
    """One ``<li class="step">`` per step: its number (a CSS counter), tau as a bar coloured red -> green (the error
    bound as a band), tau, the flag and first-error marks, the gold label with its agreement, and the text. The
    markup is kept short: a 10,000-chain report holds some 75,000 of these."""
    rows = []
    for k, (text, tau, flag) in enumerate(zip(steps.texts, steps.taus, steps.flags)):
        bound = steps.bounds[k] if steps.bounds else None
        first = k == steps.first_error
        classes = "step" + (" flagged" if flag else "") + (" first-error" if first else "") + (
            " bounded" if bound else "")
        style = f"--t:{_frac(tau)}" + (f";--lo:{_frac(max(0.0, tau - bound))};--hi:{_frac(min(1.0, tau + bound))}"
                                       if bound else "")
        marks = ('<span class="mark">flagged</span>' if flag else "") + (
            '<span class="mark first">first error</span>' if first else "")
        if steps.labels is not None:
            unsound = bool(steps.labels[k])
            agree = unsound == flag
            marks += (f'<span class="gold {"agree" if agree else "disagree"}">{"unsound" if unsound else "sound"} '
                      f'{CHECK if agree else CROSS}</span>')
        body = "" if text is None else clip(text, max_text)
        tau_text = f"{tau:.3f}" + (f"<small> \u00b1{bound:.2g}</small>" if bound else "")
        rows.append(f'<li class="{classes}" style="{style}"><span class="bar"></span><span class="tau">{tau_text}'
                    f'</span><span class="txt">{marks}{body}</span></li>')
    note = f'<p class="note">{esc(steps.note)}</p>' if steps.note else ""
    return f'{note}<ol class="steps">{"".join(rows)}</ol>'


def _certificate(scores: Any) -> str:
    """The certificate in one line: method, mode, what it guarantees, evaluations, and eps / delta / N / the largest
    bound where the mode has them."""
    bounds = scores.error_bounds
    items = [("method", scores.method), ("mode", scores.mode), ("certificate", scores.certificate()),
             ("evaluations", scores.evaluations), ("eps", scores.eps), ("delta", scores.delta),
             ("samples N", scores.num_samples), ("largest bound", None if not bounds else f"{max(bounds):.3g}")]
    cells = " ".join(f"<b>{name}</b> {esc(value)}" for name, value in items if value is not None)
    return f'<p class="cert">{cells}</p>'


def _attrs(key: str, flagged: bool, disagree: bool | None, hidden: bool) -> str:
    extra = "" if disagree is None else f' data-disagree="{int(disagree)}"'
    return (f'data-key="{esc(key.lower()[:160])}" data-flagged="{int(flagged)}" data-clean="{int(not flagged)}"'
            f'{extra}{" hidden" if hidden else ""}')


def chain_card(view: ChainView, settings: Settings, hidden: bool = False) -> str:
    steps = view.steps
    flagged = sum(steps.flags)
    badges = [f'<span class="badge {"bad" if flagged else "good"}">{flagged} of {len(steps.flags)} steps flagged'
              + (f", first error: step {steps.first_error + 1}" if steps.first_error >= 0 else "") + "</span>"]
    disagree = None
    if steps.labels is not None:
        agree = sum(bool(y) == f for y, f in zip(steps.labels, steps.flags))
        disagree = agree < len(steps.labels)
        badges.append(f'<span class="badge {"bad" if disagree else "good"}">gold agrees on {agree} of '
                      f'{len(steps.labels)} steps</span>')
    base = ""
    if view.base_claims:
        claims = "".join(f"<li>{clip(c, settings.max_text)}</li>" for c in view.base_claims)
        base = (f'<details><summary>{len(view.base_claims)} base claims</summary><ol class="claims">{claims}</ol>'
                "</details>")
    elif all(t is None for t in steps.texts):
        base = '<p class="note">step text not in the score file: pass --chains (the file score read) to show it</p>'
    return (f'<article class="card chain" {_attrs(view.key, bool(flagged), disagree, hidden)}><header>'
            f'<h2>{esc(view.key)}</h2>{"".join(badges)}</header>{base}{steps_html(steps, settings.max_text)}'
            f"{_certificate(view.scores)}</article>")


def _candidate_html(c: CandidateView, settings: Settings) -> str:
    head = [f"#{c.index}"] + ([f"rank {c.position}"] if c.position is not None else []) + [f"score {_num(c.score)}"]
    chosen = ' <span class="chosen-mark">&#10004; chosen</span>' if c.chosen else ""
    facts = [f"{name} {esc(value)}" for name, value in (("answer", c.answer), ("group", c.group), ("votes", c.votes))
             if value is not None]
    status = ""
    if c.status:
        tone = {"stopped": "bad", "finished": "good"}.get(c.status, "")
        words = {"stopped": "stopped by early rejection", "finished": "finished", "cut": "cut at the iteration limit"}
        status = f'<span class="badge {tone}">{words.get(c.status, esc(c.status))}</span>'
    if not c.steps.taus:  # an empty candidate, or a ranking record that holds the chain score alone
        body = ('<p class="note">no steps: not scored</p>' if c.score is None else
                f'<div class="txt">{clip(c.text, settings.max_text)}</div>')
    else:
        body = steps_html(c.steps, settings.max_text)
    if c.steps.texts and all(t is None for t in c.steps.texts):
        body += f'<details><summary>text</summary><div class="txt">{clip(c.text, settings.max_text)}</div></details>'
    return (f'<div class="cand{" chosen" if c.chosen else ""}" data-index="{c.index}"><h3>{" &middot; ".join(head)}'
            f'{chosen}</h3><div class="muted">{" &middot; ".join(facts)}</div>{status}{body}</div>')


def _groups_html(groups: Sequence[dict[str, Any]], chosen_answer: Any) -> str:
    if not groups:
        return ""
    rows = []
    for g in groups:
        members = ", ".join(f"#{esc(m)}" for m in g.get("members", []) or [])
        mark = " best" if chosen_answer is not None and g.get("answer") == chosen_answer else ""
        rows.append(f'<tr><td class="{mark.strip()}">{esc(g.get("answer"))}</td><td>{esc(g.get("votes"))}</td>'
                    f'<td>{esc(g.get("size", "-"))}</td><td>{esc(g.get("sound", "-"))}</td><td>{members}</td></tr>')
    return ("<table class=\"groups\"><tr><th>answer</th><th>votes</th><th>size</th><th>sound</th><th>candidates</th>"
            f"</tr>{''.join(rows)}</table>")


def _rounds_html(candidates: Sequence[CandidateView]) -> str:
    """The candidates round by round (a round = one step of every candidate still written): tau at each round and
    where each stopped, finished or was cut."""
    depth = max((len(c.steps.taus) for c in candidates), default=0)
    if not depth:
        return ""
    head = "".join(f"<th>#{c.index}{' &#10004;' if c.chosen else ''}</th>" for c in candidates)
    rows = []
    for r in range(depth):
        cells, alive, ended = [], 0, {"stopped": 0, "finished": 0, "cut": 0}
        for c in candidates:
            if r >= len(c.steps.taus):
                cells.append('<td class="muted">-</td>')
                continue
            alive += 1
            last = r == len(c.steps.taus) - 1 and c.status in ended
            ended[c.status] += int(last)
            word = f" {esc(c.status)}" if last else ""
            cells.append(f"<td>{_bar(c.steps.taus[r])}{c.steps.taus[r]:.2f}{word}</td>")
        summary = f"{alive} written; " + ", ".join(f"{n} {w}" for w, n in ended.items() if n)
        rows.append(f"<tr><th>{r + 1}</th>{''.join(cells)}<td>{esc(summary.rstrip('; '))}</td></tr>")
    return (f'<details class="rounds"><summary>round by round ({depth} round{"" if depth == 1 else "s"})</summary>'
            '<table><tr><th>round</th>'
            f"{head}<th>candidates</th></tr>{''.join(rows)}</table></details>")


def prompt_card(view: PromptView, settings: Settings, hidden: bool = False) -> str:
    ordered = sorted(view.candidates, key=lambda c: (c.position is None, c.position or 0, c.index))
    chosen = next((c for c in view.candidates if c.chosen), None)
    flagged = chosen is not None and any(chosen.steps.flags)
    badges = [f'<span class="badge">{len(view.candidates)} candidates</span>']
    if chosen is not None:
        badges.append(f'<span class="badge {"bad" if flagged else "good"}">chosen #{chosen.index}'
                      + (f", answer {esc(chosen.answer)}" if chosen.answer is not None else "")
                      + (", has a flagged step" if flagged else "") + "</span>")
    else:
        badges.append('<span class="badge bad">none chosen</span>')
    badges += [f'<span class="badge">{esc(name)} {esc(value)}</span>' for name, value in view.facts]
    prompt = (f'<details><summary>prompt ({len(view.prompt):,} characters)</summary><div class="claims">'
              f"{clip(view.prompt, settings.max_text)}</div></details>")
    note = ""
    if view.rounds and any(f == ("method", m) for f in view.facts for m in ("beam-search", "dvts")):
        note = ('<p class="note">beam search and DVTS write only their final candidates: the partial solutions they '
                "pruned on the way are not in the output</p>")
    cands = "".join(_candidate_html(c, settings) for c in ordered)
    rounds = _rounds_html(ordered) if view.rounds else ""
    return (f'<article class="card prompt" {_attrs(view.key + " " + view.prompt[:120], flagged, None, hidden)}>'
            f"<header><h2>{esc(view.key)}</h2>{''.join(badges)}</header>{prompt}"
            f"{_groups_html(view.groups, chosen.answer if chosen else None)}{note}<div class=\"cands\">{cands}</div>"
            f"{rounds}</article>")


ROW_NAMES = {"pass@N": ("pass@N (ceiling)", "any correct"), "majority": ("no verifier", "majority"),
             "random": ("no verifier", "one sample")}


def bon_card(view: BonView) -> str:
    results = view.results
    ns = [str(n) for n in results["n_values"]]
    rows = results["rows"]
    order = ["pass@N"] + [r for r in rows if r not in ("pass@N", "majority", "random")] + ["majority", "random"]
    best = {n: max((rows[r][n][0] for r in rows if r != "pass@N" and n in rows[r]), default=None) for n in ns}
    body = []
    for row in (r for r in order if r in rows):
        method, selection = ROW_NAMES.get(row, tuple(row.split(" | ", 1)) if " | " in row else (row, ""))
        cells = []
        for n in ns:
            mean, se = rows[row].get(n, [None, None])
            top = " best" if row != "pass@N" and mean is not None and mean == best[n] else ""
            cells.append("<td>-</td>" if mean is None else
                         f'<td class="{top.strip()}">{_bar(mean)}{100 * mean:.1f} &plusmn; {100 * se:.1f}</td>')
        body.append(f"<tr><td>{esc(method)}</td><td>{esc(selection)}</td>{''.join(cells)}</tr>")
    task = results.get("task") if isinstance(results.get("task"), dict) else {}
    facts = [("task", task.get("name")), ("problems", task.get("num_problems")), ("candidates", task.get("candidates")),
             ("answer_fn", task.get("answer_fn")), ("backbone", results.get("backbone")),
             ("aggregate", results.get("aggregate")), ("subsets", results.get("subsets")),
             ("subset_count", results.get("subset_count"))]
    cells = " ".join(f"<b>{esc(k)}</b> {esc(v)}" for k, v in facts if v is not None)
    head = "".join(f"<th>N={esc(n)}</th>" for n in ns)
    return (f'<article class="card bon" data-key="bon" data-flagged="0" data-clean="1"><header><h2>accuracy@N '
            f'(%, mean &plusmn; SE over problems)</h2></header><p class="cert">{cells}</p><table><tr><th>method</th>'
            f"<th>selection</th>{head}</tr>{''.join(body)}</table></article>")


def card(view: Any, settings: Settings, hidden: bool = False) -> str:
    """The card of one view object."""
    if isinstance(view, ChainView):
        return chain_card(view, settings, hidden)
    if isinstance(view, PromptView):
        return prompt_card(view, settings, hidden)
    if isinstance(view, BonView):
        return bon_card(view)
    raise TypeError(f"no card for {type(view).__name__}: expected ChainView, PromptView or BonView.")


FILTERS = {"score": [("flagged", "with a flagged step"), ("clean", "with no flagged step"),
                     ("disagree", "disagreeing with gold")],
           "rank": [("flagged", "chosen candidate flagged"), ("clean", "chosen candidate not flagged")],
           "search": [("flagged", "chosen candidate flagged"), ("clean", "chosen candidate not flagged")]}


def _pager(kind: str, has_labels: bool) -> str:
    options = "".join(f'<option value="{v}">{esc(label)}</option>' for v, label in FILTERS.get(kind, [])
                      if v != "disagree" or has_labels)
    return ('<nav class="pager"><input id="ares-q" type="search" placeholder="filter by id or text" '
            f'aria-label="filter"><select id="ares-only" aria-label="show"><option value="all">all</option>{options}'
            '</select><button id="ares-prev" type="button">&larr; previous</button><button id="ares-next" '
            'type="button">next &rarr;</button><span id="ares-info" class="muted"></span><span class="legend">tau 0'
            '<span class="scale"></span>1</span></nav>')


def page(kind: str, views: Sequence[Any], source: str, settings: Settings, summary: str,
         banners: Sequence[str] = ()) -> str:
    """The whole report: one static HTML document (inline style, a small inline script, nothing fetched)."""
    cards = "".join(card(v, settings, hidden=i >= settings.page_size) for i, v in enumerate(views))
    has_labels = any(isinstance(v, ChainView) and v.steps.labels is not None for v in views)
    notes = "".join(f'<p class="banner">{esc(b)}</p>' for b in banners)
    pager = _pager(kind, has_labels) if kind != "bon" else ""
    script = f"<script>{SCRIPT}</script>" if pager else ""
    name = PurePath(source).name if source != "-" else "standard input"
    title = f"ares-rerank view: {name}"
    where = f" ({source})" if source not in (name, "-") else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width,initial-scale=1"><meta name="color-scheme" content="light dark">'
            f"<title>{esc(title)}</title><style>body{{margin:0}}{STYLE}</style>{NOSCRIPT}</head><body>"
            f'<main class="ares-view" id="ares-report" data-kind="{esc(kind)}" data-page-size={settings.page_size} '
            f'style="padding:.8rem 1.2rem;min-height:100vh"><h1>{esc(title)}</h1><p class="muted">'
            f"{esc(KINDS.get(kind, kind))} output{esc(where)}; {esc(summary)}</p>{notes}{pager}{cards}</main>{script}"
            "</body></html>\n")


def fragment(views: Sequence[Any], settings: Settings = Settings()) -> str:
    """Cards for a notebook cell (``_repr_html_``): the style sheet and the cards, no script."""
    return (f'<div class="ares-view" style="padding:.3rem"><style>{STYLE}</style>'
            f"{''.join(card(v, settings) for v in views)}</div>")

"""A ranked result draws itself in a notebook: ``AresReranker.rank`` returns a :class:`Ranking` (a plain list in
every other way) whose ``_repr_html_`` shows the prompt's candidates, the chosen one marked, all text escaped."""

from __future__ import annotations

import json
import re

from ares_rerank import AresReranker
from ares_rerank.rerank.records import Ranking
from helpers import HashBackbone


PROMPT = "What is 2 + 2? <b>bold</b>"
CANDIDATES = ["We add.\n\nThe answer is 4.", "We guess.\n\nThe answer is 5. <script>alert(1)</script>",
              "We add twice.\n\nThe answer is 4."]


def test_rank_returns_a_list_that_draws_its_candidates_with_the_chosen_one_marked():
    reranker = AresReranker(HashBackbone(), selection="majority", answer_fn="standard")
    ranked = reranker.rank(PROMPT, CANDIDATES)
    assert isinstance(ranked, Ranking) and isinstance(ranked, list) and ranked.prompt == PROMPT
    assert ranked == list(ranked) and json.loads(json.dumps(ranked)) == list(ranked)  # a list as before
    html = ranked._repr_html_()
    assert len(re.findall(r'<div class="cand[ "]', html)) == 3
    chosen = re.findall(r'<div class="cand chosen" data-index="(\d+)"', html)
    assert chosen == [str(ranked[0]["index"])] and ranked[0]["answer"] == "4"  # the majority answer's best
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "votes" in html and "answer 4" in html


def test_an_empty_or_cut_ranking_still_draws():
    assert "empty ranking" in Ranking([], "p")._repr_html_()
    ranked = AresReranker(HashBackbone()).rank("p", CANDIDATES, top_k=1)
    assert len(ranked) == 1 and ranked._repr_html_().count('class="cand chosen"') == 1

"""``rank``'s keyword options are written once, in its signature: ``rank_batch``, ``select`` and ``select_batch``
take the same ones (a ``select`` all but ``on_error``), give the same answers, and name an unknown keyword."""

from __future__ import annotations

import inspect

import pytest

from ares_rerank import AresReranker, FunctionBackbone
from ares_rerank.rerank.reranker import _RANK_OPTIONS


def last_word_entailed(premises, hypotheses):
    return [float(h.split()[-1] in " ".join(p).split()) for p, h in zip(premises, hypotheses)]


@pytest.fixture
def reranker():
    return AresReranker(FunctionBackbone(last_word_entailed), prompt_split="lines")


PROMPT, CANDIDATES = "a\nb", ["so c \\boxed{1}", "so b \\boxed{2}", "so a \\boxed{2}"]


def test_the_options_are_ranks_keyword_only_parameters():
    signature = inspect.signature(AresReranker.rank)
    assert _RANK_OPTIONS == {p.name: p.default for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert list(_RANK_OPTIONS) == ["on_error", "batch_size", "show_progress_bar", "selection", "answer_fn"]


@pytest.mark.parametrize("options", [{}, {"selection": "majority"}, {"batch_size": 1, "show_progress_bar": False},
                                     {"selection": "weighted", "answer_fn": "standard"}])
def test_the_batch_and_single_forms_agree(reranker, options):
    single = reranker.rank(PROMPT, CANDIDATES, **options)
    assert reranker.rank_batch([PROMPT, PROMPT], [CANDIDATES, CANDIDATES], **options) == [single, single]
    chosen = reranker.select(PROMPT, CANDIDATES, **options)
    assert reranker.select_batch([PROMPT], [CANDIDATES], **options) == [chosen]
    assert chosen["corpus_id"] == single[0]["corpus_id"]


def test_an_unknown_keyword_is_named(reranker):
    with pytest.raises(TypeError, match=r"rank_batch\(\) got unexpected keyword arguments \['top_p'\]"):
        reranker.rank_batch([PROMPT], [CANDIDATES], top_p=0.5)
    with pytest.raises(TypeError, match=r"select_batch\(\) got unexpected keyword arguments \['seed'\]"):
        reranker.select_batch([PROMPT], [CANDIDATES], seed=1)
    with pytest.raises(TypeError, match=r"select_batch\(\) got an unexpected keyword argument 'on_error'"):
        reranker.select_batch([PROMPT], [CANDIDATES], on_error="none")
    with pytest.raises(TypeError):
        reranker.rank(PROMPT, CANDIDATES, top_p=0.5)  # an explicit signature: Python names it

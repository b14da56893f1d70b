"""Answer-aware best-of-N: answer extraction and equivalence (standard, math-verify, a user function), the votes
(majority, weighted, sound-weighted) against hand-computed cases and search-and-learn's published rules, and the
reranker / CLI surfaces that expose them."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from ares_rerank import FunctionBackbone
from ares_rerank.rerank.answers import AnswerMatcher, extract_answer, normalize_answer
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.rerank.voting import order_by_vote


@pytest.mark.parametrize("text, answer", [
    ("so x = 2, and \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
    ("first \\boxed{3} then \\boxed{\\sqrt{a_{1}}}", "\\sqrt{a_{1}}"),  # the last box, nested braces kept
    ("Step 1\n\n# Answer\n\n$12$\n", "$12$"),  # PRM800K's heading
    ("Thus the final answer is: 1,000.", "1,000"),
    ("The answer is 7. Then more text\nThe answer is 8.", "8"),
    ("no answer here", None),
    ("\\boxed{", None),  # never closed
])
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize("a, b", [("\\dfrac{1}{2}", "0.5"), ("$0.50$", "1/2"), ("1,000", "1000"), ("3.0", "3"),
                                  ("\\text{(B)}", "(B)"), ("\\left( 1, 2 \\right)", "(1,2)")])
def test_normalize_answer_equates_common_forms(a, b):
    assert normalize_answer(a) == normalize_answer(b)


def test_normalize_answer_keeps_different_answers_apart():
    assert normalize_answer("1/2") != normalize_answer("2")
    assert normalize_answer("x+1") != normalize_answer("x-1")


def test_matcher_groups_in_order_of_first_appearance_and_skips_missing_answers():
    groups, answers = AnswerMatcher().group(["\\boxed{2}", "none", "The answer is 1.", "\\boxed{2.0}", 42])
    assert groups == [0, None, 1, 0, None]
    assert answers == ["2", None, "1", "2", None]


def test_math_verify_matcher_groups_symbolically_as_trl_parses():
    pytest.importorskip("math_verify")
    matcher = AnswerMatcher("math-verify")
    groups, _ = matcher.group(["\\boxed{\\frac{1}{2}}", "so \\boxed{0.5}", "\\boxed{3}", "no box"])
    assert groups == [0, 0, 1, None]
    assert matcher.is_correct("we get \\boxed{\\frac{1}{2}}", "0.5")
    assert not matcher.is_correct("we get \\boxed{3}", "0.5")


def test_math_verify_matcher_works_off_the_main_thread():
    """math-verify's timeout uses signal.alarm (main thread only): a server's worker thread must still group."""
    pytest.importorskip("math_verify")
    import threading

    out = []
    thread = threading.Thread(target=lambda: out.append(AnswerMatcher("math-verify").group(["\\boxed{1}",
                                                                                            "\\boxed{1.0}"])[0]))
    thread.start()
    thread.join(60)
    assert out == [[0, 0]]


def test_user_answer_fn_and_its_errors():
    matcher = AnswerMatcher(lambda text: text.split()[-1] if text.split() else None)
    assert matcher.group(["a b", "c b", "d"])[0] == [0, 0, 1]
    with pytest.raises(TypeError, match="hashable"):
        AnswerMatcher(lambda text: [text]).parse("x")
    with pytest.raises(ValueError, match="answer_fn='boxed'"):
        AnswerMatcher("boxed")


# -- the votes, against search-and-learn's rules rewritten here -----------------------------------------------------
def sal_weighted(answers, scores):
    """search-and-learn's find_answer_with_largest_sum: the answer whose scores sum highest (first group on ties)."""
    sums, first = defaultdict(float), {}
    for answer, score in zip(answers, scores):
        sums[answer] += score
        first.setdefault(answer, len(first))
    best = max(sums.values())
    return min((first[a], a) for a, s in sums.items() if s == best)[1]


def sal_majority(answers):
    """search-and-learn's find_majority_answer: the most frequent answer, the first occurring one on ties."""
    counts, first = defaultdict(int), {}
    for answer in answers:
        counts[answer] += 1
        first.setdefault(answer, len(first))
    best = max(counts.values())
    return min((first[a], a) for a, c in counts.items() if c == best)[1]


@pytest.mark.parametrize("seed", range(40))
def test_votes_match_search_and_learn_on_random_candidate_sets(seed):
    import random

    rng = random.Random(seed)
    n = rng.randint(1, 12)
    answers = [rng.choice("abcd") for _ in range(n)]
    scores = [rng.choice([0.1, 0.25, 0.5, 0.9]) for _ in range(n)]
    order = {a: i for i, a in enumerate(dict.fromkeys(answers))}  # groups numbered by first appearance
    groups = [order[a] for a in answers]
    for selection, expected in (("weighted", sal_weighted(answers, scores)), ("majority", sal_majority(answers))):
        ranked, votes = order_by_vote(scores, groups, answers, selection)
        assert answers[ranked[0]] == expected == votes[0].answer
        winners = [i for i in range(n) if answers[i] == expected]
        assert ranked[0] == min(winners, key=lambda i: (-scores[i], i))  # the best-scoring member, lower index
        assert sorted(ranked) == list(range(n))  # every candidate once


def test_sound_weighted_prefers_answers_backed_by_unflagged_chains():
    scores = [0.9, 0.8, 0.3, 0.2]
    answers = ["wrong", "wrong", "right", "right"]
    groups = [0, 0, 1, 1]
    sound = [False, False, True, False]
    ranked, votes = order_by_vote(scores, groups, answers, "sound-weighted", sound)
    assert ranked[0] == 2 and votes[0].answer == "right" and votes[0].votes == pytest.approx(0.3)
    assert order_by_vote(scores, groups, answers, "weighted")[1][0].answer == "wrong"
    # no sound chain anywhere: the plain weighted sum decides
    ranked, votes = order_by_vote(scores, groups, answers, "sound-weighted", [False] * 4)
    assert votes[0].answer == "wrong" and votes[0].votes == 0.0


def test_no_answers_fall_back_to_the_best_score_and_unscored_count_zero():
    ranked, votes = order_by_vote([0.2, None, 0.7], [None] * 3, [None] * 3, "majority")
    assert ranked == [2, 0, 1] and votes == []
    ranked, votes = order_by_vote([None, 0.1, 0.05], [0, 1, 1], ["x", "y", "y"], "weighted")
    assert votes[0].answer == "y" and ranked == [1, 2, 0]


def test_bad_selection_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="sound-weighted"):
        order_by_vote([1.0], [0], ["a"], "vote")
    with pytest.raises(ValueError, match="AresReranker\\(selection\\)"):
        AresReranker(FunctionBackbone(lambda p, h: [1.0] * len(h)), selection="vote")


# -- the reranker ---------------------------------------------------------------------------------------------------
def keyword_backbone():
    return FunctionBackbone(lambda premises, hypotheses: [0.9 if "ok" in h else 0.1 for h in hypotheses])


CANDIDATES = [
    "ok\n\nok so \\boxed{1}",
    "bad\n\nbad so \\boxed{2}",
    "bad\n\nbad so \\boxed{2}",
    "ok\n\nbad so \\boxed{1.0}",
    "ok\n\nok and no answer",
]


def test_reranker_select_reports_the_group_and_its_votes():
    reranker = AresReranker(keyword_backbone())
    best = reranker.select("q", CANDIDATES)
    assert best["index"] == 0 and "groups" not in best  # "best": the highest chain score, as before
    majority = reranker.select("q", CANDIDATES, selection="majority")
    assert majority["answer"] == "1" and majority["index"] == 0 and majority["votes"] == 2.0  # tie: first group
    assert [g["answer"] for g in majority["groups"]] == ["1", "2"]
    sound = AresReranker(keyword_backbone(), selection="sound-weighted").select("q", CANDIDATES)
    assert sound["answer"] == "1" and sound["groups"][0]["sound"] == 1


def test_reranker_rank_orders_groups_then_scores_and_keeps_unanswered_last():
    ranked = AresReranker(keyword_backbone()).rank("q", CANDIDATES, selection="weighted")
    assert [r["index"] for r in ranked] == [0, 3, 1, 2, 4]
    assert [r["answer"] for r in ranked] == ["1", "1", "2", "2", None]
    assert ranked[0]["votes"] == pytest.approx(ranked[0]["score"] + ranked[1]["score"])


def test_reranker_reads_answers_of_conversational_candidates():
    reranker = AresReranker(keyword_backbone(), selection="majority")
    chats = [[{"role": "assistant", "content": c}] for c in CANDIDATES[1:4]]
    assert reranker.select("q", chats)["answer"] == "2"


# -- the command line -----------------------------------------------------------------------------------------------
def test_cli_rank_with_a_vote_writes_answers_groups_and_the_chosen_index(tmp_path, monkeypatch):
    from ares_rerank.cli import main

    source = tmp_path / "in.jsonl"
    candidates = ["I have A, I use rule (A -> B) to derive B, now I have B",
                  "I have A, I use rule (A -> C) to derive C, now I have C",
                  "I have A, I use rule (A -> C) to derive C, now I have C"]
    source.write_text(json.dumps({"prompt": "Rule: A -> B (meaning that if I have A, I can derive B)\nI have A",
                                  "candidates": candidates}) + "\n")
    (tmp_path / "last_state.py").write_text("def answer(text):\n    return text.rsplit(' ', 1)[-1]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out.jsonl"
    args = [str(source), "--backbone", "claimtrees-oracle", "--prompt-split", "lines", "--no-progress",
            "--answer-fn", "last_state:answer", "--output"]
    assert main(["rank", *args, str(out), "--selection", "majority"]) == 0
    line = json.loads(out.read_text())
    assert line["answers"] == ["B", "C", "C"] and line["best_index"] == 1
    assert line["groups"][0] == {"group": 1, "answer": "C", "size": 2, "votes": 2.0, "sound": 0, "members": [1, 2]}
    out2 = tmp_path / "out2.jsonl"
    assert main(["rank", *args, str(out2), "--selection", "weighted"]) == 0
    line = json.loads(out2.read_text())
    assert line["best_index"] == 0 and line["ranking"][0]["answer"] == "B"  # the oracle: only B follows
    assert main(["rank", *args[:-3], "--answer-fn", "missing_module:fn", "--output", str(tmp_path / "x")]) == 2

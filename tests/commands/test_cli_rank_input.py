"""``ares-rerank rank`` input that would be read wrongly without a word: a misspelled record key is refused naming
the key it has, and an answer function that reads no answer from most candidates warns with the count (in the CLI,
and from Python wherever an answer vote is taken: the reranker and step-level search)."""

from __future__ import annotations

import json

import pytest

from ares_rerank.cli import main


ORACLE_ARGS = ["--backbone", "claimtrees-oracle", "--no-progress"]
# a deterministic fake backbone that scores any text (tests/helpers.py)
HASH_ARGS = ["--backbone", "helpers:HashBackbone", "--no-progress"]


@pytest.mark.parametrize(("record", "expected"), [
    ({"question": "p", "candidates": ["a"]},
     "has the key 'question' and no 'prompt': rename 'question' to 'prompt', or pass --prompt-key question"),
    ({"promt": "p", "candidates": ["a"]}, "has the key 'promt' and no 'prompt'"),
    ({"prompt": "p", "candidate": ["a"]},
     "has the key 'candidate' and no 'candidates': rename 'candidate' to 'candidates', or pass --candidates-key "
     "candidate"),
    ({"prompt": "p", "completions": ["a"]}, "has the key 'completions' and no 'candidates'"),
    ({"query": "p", "responses": ["a"]}, "has the key 'query' and no 'prompt'"),
    ({"prompt": "p"}, "has no 'candidates' (--candidates-key names the key of the candidates)"),
])
def test_a_misspelled_rank_key_is_refused_naming_the_close_match(tmp_path, capsys, record, expected):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"prompt": "p", "candidates": ["a"]}) + "\n" + json.dumps(record) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["rank", "--input", str(path), "--output", str(out), *ORACLE_ARGS]) == 2
    err = capsys.readouterr().err
    assert f"in.jsonl:2 {expected}" in err and "Traceback" not in err
    assert not out.exists()  # refused before anything is written
    if "and no 'prompt'" in expected and "responses" in record:
        assert "and no 'candidates'" in err  # both keys named in one line


def _candidates(answers):
    """A candidate states its answer ("the answer is 7") or, for None, only names a colour (no answer to read)."""
    return ["I have A\n\nSo I derive B, and " + (f"the answer is {a}." if a else "it is blue, I think.")
            for a in answers]


def test_an_answer_fn_that_reads_no_answer_from_most_candidates_warns_with_the_count(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    rows = [{"prompt": "I have A", "candidates": _candidates([None, None, None, "42"])},
            {"prompt": "I have A", "candidates": _candidates([None, None])}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert main(["rank", "--input", str(path), "--output", str(out), "--selection", "weighted",
                 "--answer-fn", "standard", *HASH_ARGS]) == 0
    err = capsys.readouterr().err
    assert "--answer-fn 'standard' read no final answer from 5 of 6 candidates" in err
    assert "--answer-fn module:function" in err and "AnswerReadWarning" not in err  # said once, in the flags' words
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    # the keys the help promises are there, also for a prompt where no answer was read
    assert all("answers" in line and "groups" in line for line in lines)
    assert lines[1]["answers"] == [None, None] and lines[1]["groups"] == []
    assert lines[0]["answers"] == [None, None, None, "42"]


def test_no_warning_when_most_answers_are_read(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"prompt": "I have A", "candidates": _candidates(["7", "7", None])}) + "\n")
    assert main(["rank", "--input", str(path), "--output", str(tmp_path / "o.jsonl"), "--selection", "majority",
                 "--answer-fn", "standard", *HASH_ARGS]) == 0
    assert "read no final answer" not in capsys.readouterr().err


def test_python_rerankers_and_search_warn_once_when_the_answer_function_does_not_fit():
    import warnings

    from ares_rerank import AresReranker
    from ares_rerank.rerank.answers import AnswerReadWarning
    from ares_rerank.search import PolicyStepGenerator, beam_search
    from helpers import HashBackbone

    reranker = AresReranker(HashBackbone(), selection="weighted", show_progress_bar=False)
    with pytest.warns(AnswerReadWarning, match=r"answer_fn 'standard' read no final answer from 6 of 8 candidates"):
        reranker.rank("I have A", _candidates([None, None, None, "42"]))
        reranker.rank("I have A", _candidates([None, None, None, "7"]))  # the 8th candidate: judged now
    with warnings.catch_warnings():
        warnings.simplefilter("error", AnswerReadWarning)  # once per reranker
        reranker.rank("I have A", _candidates([None, None]))
        fitting = AresReranker(HashBackbone(), selection="majority", show_progress_bar=False)
        for _ in range(3):
            fitting.rank("I have A", _candidates(["7", "7", "8", None]))
    assert (fitting.answers.seen, fitting.answers.read) == (12, 9)

    def policy(prompt, steps, rng):  # two steps, and no answer stated
        return None if len(steps) == 2 else f"So I derive B{rng.randint(0, 9)}, and it is blue."

    with pytest.warns(AnswerReadWarning, match="read no final answer"):
        beam_search(PolicyStepGenerator(policy), ["I have A"], AresReranker(
            HashBackbone(), selection="majority", show_progress_bar=False), 8, beam_width=2)

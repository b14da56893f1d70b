from __future__ import annotations

import pytest

from ares_rerank import Chain, ChainScores, split_sentences, split_steps


def test_from_text_default_blank_line_separator():
    chain = Chain.from_text("Solve 2x = 6.", "2x = 6.\n\nSo x = 3.\n\n\n  \nThe answer is 3.")
    assert chain.base_claims == ("Solve 2x = 6.",)
    assert chain.steps == ("2x = 6.", "So x = 3.", "The answer is 3.")


def test_from_text_separators_and_prompt_splitting():
    chain = Chain.from_text("We have eggs. We have milk! Mix them?", "a\nb", step_separator="\n",
                            prompt_split="sentences")
    assert chain.base_claims == ("We have eggs.", "We have milk!", "Mix them?")
    assert chain.steps == ("a", "b")
    assert split_steps("Step 1: a Step 2: b", "re:Step \\d+:") == ["a", "b"]
    assert Chain.from_text("l1\n\nl2\n", "s", prompt_split="lines").base_claims == ("l1", "l2")
    with pytest.raises(ValueError, match="prompt_split"):
        Chain.from_text("p", "s", prompt_split="words")
    with pytest.raises(ValueError, match="step_separator"):
        split_steps("x", "")


def test_sentence_splitter_keeps_abbreviations_and_numbers():
    text = "Dr. Smith paid 3.5 dollars, e.g. for tea. Then J. Doe left. Is it 7? Yes."
    expected = ["Dr. Smith paid 3.5 dollars, e.g. for tea.", "Then J. Doe left.", "Is it 7?", "Yes."]
    assert split_sentences(text) == expected


def test_empty_completion_is_a_clear_error():
    with pytest.raises(ValueError, match="no steps"):
        Chain.from_text("p", "  \n\n ")
    with pytest.raises(TypeError, match="completion"):
        Chain.from_text("p", None)


def test_labels_validated():
    assert Chain(["a"], ["b", "c"], labels=[0, 1]).labels == (0, 1)
    with pytest.raises(ValueError, match="labels"):
        Chain(["a"], ["b", "c"], labels=[0])
    with pytest.raises(ValueError, match="labels"):
        Chain(["a"], ["b"], labels=[2])


def test_fingerprint_depends_on_text_only():
    a = Chain(["a"], ["b"], labels=[1], id="x")
    assert a.fingerprint() == Chain(["a"], ["b"]).fingerprint()
    assert a.fingerprint() != Chain(["a", ""], ["b"]).fingerprint()
    assert a.fingerprint() != Chain([], ["a", "b"]).fingerprint()


def test_chain_scores_flags_and_first_error():
    scores = ChainScores([0.9, 0.4, 0.8], evaluations=3, evaluations_per_step=[1, 1, 1])
    assert scores.flags() == [False, True, False]
    assert scores.first_error() == 1 and scores.first_error(threshold=0.1) == -1
    with pytest.raises(ValueError, match="step_scores"):
        ChainScores([1.2], 1, [1])



def test_certificate_names_what_each_mode_guarantees():
    exact = ChainScores([0.9, 0.1], 2, [1, 1], mode="exact", error_bounds=[0.0, 0.04])
    assert exact.certificate() == "exact, bound 0.04"
    sampled = ChainScores([0.9], 5, [5], mode="sample", eps=0.1, delta=0.05, num_samples=385)
    assert sampled.certificate() == "sampled N=385, eps=0.1, delta=0.05"
    tail = ChainScores([0.9, 0.2], 9, [3, 6], mode="stratified", eps=0.1, delta=0.1, num_samples=17,
                       error_bounds=[0.02, 0.1])
    assert tail.certificate() == "exact + sampled tail n=17, bound 0.1 with probability >= 0.9"
    assert ChainScores([0.5], 1, [1], method="entail-prev").certificate() == "direct"

def test_sentence_splitter_on_math_keeps_decimals_units_step_labels_and_abbreviations():
    text = (
        "Step 1. The rod is 1.5 m. Its half is 0.75 m, e.g. 75 cm. Step 2. Multiply: 3.5 * 2 = 7.0. "
        "1. Add 2. 2. Subtract 1. Solve for x. Then x = 3.14. Is it 2.5? Yes!"
    )
    assert split_sentences(text) == [
        "Step 1. The rod is 1.5 m.",
        "Its half is 0.75 m, e.g. 75 cm.",
        "Step 2. Multiply: 3.5 * 2 = 7.0.",
        "1. Add 2.",
        "2. Subtract 1.",
        "Solve for x.",
        "Then x = 3.14.",
        "Is it 2.5?",
        "Yes!",
    ]
    assert split_steps("Step 1. Let x = 2.5 m. Step 2. So 2x = 5.0 m.", None) == [
        "Step 1. Let x = 2.5 m.", "Step 2. So 2x = 5.0 m."
    ]
    assert split_sentences("(a) First, i.e. 1.5. (b) Second, cf. Eq. 3. Done.") == [
        "(a) First, i.e. 1.5.", "(b) Second, cf. Eq. 3.", "Done."
    ]


def test_flags_need_a_threshold_in_0_1_and_claims_are_bounded():
    import numpy as np

    from ares_rerank.chain import MAX_CLAIM_CHARS

    scores = ChainScores(step_scores=[0.2, 0.9], evaluations=2, evaluations_per_step=[1, 1], method="ares")
    assert scores.flags(0.5) == [True, False] and scores.flags(np.float32(0.5)) == [True, False]
    assert scores.first_error(0.1) == -1 and scores.first_error(1) == 0
    for bad in (float("nan"), 5, -0.1, "0.5", True):  # nan flagged nothing, 5 everything, "0.5" a bare TypeError
        with pytest.raises(ValueError, match=r"threshold=.* must be a number in \[0, 1\]"):
            scores.flags(bad)
    Chain([], ["x" * MAX_CLAIM_CHARS])
    with pytest.raises(ValueError, match=r"steps\[0\] is 1,000,001 characters, more than any backbone reads"):
        Chain([], ["x" * (MAX_CLAIM_CHARS + 1)])


def test_a_regex_separator_that_matches_nothing_is_refused():
    from ares_rerank.chain import check_separator

    assert split_steps("a\n\nb", "re:\n+") == ["a", "b"]
    assert check_separator("\n\n") is None
    for bad in ("re:", "re:\\s*", "re:(x)?"):
        with pytest.raises(ValueError, match="matches the empty string"):
            split_steps("abc", bad)


def test_what_a_regex_separator_matches_is_never_a_step_its_groups_included():
    """re.split returns a pattern's groups between the parts: the labels became steps, and a group that did not take
    part in the match (None) made split_steps raise a TypeError."""
    assert split_steps("Step 1: x=1 Step 2: y=2", r"re:(Step \d+:)") == ["x=1", "y=2"]
    assert split_steps("xaybz", "re:(a)|(b)") == ["x", "y", "z"]
    assert split_steps("x=1\n\ny=2\n-z", r"re:(\n\n)|(\n-)") == ["x=1", "y=2", "z"]


def test_a_literal_separator_splits_windows_and_old_mac_line_endings():
    assert split_steps("x=1.\r\n\r\ny=2.") == ["x=1.", "y=2."]
    assert split_steps("x=1.\r\ry=2.") == ["x=1.", "y=2."]
    assert split_steps("a\r\nb", "\n") == ["a", "b"]
    assert split_steps("a\r\nb|c", "\r\n") == ["a", "b|c"]  # a separator that names \r is taken as written


def test_a_chain_id_is_text():
    """Chain(id=[5]) was kept, and hashing the chain (a set of chains, a cache key) then failed."""
    assert Chain([], ["x"], id="c-1").id == "c-1" and Chain([], ["x"]).id is None
    for bad in ([5], 5, 1.5, b"c"):
        with pytest.raises(TypeError, match=r"Chain\(id=.*\) is .*: pass a string"):
            Chain([], ["x"], id=bad)


def test_a_step_of_only_invisible_characters_is_blank():
    for invisible in ("\u200b", " \u200d\ufeff "):
        with pytest.raises(ValueError, match=r"steps\[0\] is blank"):
            Chain([], [invisible])
    assert split_steps("a\n\n\u200b\n\nb") == ["a", "b"] and split_sentences(" \u200b ") == []
    assert Chain([], ["a\u200b"]).steps == ("a\u200b",)  # visible text with a format character stays as it is


def test_sentences_is_one_spelling_in_python_and_on_the_command_line():
    """``step_separator="sentences"`` splits into sentences as ``None`` does and as ``--step-separator sentences``
    means; a reranker takes it too."""
    from ares_rerank import AresReranker, FunctionBackbone
    from ares_rerank.chain import parse_separator

    text = "We have pepper. Then we add salt. So it is seasoned."
    assert split_steps(text, "sentences") == split_steps(text, None) == split_steps(text, parse_separator("sentences"))
    assert len(split_steps(text, "sentences")) == 3
    reranker = AresReranker(FunctionBackbone(lambda p, h: [1.0] * len(h)), step_separator="sentences")
    assert len(reranker.to_chain("q", text).steps) == 3


@pytest.mark.parametrize("row, message", [
    ({"base_claim": ["a"], "steps": ["b"]}, "has the key 'base_claim' and no 'base_claims'"),
    ({"question": "q", "completion": "c"}, "has the key 'question' and no 'prompt'"),
    ({"prompt": "q", "completion": "c", "label": [1]}, "has the key 'label' and no 'labels'"),
    ({"prompt": "q", "steps": ["s"]}, "has 'steps' and 'prompt' but no 'base_claims'"),
])
def test_a_misspelled_row_key_is_an_error_naming_the_key_meant(row, message):
    """Read silently, these rows were scored without their base claims, their prompt or their gold labels."""
    with pytest.raises(ValueError, match=message):
        Chain.from_record(row)


def test_a_data_sets_own_columns_are_left_alone():
    chain = Chain.from_record({"prompt": "q", "completion": "so c", "answer": "5", "source": "gsm8k"})
    assert chain.steps == ("so c",)
    assert Chain.from_record({"base_claims": [], "steps": ["s"], "answer": "3"}).steps == ("s",)

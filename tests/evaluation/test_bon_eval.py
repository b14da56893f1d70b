"""Best-of-N accuracy against N: pass@k, the generated candidate sets, the file schemas users have
(search-and-learn's completions, RLHFlow's test sets), the metrics with the ClaimTrees rule oracle, gold answers
read by the answer function as the candidates are (bare-LaTeX MATH golds with math-verify), search-and-learn's
first-N protocol against its published computation, and ``ares-rerank eval --task bon``."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from ares_rerank.rerank.answers import AnswerMatcher
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.data.bon import claimtrees_answer, claimtrees_bon, recipe_answer
from ares_rerank.evaluation.bon import evaluate_bon, n_values, pass_at_k
from ares_rerank.evaluation.tasks.bon import load_bon_file, load_bon_generated
from helpers import shared_data


@pytest.mark.parametrize("n, c, k", [(5, 0, 1), (5, 1, 1), (6, 2, 3), (8, 3, 8), (7, 7, 2), (9, 4, 4)])
def test_pass_at_k_is_the_share_of_k_subsets_with_a_correct_candidate(n, c, k):
    subsets = list(itertools.combinations(range(n), k))
    expected = sum(any(i < c for i in s) for s in subsets) / len(subsets)
    assert math.isclose(pass_at_k(n, c, k), expected)


def test_n_values_are_powers_of_two_and_the_maximum():
    assert n_values(16) == [1, 2, 4, 8, 16]
    assert n_values(12) == [1, 2, 4, 8, 12]
    assert n_values(1) == [1]


def test_generated_claimtrees_candidates_are_sound_exactly_when_their_answer_is_right():
    oracle = ClaimTreesOracle()
    for problem in claimtrees_bon(n=12, candidates=8, seed=3):
        for chain, ok in zip(problem.candidates, problem.correct):
            text = "\n\n".join(chain.steps)
            assert (claimtrees_answer(text) == problem.answer) == ok
            premises, entailed = list(problem.base_claims), []
            for step in chain.steps:  # each step given the base claims and every earlier step (no propagation)
                entailed.append(oracle.entailment_probs([premises], [step])[0])
                premises.append(step)
            assert (min(entailed) == 1.0) == ok  # one unsupported jump in every wrong candidate
            if not ok:
                assert entailed[-1] == 1.0  # ... after which every step is locally valid: the final step looks fine
    assert claimtrees_bon(n=2, seed=5)[1].candidates[0].steps == claimtrees_bon(n=2, seed=5)[1].candidates[0].steps


def test_generated_sets_reject_bad_arguments():
    with pytest.raises(ValueError, match="sound_range"):
        claimtrees_bon(n=1, sound_range=(0.8, 0.2))
    with pytest.raises(ValueError, match="candidates=0"):
        claimtrees_bon(n=1, candidates=0)
    with pytest.raises(ValueError, match="generate='chess'"):
        load_bon_generated("chess")


def test_ares_vote_reaches_pass_at_n_with_the_rule_oracle_and_majority_falls_behind():
    task = load_bon_generated("claimtrees", n=60, candidates=8)
    results = evaluate_bon(task, ClaimTreesOracle(), ["ares", "entail-prev"], subset_count=8, progress=False)
    rows, top = results["rows"], "8"
    assert results["n_values"] == [1, 2, 4, 8]
    assert rows["ares | weighted"][top][0] == pytest.approx(rows["pass@N"][top][0], abs=0.01)
    assert rows["ares | sound-weighted"][top][0] == pytest.approx(rows["pass@N"][top][0], abs=0.01)
    assert rows["majority"][top][0] < rows["ares | weighted"][top][0] - 0.2  # wrong answers cluster
    # Entail-Prev's final step is locally valid in every wrong chain: its final-step vote is the majority's
    assert rows["entail-prev | weighted"][top][0] == pytest.approx(rows["majority"][top][0], abs=0.02)
    for row in rows.values():  # every cell: a mean and an SE
        assert all(0.0 <= mean <= 1.0 and se >= 0.0 for mean, se in row.values())
    assert rows["random"]["1"][0] == pytest.approx(rows["pass@N"]["1"][0], abs=1e-9)


def test_generated_recipe_answers_are_the_ingredients_cooked_with():
    shared_data("recipe_graphs")
    task = load_bon_generated("recipes", n=6, candidates=8)
    assert {p.id.split("-")[2] for p in task.problems} == {"broccolistirfry", "cheesepimiento", "coffee",
                                                           "microwaveeggsandwich", "ramen", "tomatochutney"}
    for problem in task.problems:
        answers = [recipe_answer(t) for t in problem.texts]
        right = {a for a, ok in zip(answers, problem.correct) if ok}
        assert all(a is not None for a in answers) and len(right) <= 1
        assert not right & {a for a, ok in zip(answers, problem.correct) if not ok}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


SAL = [
    {"problem": "What is 1 + 1?", "answer": "2",
     "completions": ["1 + 1 = 2.\n\nSo \\boxed{2}", "1 + 1 = 3.\n\nSo \\boxed{3}", "It is two.\n\n\\boxed{2.0}", ""],
     "scores": [[0.9, 0.8], [0.4, 0.3], [0.7, 0.6], []]},
    {"problem": "What is half of 1?", "answer": "\\frac{1}{2}",
     "completions": ["Half.\n\n\\boxed{0.5}", "Hmm.\n\n\\boxed{1}", "Hmm.\n\n\\boxed{1}", "Half.\n\n\\boxed{1/2}"],
     "scores": [[0.2], [0.9], [0.8], [0.3]]},
]


def test_search_and_learn_schema_with_its_own_scores(tmp_path):
    task = load_bon_file(write_jsonl(tmp_path / "sal.jsonl", SAL))
    assert [p.correct for p in task.problems] == [[True, False, True, False], [True, False, False, True]]
    assert task.problems[0].chains[3] is None
    assert list(task.problems[0].chains[0].steps) == ["1 + 1 = 2.", "So \\boxed{2}"]
    results = evaluate_bon(task, None, ["given"], selections=["best", "weighted"], progress=False)
    rows = results["rows"]
    # problem 1: the top "last" score is right (0.8); problem 2: the top one (0.9) is wrong, the weighted vote
    # 1.7 for "1" beats 0.5 for "1/2": search-and-learn's pred_naive / pred_weighted by hand
    assert rows["given | best"]["4"][0] == 0.5 and rows["given | weighted"]["4"][0] == 0.5
    # majority: "2" twice in problem 1; in problem 2 "0.5" and "1/2" are one answer, tied 2-2 with "1": the first
    # occurring answer wins (search-and-learn's find_majority_answer), and it is right
    assert rows["majority"]["4"][0] == 1.0
    assert rows["pass@N"]["4"][0] == 1.0


@pytest.mark.parametrize("label_key", ["label", "labels"])
def test_rlhflow_schema_reads_label_or_labels_and_math_shepherd_step_tags(tmp_path, label_key):
    record = {"prompt": "Convert (0,3) to polar.", label_key: [1, 0],
              "answers": ["r = 3 ки\nSo the answer is $(3,\\frac{\\pi}{2})$ ки\n", "r = 3\n\nSo \\boxed{(3,\\pi)}"]}
    task = load_bon_file(write_jsonl(tmp_path / "rlhflow.jsonl", [record]))
    problem = task.problems[0]
    assert problem.correct == [True, False]
    assert list(problem.chains[0].steps) == ["r = 3", "So the answer is $(3,\\frac{\\pi}{2})$"]
    assert list(problem.chains[1].steps) == ["r = 3", "So \\boxed{(3,\\pi)}"]
    assert AnswerMatcher().group(problem.texts)[1][0] == "(3,\\frac{\\pi}{2})"  # the step tag is not the answer


@pytest.mark.parametrize("labels, shown, fix", [
    (["1", "0"], "'1'", "without quotes"), (["True", "False"], "'True'", "without quotes"),
    ([2, 0], "2", "threshold it"), ([1, -1], "-1", "threshold it"), ([0.5, 1], "0.5", "threshold it"),
    ([1, None], "None", ""), ([1, float("nan")], "nan", "threshold it"), ([[1], 0], "[1]", ""),
])
def test_rlhflow_labels_that_are_not_0_1_or_true_false_are_refused_naming_the_record(tmp_path, labels, shown, fix):
    """bool() of them read '0', 'False', 2, -1 and 0.5 as correct answers."""
    good, bad = {"prompt": "q", "answers": ["a", "b"], "label": [1, 0]}, {"prompt": "q", "answers": ["a", "b"],
                                                                          "label": labels}
    with pytest.raises(ValueError, match=r"record 2: label \d is ") as err:
        load_bon_file(write_jsonl(tmp_path / "x.jsonl", [good, bad]))
    assert shown in str(err.value) and fix in str(err.value) and "1 or true" in str(err.value)


def test_eval_bon_on_string_labels_is_one_error_line_and_writes_nothing(tmp_path, capsys):
    from ares_rerank.cli import main

    path = write_jsonl(tmp_path / "rlhflow.jsonl", [{"prompt": "q", "answers": ["\\boxed{1}", "\\boxed{2}"],
                                                     "label": ["0", "1"]}])
    assert main(["eval", "--backbone", "claimtrees-oracle",
                 "--task", "bon", "--path", str(path), "--output-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("ares-rerank eval: error: ") and "record 1: label 0 is '0'" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_rlhflow_labels_as_json_booleans_and_integers_are_read(tmp_path):
    record = {"prompt": "q", "answers": ["a", "b", "c", "d"], "labels": [True, 0, 1.0, False]}
    assert load_bon_file(write_jsonl(tmp_path / "ok.jsonl", [record])).problems[0].correct == [True, False, True,
                                                                                               False]


def test_file_schema_errors_name_the_record_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match="neither search-and-learn"):
        load_bon_file(write_jsonl(tmp_path / "x.jsonl", [{"question": "q", "outputs": []}]))
    with pytest.raises(ValueError, match="record 1: 'label'/'labels'"):
        load_bon_file(write_jsonl(tmp_path / "y.jsonl", [{"prompt": "q", "answers": ["a"], "label": [1, 0]}]))
    with pytest.raises(ValueError, match="'scores' must hold"):
        load_bon_file(write_jsonl(tmp_path / "z.jsonl", [{**SAL[0], "scores": [[0.1]]}]))
    with pytest.raises(ValueError, match="method 'given' needs"):
        rows = [{k: v for k, v in SAL[0].items() if k != "scores"}]
        evaluate_bon(load_bon_file(write_jsonl(tmp_path / "w.jsonl", rows)), None, ["given"], progress=False)


def test_cli_eval_bon_writes_json_markdown_and_plot(tmp_path):
    from ares_rerank.cli import main

    source = write_jsonl(tmp_path / "sal.jsonl", SAL)
    out = tmp_path / "out"
    args = ["eval", "--backbone", "claimtrees-oracle",
            "--task", "bon", "--path", str(source), "--methods", "given", "--output-dir", str(out),
            "--no-progress"]
    assert main(args + ["--name", "run"]) == 0
    results = json.loads((out / "run.json").read_text())
    assert results["rows"]["given | best"]["4"][0] == 0.5
    assert "| no verifier | majority |" in (out / "run.md").read_text()
    assert (out / "run.png").read_bytes()[:4] == b"\x89PNG"
    assert main(args + ["--name", "run"]) == 0  # the same settings again: replaced
    assert main(args + ["--name", "run", "--subsets", "first"]) == 2  # other settings: refused before any work
    # neither --path nor --generate
    assert main(["eval", "--backbone", "claimtrees-oracle",
                 "--task", "bon", "--output-dir", str(out), "--no-progress"]) == 2


def test_cli_eval_bon_on_a_generated_set_with_the_oracle(tmp_path, capsys):
    from ares_rerank.cli import main

    out = tmp_path / "out"
    assert main(["eval", "--backbone", "claimtrees-oracle",
                 "--task", "bon", "--generate", "claimtrees", "--n", "20", "--candidates", "4",
                 "--backbone", "claimtrees-oracle", "--output-dir", str(out), "--name", "ct", "--no-progress"]) == 0
    results = json.loads((out / "ct.json").read_text())
    assert results["n_values"] == [1, 2, 4] and results["task"]["num_problems"] == 20
    assert results["rows"]["ares | weighted"]["4"][0] == pytest.approx(results["rows"]["pass@N"]["4"][0])
    assert "ares" in capsys.readouterr().out


def test_results_doc_renders_the_oracle_table_and_committed_bon_runs(tmp_path, monkeypatch):
    import eval.make_results as make_results
    from ares_rerank.evaluation import ScoreCache

    monkeypatch.setattr(make_results, "FIGURES", tmp_path / "figures")
    (tmp_path / "figures").mkdir()
    task = load_bon_generated("claimtrees", n=10, candidates=4, seed=1)
    committed = evaluate_bon(task, ClaimTreesOracle(), ["ares"], backbone_name="some-head", progress=False)
    (tmp_path / "bon_run.json").write_text(json.dumps(committed))
    runs = make_results.real_runs(tmp_path)
    text = make_results.bon_section(ScoreCache(tmp_path / "cache"), False, runs)
    assert "**ClaimTrees-BoN**: 200 problems, N up to 16" in text and "backbone `some-head`" in text
    assert text.count("| ares | weighted |") == 2 and "At N = 4 pass@N is" in text
    assert (tmp_path / "figures" / "bon_claimtrees_oracle.png").exists()
    assert (tmp_path / "figures" / "bon_run.png").exists()
    assert "pending" in make_results.real_backbone_section(runs)  # a best-of-N file is section 8's, not section 7's
    assert "is pending" in make_results.bon_section(ScoreCache(tmp_path / "cache"), False, [])


def test_the_demo_head_on_candidates_outside_its_domain_is_said(tmp_path):
    """evaluate_bon warns as evaluate does (DemoBackboneWarning) when the embedded demo head scores math text."""
    import warnings

    from ares_rerank import load_backbone
    from ares_rerank.backbones.demo import DemoBackboneWarning

    task = load_bon_file(write_jsonl(tmp_path / "sal.jsonl", SAL))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DemoBackboneWarning)
        evaluate_bon(task, load_backbone("default"), ["ares"], progress=False)
    demo = [w for w in caught if issubclass(w.category, DemoBackboneWarning)]
    assert len(demo) == 1 and "evaluate_bon on BoN sal" in str(demo[0].message)


# -- gold answers read as the candidates are: a MATH-style file whose golds are bare LaTeX --------------------------
#: (gold as MATH-500 / search-and-learn's ``answer`` field writes it, a wrong answer, an equivalent form or None).
MATH_GOLDS = [
    (r"2\sqrt{2}", r"2\sqrt{3}", None),
    (r"\pi", r"2\pi", None),
    (r"\frac{1}{2}", r"\frac{1}{3}", "0.5"),
    ("3", "4", "3.0"),
    (r"\{1,2\}", r"\{1,3\}", None),
    (r"\frac{\pi}{4}", r"\frac{\pi}{3}", None),
    (r"(3,\frac{\pi}{2})", r"(3,\pi)", None),
    (r"x^2+1", r"x^2-1", None),
    (r"-\frac{3}{4}", r"\frac{3}{4}", "-0.75"),
    (r"\sqrt{3}", r"\sqrt{2}", None),
    (r"2\pi", r"\pi", None),
    (r"\infty", "0", None),
    (r"[1,3)", r"(1,3]", None),
    (r"\dfrac{3}{5}", r"\dfrac{2}{5}", r"\frac{3}{5}"),
    (r"y=2x+1", r"y=2x-1", None),
    (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{pmatrix} 2 \\ 1 \end{pmatrix}", None),
    (r"\text{(B)}", r"\text{(C)}", None),
    (r"3\sqrt{13}", r"13\sqrt{3}", None),
    ("1,000", "100", "1000"),
    (r"(-\infty, 0) \cup (0, \infty)", r"(-\infty, 0)", None),
]


def math_bare_gold_records(candidates=16, seed=0):
    """search-and-learn records for :data:`MATH_GOLDS`: each candidate boxes the gold (or its equivalent form) or the
    wrong answer, with per-step scores; also returns which candidates are right, by construction."""
    import random

    rng = random.Random(f"math-bare-gold/{seed}")
    records, truth = [], []
    for i, (gold, wrong, same) in enumerate(MATH_GOLDS):
        p_right = rng.uniform(0.05, 0.6)
        completions, scores, right = [], [], []
        for c in range(candidates):
            ok = rng.random() < p_right
            answer = (same if same is not None and c % 2 else gold) if ok else wrong
            ending = rng.choice(["So the answer is $\\boxed{%s}$.", "The final answer is $\\boxed{%s}$"]) % answer
            completions.append(f"Problem {i}: we work it out.\n\nThen one more step.\n\n{ending}")
            scores.append([round(rng.random(), 2) for _ in range(3)])
            right.append(ok)
        records.append({"problem": f"MATH-style problem {i}", "answer": gold, "completions": completions,
                        "scores": scores})
        truth.append(right)
    return records, truth


def test_bare_latex_golds_are_read_as_the_candidates_that_box_them():
    pytest.importorskip("math_verify")
    for name in ("standard", "math-verify"):
        matcher = AnswerMatcher(name)
        for gold, wrong, same in MATH_GOLDS:
            assert matcher.is_correct(f"so $\\boxed{{{gold}}}$", gold), (name, gold)
            assert not matcher.is_correct(f"so $\\boxed{{{wrong}}}$", gold), (name, gold, wrong)
            if same is not None:
                assert matcher.is_correct(f"so $\\boxed{{{same}}}$", gold), (name, gold, same)
    mv = AnswerMatcher("math-verify")
    # a gold written as text (TRL's `solution` column) is parsed as TRL parses it
    assert mv.is_correct("so \\boxed{2\\sqrt{2}}", "The side is $2\\sqrt{2}$.")
    assert mv.is_correct("so \\boxed{\\pi}", "Hence $\\boxed{\\pi}$")
    assert not mv.is_correct("so \\boxed{2}", "2\\sqrt{2}")  # the bare gold is no longer read as its first number
    with pytest.raises(ValueError, match=r"cannot read the gold answer '\$\$'.*answer_fn='standard'"):
        mv.is_correct("\\boxed{1}", "$$")  # nothing inside: TRL would skip the row; here it is said


def test_a_custom_answer_fn_reads_the_gold_too():
    def last_word(text):
        words = text.replace(".", " ").split()
        return words[-1].lower() if words else None

    matcher = AnswerMatcher(last_word)
    assert matcher.is_correct("so it is Paris.", "The capital is PARIS")  # both sides read: "paris"
    assert not matcher.is_correct("so it is Rome.", "PARIS")
    assert AnswerMatcher(claimtrees_answer).is_correct("I have A, ..., now I have Q", "Q")  # bare gold: as written
    assert AnswerMatcher(lambda t: int(t.split()[-1]) if t.split()[-1].isdigit() else None).is_correct("x 12", 12)
    # the standard reading of a gold that states its answer
    assert AnswerMatcher().is_correct("\\boxed{5}", "so the answer is 5.")


def test_cli_math_verify_agrees_with_standard_on_bare_latex_golds(tmp_path):
    """The issue's done-when: `eval --task bon --answer-fn math-verify` agrees with `standard` on a MATH-style file
    whose golds are bare LaTeX (math-verify used to read 2\\sqrt{2} as 2 and \\pi as nothing)."""
    pytest.importorskip("math_verify")
    from ares_rerank.cli import main

    records, truth = math_bare_gold_records()
    source = write_jsonl(tmp_path / "math_bare.jsonl", records)
    for name in ("standard", "math-verify"):
        assert [p.correct for p in load_bon_file(source, answer_fn=name).problems] == truth, name
    out, rows = tmp_path / "out", {}
    for name in ("standard", "math-verify"):
        assert main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "bon", "--path", str(source), "--methods", "given", "--answer-fn", name,
                     "--output-dir", str(out), "--name", name, "--no-progress"]) == 0
        rows[name] = json.loads((out / f"{name}.json").read_text())["rows"]
    assert rows["math-verify"] == rows["standard"]
    assert rows["math-verify"]["pass@N"]["16"][0] == pytest.approx(sum(map(any, truth)) / len(truth))
    assert rows["math-verify"]["random"]["1"][0] == pytest.approx(
        sum(sum(t) / len(t) for t in truth) / len(truth))


# -- search-and-learn's first-N protocol, against its published computation rewritten here --------------------------
def sal_accuracy_at_n(records, n):
    """accuracy@n of search-and-learn's pred_naive / pred_weighted / pred_maj, following huggingface/search-and-learn
    (sal/utils/score.py and sal/utils/math.py): each completion's score is its last step's (aggregate_scores(s,
    "last")); subsample_completions keeps the first n completions and scores; naive = the answer of the highest
    score (a stable sort, so the earlier one on ties); weighted = find_answer_with_largest_sum (scores summed per
    answer, the first-inserted answer on ties, as max over a dict does); majority = find_majority_answer (counts, the
    first occurring answer on ties). Answers are grouped by their canonical form; this file's answers are integers
    written without leading zeros or signs, whose canonical form (latex2sympy, simplify, latex) is the string itself.
    """
    import re

    hits = {"naive": 0, "weighted": 0, "maj": 0}
    for record in records:
        agg = [steps[-1] for steps in record["scores"]][:n]
        preds = [re.findall(r"\\boxed\{([^{}]*)\}", c)[-1] for c in record["completions"][:n]]
        naive = sorted(zip(preds, agg), key=lambda x: x[1], reverse=True)[0][0]
        sums, counts = {}, {}
        for pred, score in zip(preds, agg):
            sums[pred] = sums.get(pred, 0.0) + score
            counts[pred] = counts.get(pred, 0) + 1
        weighted = max(sums, key=sums.get)
        top = max(counts.values())
        maj = next(a for a, c in counts.items() if c == top)
        for name, pred in (("naive", naive), ("weighted", weighted), ("maj", maj)):
            hits[name] += pred == record["answer"]
    return {name: value / len(records) for name, value in hits.items()}


def sal_grouped_records(problems=40, candidates=16, seed=0):
    """search-and-learn completions of integer answers, listed in groups as its beam search / DVTS write them: the
    first half of each problem's completions comes from a weaker search than the second (more wrong answers), so
    the first N and random N differ; scores have one decimal, so votes tie."""
    import random

    rng = random.Random(f"sal-grouped/{seed}")
    records = []
    for i in range(problems):
        gold = str(rng.randint(10, 99))
        wrong = [str(rng.randint(100, 999)) for _ in range(3)]
        completions, scores = [], []
        for c in range(candidates):
            p_right = 0.15 if c < candidates // 2 else 0.55
            answer = gold if rng.random() < p_right else rng.choices(wrong, (0.6, 0.3, 0.1))[0]
            completions.append(f"We compute.\n\nCheck it.\n\nSo $\\boxed{{{answer}}}$.")
            scores.append([round(rng.random(), 1) for _ in range(rng.randint(1, 3))])
        records.append({"problem": f"problem {i}", "answer": gold, "completions": completions, "scores": scores})
    return records


def test_subsets_first_reproduces_search_and_learn_weighted_naive_and_majority(tmp_path):
    from ares_rerank.cli import main

    records = sal_grouped_records()
    source = write_jsonl(tmp_path / "sal_grouped.jsonl", records)
    out = tmp_path / "out"
    base = ["eval", "--backbone", "claimtrees-oracle",
            "--task", "bon", "--path", str(source), "--methods", "given", "--selections", "best,weighted",
            "--output-dir", str(out), "--no-progress"]
    assert main(base + ["--subsets", "first", "--name", "first"]) == 0
    first = json.loads((out / "first.json").read_text())
    assert first["subsets"] == "first" and first["aggregate"] == "final" and first["n_values"] == [1, 2, 4, 8, 16]
    for n in first["n_values"]:
        expected = sal_accuracy_at_n(records, n)
        cells = first["rows"]
        assert cells["given | weighted"][str(n)][0] == expected["weighted"], n
        assert cells["majority"][str(n)][0] == expected["maj"], n
        assert cells["given | best"][str(n)][0] == expected["naive"], n
    assert "the first N candidates of each problem (search-and-learn's protocol)" in (out / "first.md").read_text()
    # the default random subsets read another sample below N = 16 on this grouped file, the same one at 16
    assert main(base + ["--name", "random"]) == 0
    drawn = json.loads((out / "random.json").read_text())
    assert "32 random subsets per N < N_max (seed 0)" in (out / "random.md").read_text()
    assert drawn["rows"]["majority"]["16"] == first["rows"]["majority"]["16"]
    assert drawn["rows"]["pass@N"]["4"][0] > first["rows"]["pass@N"]["4"][0]  # the first 4: the weaker search


def test_subsets_flags_say_which_protocol_takes_them(tmp_path, capsys):
    from ares_rerank.cli import main

    source = write_jsonl(tmp_path / "sal.jsonl", SAL)
    args = ["eval", "--backbone", "claimtrees-oracle",
            "--task", "bon", "--path", str(source), "--methods", "given", "--output-dir", str(tmp_path / "o"),
            "--no-progress"]
    with pytest.raises(SystemExit) as done:
        main(args + ["--subsets", "8"])
    assert done.value.code == 2 and "--subset-count 8" in capsys.readouterr().err
    assert main(args + ["--subsets", "first", "--subset-count", "8"]) == 2
    assert "--subset-count apply to --subsets random only" in capsys.readouterr().err
    assert main(args + ["--subset-count", "0"]) == 2
    assert main(args + ["--subset-count", "8", "--subset-seed", "3", "--name", "r"]) == 0
    results = json.loads((tmp_path / "o" / "r.json").read_text())
    assert (results["subsets"], results["subset_count"], results["seed"]) == ("random", 8, 3)
    with pytest.raises(ValueError, match="subset_count=8"):
        evaluate_bon(load_bon_file(source), None, ["given"], subsets=8, progress=False)


def test_results_written_before_subsets_named_the_protocol_keep_their_caption(tmp_path):
    """Results written before ``--subsets first`` hold the count in ``subsets`` (the committed recipe run's
    ``"subsets": 32``): their table still says how many random subsets."""
    from ares_rerank.evaluation.bon import bon_markdown

    results = evaluate_bon(load_bon_file(write_jsonl(tmp_path / "sal.jsonl", SAL)), None, ["given"], subset_count=8,
                           seed=2, progress=False)
    assert "8 random subsets per N < N_max (seed 2)" in bon_markdown(results)
    old = {key: value for key, value in results.items() if key != "subset_count"}
    assert "32 random subsets per N < N_max (seed 0)" in bon_markdown({**old, "subsets": 32, "seed": 0})

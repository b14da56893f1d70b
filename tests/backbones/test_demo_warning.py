"""No silent demo: the embedded ClaimTrees head warns once, loudly, when it scores text outside its domain (the
reranker, the reward and the filter), naming what to pass instead; other backbones and ClaimTrees text stay quiet."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ares_rerank import AresReranker, AresReward, DemoBackboneWarning, FunctionBackbone, load_backbone
from ares_rerank.backbones.loading import DEFAULT_HEAD_DIR
from ares_rerank.backbones.demo import is_demo_backbone, off_domain_reason


MATH_PROMPT = "A rectangle is 3 m wide and 4.5 m long. What is its area?"
MATH_CANDIDATES = [
    "The area is width times length.\n\n3 * 4.5 = 13.5.\n\nSo the area is 13.5 square meters.",
    "The area is width plus length.\n\n3 + 4.5 = 7.5.\n\nSo the area is 7.5 square meters.",
    "Area = 3 * 4.5 = 12.\n\nThe answer is 12.",
]
RULE = "Rule: A1 -> B1 (meaning that if I have A1, I can derive B1)"
STEP = "I have A1, I use rule (A1 -> B1) to derive B1, now I have B1"


@pytest.fixture(scope="module")
def demo_head():
    return load_backbone("default", device="cpu")


def caught(fn):
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        fn()
    return [r for r in records if issubclass(r.category, DemoBackboneWarning)]


def test_default_head_on_math_warns_once_per_reranker_naming_what_to_pass(demo_head):
    assert is_demo_backbone(demo_head)
    reranker = AresReranker(demo_head, prompt_split="sentences")
    with pytest.warns(DemoBackboneWarning) as record:
        scores = [r["score"] for r in reranker.score(MATH_PROMPT, MATH_CANDIDATES)]
    assert all(s < 0.1 for s in scores)  # the silent failure: near-zero, near-equal scores
    message = str(record[0].message)
    for needed in ("demo head", "ClaimTrees", "load_backbone('Qwen/Qwen2.5-Math-PRM-7B')", "docs/PRMS.md", "judge",
                   "--backbone", "ARES_RERANK_BACKBONE"):
        assert needed in message
    assert caught(lambda: reranker.rank(MATH_PROMPT, MATH_CANDIDATES)) == []  # once per reranker
    reward = AresReward(AresReranker(demo_head, prompt_split="sentences"))  # a new object warns again, once
    assert len(caught(lambda: reward([MATH_PROMPT] * 3, MATH_CANDIDATES))) == 1
    assert caught(lambda: reward([MATH_PROMPT] * 3, MATH_CANDIDATES)) == []


def test_default_head_on_its_own_domain_is_quiet(demo_head):
    reranker = AresReranker(demo_head, step_separator="\n", prompt_split="lines")
    assert caught(lambda: reranker.score(f"{RULE}\nI have A1", [STEP, STEP, STEP])) == []


def fake_demo(value: float, **attributes) -> FunctionBackbone:
    backbone = FunctionBackbone(lambda P, H: [value] * len(H))
    for name, attr in attributes.items():
        setattr(backbone, name, attr)
    return backbone


def test_detection_by_source_or_domain_and_by_pinned_scores_or_math_text():
    assert is_demo_backbone(fake_demo(0.5, source=str(DEFAULT_HEAD_DIR)))
    assert is_demo_backbone(fake_demo(0.5, domain="ClaimTrees rule chains (demo)"))
    assert is_demo_backbone(fake_demo(0.5, calibration={"domain": "claimtrees"}))
    assert not is_demo_backbone(fake_demo(0.5, source="org/math-prm"))
    assert not is_demo_backbone(FunctionBackbone(lambda P, H: [0.5] * len(H)))
    prose = ["We have eggs", "so we have eggs and milk"]
    assert off_domain_reason([prose, prose], [[0.05, 0.02], [0.01, 0.09]]).startswith("every one of the 4 steps")
    assert off_domain_reason([prose], [[0.05, 0.02]]) is None  # one candidate is not enough evidence
    assert off_domain_reason([["x = 2", "so 2x = 4"]], [[0.9, 0.9]]) == "2 of its 2 steps look like math"
    assert off_domain_reason([[STEP, STEP]], [[0.9, 0.9]]) is None
    pinned = AresReranker(fake_demo(0.02, source=str(DEFAULT_HEAD_DIR)))
    assert len(caught(lambda: pinned.score("we have eggs", ["so eggs\n\nso more", "so milk\n\nso tea"]))) == 1
    other = AresReranker(fake_demo(0.02, source="org/math-prm"))  # a real PRM that dislikes everything: no warning
    assert caught(lambda: other.score("x = 1", ["so x + 1 = 2", "so 2x = 2\n\nso x = 1"])) == []


def test_the_filter_warns_through_its_reranker():
    from ares_rerank import AresFilter

    ares_filter = AresFilter(AresReranker(fake_demo(0.5, domain="claimtrees")), threshold=0.5)
    assert len(caught(lambda: ares_filter.keep_mask(["x = 2"] * 2, ["so 2x = 4", "so x + 1 = 3"]))) == 1


def test_the_score_command_says_so_last_on_stderr(tmp_path, capsys):
    """The README's main command with the default head on math text: the scores are printed, then the warning."""
    import json

    from ares_rerank.cli import main

    chains = tmp_path / "math.jsonl"
    steps = ["2x = 7 - 3 = 4", "x = 4 / 2 = 2", "So x = 2"]
    chains.write_text("".join(json.dumps({"id": f"m{i}", "base_claims": ["Solve 2x + 3 = 7."], "steps": steps[i:]})
                              + "\n" for i in range(2)))
    assert main(["score", str(chains), "--backbone", "default", "--no-progress"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("WARNING: ares-rerank score is scoring with the embedded demo head")
    assert "look like math" in err[-1] and "--backbone PATH [--kind prm-qwen|" in err[-1]
    demo = Path(__file__).resolve().parents[2] / "examples" / "claimtrees_demo.jsonl"
    assert main(["score", str(demo), "--backbone", "default", "--no-progress"]) == 0
    assert "WARNING" not in capsys.readouterr().err


def _math_task_file(folder: Path) -> Path:
    """A ProcessBench-format file of arithmetic solutions (the demo head's scores on them mean nothing)."""
    import json

    records = [{"id": f"p{i}", "problem": f"What is {i} + {i}?",
                "steps": [f"{i} + {i} = {2 * i + i % 2}", f"So 2 * {i} = {2 * i + i % 2}."],
                "label": 0 if i % 2 else -1} for i in range(12)]
    path = folder / "math.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_evaluation_api_warns_when_the_demo_head_scores_math(tmp_path):
    """evaluate() scored 90-98% of math steps unsound with the demo head, in silence."""
    from ares_rerank.evaluation import evaluate, load_task

    task = load_task("processbench", path=str(_math_task_file(tmp_path)))
    warned = caught(lambda: evaluate(task, fake_demo(0.05, domain="claimtrees"), ["ares", "entail-prev"],
                                     progress=False))
    assert len(warned) == 1  # once per call, not once per method
    assert str(warned[0].message).startswith(
        "evaluate on ProcessBench-format (math) is scoring with the embedded demo head")
    assert "look like math" in str(warned[0].message)
    assert not caught(lambda: evaluate(task, fake_demo(0.05), ["ares"], progress=False))  # not the demo head


def test_the_eval_command_says_so_last_on_stderr(tmp_path, capsys):
    from ares_rerank.cli import main

    argv = ["eval", "--task", "processbench", "--path", str(_math_task_file(tmp_path)), "--backbone", "default",
            "--methods", "ares", "--output-dir", str(tmp_path / "out"), "--no-progress", "--no-cache"]
    assert main(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "WARNING: evaluate on ProcessBench-format (math) is scoring with the embedded demo head"), err[-3:]
    assert "DemoBackboneWarning" not in "\n".join(err[:-1])  # said once, as a line of ours

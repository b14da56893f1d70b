"""Answer functions under a time bound that holds off the main thread: math-verify in a worker process (its own
signal-based limits work only on a main thread; a call still running past the bound kills the worker), a user
function in a worker thread (one that never returns is an error naming it), and a user function's prints kept out
of the JSONL that ``rank`` writes to standard output.

Every wait here is a hang guard (``join(GUARD)``); nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import threading
import warnings

import pytest

from ares_rerank import FunctionBackbone
from ares_rerank.cli import main
from ares_rerank.rerank import answers
from ares_rerank.rerank.answers import AnswerMatcher
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.utils.bounded import CallTimedOut, WorkerProcess, call_with_timeout

pytest.importorskip("math_verify")

GUARD = 120  # seconds: a hang guard only
HUGE = "So the count is \\boxed{10^{10^{100}}}."
RELEASE = threading.Event()  # lets the never-returning functions below end when the test session does


def sleepy(text: str) -> str:
    """An answer function that never returns (until the test releases it)."""
    RELEASE.wait(3600)
    return text


def chatty(text: str) -> str:
    """An answer function that prints as it reads."""
    print(f"reading a candidate of {len(text)} characters")
    return text.rsplit(" ", 1)[-1].strip(".")


@pytest.fixture(autouse=True, scope="module")
def _release():
    yield
    RELEASE.set()


def in_a_thread(fn, *args):
    """``fn(*args)`` on a worker thread (as a server's handler or an executor runs it): (finished?, result)."""
    box = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 -- shown by the test
            box["error"] = err

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(GUARD)
    return not worker.is_alive(), box


def test_math_verify_on_huge_powers_returns_from_a_worker_thread():
    """math-verify's own timeout needs the main thread: on a thread the comparison of 10^{10^{100}} ran for ever."""
    matcher = AnswerMatcher("math-verify")
    done, box = in_a_thread(matcher.group, [HUGE, "so \\boxed{10^{10^{100}}}", "so \\boxed{3}", "so \\boxed{3.0}"])
    assert done, "math-verify hung on a worker thread"
    groups, shown = box["value"]
    assert groups[2] == groups[3] and groups[0] is not None and groups[0] != groups[2]
    assert shown[2] == "3"


def test_a_weighted_selection_with_math_verify_returns_from_a_worker_thread():
    backbone = FunctionBackbone(lambda premises, hypotheses: [0.9] * len(hypotheses), name="constant")
    reranker = AresReranker(backbone, step_separator="\n\n", selection="weighted", answer_fn="math-verify")
    candidates = [f"We count.\n\n{HUGE}", "We count.\n\nSo \\boxed{3}", "We count again.\n\nSo \\boxed{3}"]
    done, box = in_a_thread(reranker.select, "How many?", candidates)
    assert done, "select hung on a worker thread"
    assert "error" not in box, box.get("error")
    assert box["value"]["answer"] == "3" and box["value"]["index"] in (1, 2)  # two candidates share it: they win


def test_a_math_verify_call_past_the_bound_is_cut_counted_and_warned_about():
    """With a bound below math-verify's own 5 s comparison limit, the worker is killed mid-comparison: unequal,
    counted, said; the next call starts a fresh worker and works."""
    matcher = AnswerMatcher("math-verify", timeout=1.0)
    big, three = matcher.parse(HUGE), matcher.parse("so \\boxed{3}")
    assert big is not None and three is not None
    killed = answers._math_verify().killed
    with pytest.warns(RuntimeWarning, match="did not return within 1 s comparing"):
        assert matcher.same(three, big) is False
    assert matcher.timeouts == 1 and answers._math_verify().killed == killed + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert matcher.same(three, matcher.parse("therefore \\boxed{3.0}")) is True  # a new worker answers


def test_a_user_function_that_never_returns_is_an_error_naming_it():
    matcher = AnswerMatcher(sleepy, timeout=0.5)
    done, box = in_a_thread(matcher.group, ["a", "b"])
    assert done
    assert isinstance(box.get("error"), ValueError)
    message = str(box["error"])
    assert "answer_fn 'sleepy' did not return within 0.5 s" in message and "'a'" in message


def test_rank_with_a_user_function_that_never_returns_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(answers, "DEFAULT_ANSWER_TIMEOUT", 0.5)
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"prompt": "We have a.", "candidates": ["So a.", "Then a."]}) + "\n")
    assert main(["rank", str(path), "--backbone", "test_cli_search:Overlap", "--selection", "majority",
                 "--answer-fn", "test_answer_bounds:sleepy", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ares-rerank rank: error: answer_fn 'sleepy' did not return within 0.5 s")


def test_what_a_user_function_prints_stays_off_the_jsonl_on_stdout(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": "We have a.", "candidates": ["So a.", "Then b.", "So a."]})
                            + "\n" for i in range(3)))
    assert main(["rank", str(path), "--backbone", "test_cli_search:Overlap", "--selection", "majority",
                 "--answer-fn", "test_answer_bounds:chatty", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]  # every line is a record
    assert [r["id"] for r in rows] == [0, 1, 2] and rows[0]["answers"] == ["a", "b", "a"]
    assert "reading a candidate of" in err


def test_the_bounded_helpers():
    assert call_with_timeout(lambda a, b: a + b, (2, 3), 5.0) == 5
    with pytest.raises(CallTimedOut):
        call_with_timeout(sleepy, ("x",), 0.2)
    with pytest.raises(ZeroDivisionError):
        call_with_timeout(lambda: 1 / 0, (), 5.0)
    worker = WorkerProcess("no_such_module_for_ares:fn", "missing")
    with pytest.raises(RuntimeError, match="the missing worker process died as it started .*no_such_module_for_ares"):
        worker.call("op", (), 30.0)
    with pytest.raises(ValueError, match="timeout"):
        AnswerMatcher("standard", timeout=float("nan"))


def slow_to_start(op: str, *args: str) -> str:
    """A worker handler whose set-up (``start_op``) takes longer than the bound its calls get."""
    if op == "start":
        import time

        time.sleep(2.0)  # set-up, as math-verify's imports and grammar on a loaded machine
        return "set up"
    return f"{op}:{args[0]}"


def test_a_worker_s_start_is_not_counted_in_the_bound_of_its_first_call():
    """The first call after a (re)start paid for the child's imports and the handler's set-up: under load a valid
    answer was then cut at a 1 s bound as 'no answer'. start_op runs before the timed call."""
    worker = WorkerProcess("test_answer_bounds:slow_to_start", "slow", start_op="start")
    try:
        assert worker.call("echo", ("a",), 1.0) == "echo:a"
        assert worker.killed == 0
    finally:
        worker.close()

"""AresReward: TRL's reward contract, the documented value of every robustness case, logging through TRL's
callbacks, pickling, and the lazy default ``ares_reward`` (importing loads nothing; the first call loads)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ares_rerank import ClaimTreesOracle, FunctionBackbone
from ares_rerank.rerank import reranker as rerank_module
from ares_rerank import rewards
from ares_rerank.rewards import default as rewards_default
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.rewards import BACKBONE_ENV, AresReward, ares_reward, configure_default, default_reranker


REPO_ROOT = Path(__file__).resolve().parents[2]


def last_word_entailed(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """Module-level (picklable): 1.0 iff the hypothesis' last word occurs in the premises."""
    return [float(h.split()[-1] in " ".join(p).split()) for p, h in zip(premises, hypotheses)]


def soft_overlap(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """Module-level (picklable): the share of the hypothesis' words found in the premises, in [0.1, 0.9]."""
    out = []
    for p, h in zip(premises, hypotheses):
        words, known = h.split(), set(" ".join(p).split())
        out.append(0.1 + 0.8 * sum(w in known for w in words) / len(words))
    return out


@pytest.fixture(autouse=True)
def reset_default():
    configure_default()
    yield
    configure_default()


@pytest.fixture
def reward() -> AresReward:
    return AresReward(AresReranker(FunctionBackbone(last_word_entailed), prompt_split="lines"))


def test_trl_signature_name_and_values(reward):
    assert reward.__name__ == "ares_final"
    values = reward(prompts=["a\nb", "a\nb"], completions=["so b\n\nthen a", "so c"], completion_ids=[[1], [2]],
                    trainer_state=object(), extra_column=["x", "y"])
    assert values == [1.0, 0.0]
    mean = AresReward(reward.reranker, aggregate="mean")
    assert mean.__name__ == "ares_mean"
    assert mean(["a\nb"], ["so b\n\nso c"]) == [0.5]
    baseline = AresReward(AresReranker(reward.reranker.backbone, method="entail-prev"), name="prev")
    assert baseline.__name__ == "prev"
    assert AresReward(AresReranker(reward.reranker.backbone, method="entail-prev")).__name__ == "entail_prev_final"


def test_robustness_cases_documented_values(reward):
    long_step = " ".join(["word"] * 4999 + ["b"])  # one 5,000-word step
    conversational = [{"role": "assistant", "content": "so b\n\nso a"}]
    cases = {
        "empty": ("", None),
        "whitespace only": (" \n\n\t \n", None),
        "no step separator (one step)": ("so b and a so a", 1.0),
        "5,000-word step": (long_step, 1.0),
        "non-string int": (42, None),
        "non-string None": (None, None),
        "conversational": (conversational, 1.0),
        "conversational, non-text content": ([{"role": "assistant", "content": 7}], None),
        "conversational, no assistant turn": ([{"role": "user", "content": "so b"}], None),
        "standard": ("so c", 0.0),
    }
    completions = [c for c, _ in cases.values()]
    values = reward(prompts=["a\nb"] * len(completions), completions=completions)
    assert dict(zip(cases, values)) == {name: expected for name, (_, expected) in cases.items()}
    # Conversational prompts and standard prompts mixed in one call, too.
    mixed_prompts = [[{"role": "user", "content": "a\nb"}], "a\nb", 3.5]
    assert reward(prompts=mixed_prompts, completions=["so b", conversational, "so b"]) == [1.0, 1.0, None]


def test_unscorable_value_and_on_error_raise():
    reranker = AresReranker(FunctionBackbone(last_word_entailed), prompt_split="lines")
    penalize = AresReward(reranker, unscorable_value=0.0)
    assert penalize(["a"], [""]) == [0.0]
    assert penalize(["a"], [None]) == [0.0]
    strict = AresReward(reranker, on_error="raise")
    with pytest.raises(TypeError, match="completion is NoneType"):
        strict(["a"], [None])
    assert strict(["a"], ["  "]) == [None]  # an empty completion is not an error: it has no step
    with pytest.raises(ValueError, match="on_error='ignore'"):
        AresReward(reranker, on_error="ignore")
    with pytest.raises(TypeError, match="must be an AresReranker"):
        AresReward(FunctionBackbone(last_word_entailed))


def test_a_completion_that_cannot_be_read_is_logged_an_empty_one_is_not(reward, caplog):
    """A completion that is not text failed before it had steps, and that failure used to go unlogged."""
    with caplog.at_level("WARNING", logger="ares_rerank.rewards"):
        assert reward(prompts=["a\nb"] * 3, completions=["", 42, "so b"]) == [None, None, 1.0]
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and "could not score 1 of 3 completions (index 1)" in logged[0]


def test_many_unscorable_completions_log_one_line_per_call(caplog):
    """The rule oracle raises on a step it cannot parse: the batch is retried chain by chain, and the reranker and
    the reward each say so once for the whole call, not once per completion."""
    reward = AresReward(AresReranker(ClaimTreesOracle(), step_separator="\n", prompt_split="lines"))
    completions = ["I have AB, I use rule (AB -> CD) to derive CD, now I have CD"] + ["not a ClaimTrees step"] * 12
    with caplog.at_level("WARNING", logger="ares_rerank"):
        rewards = reward(prompts=["I have AB\nRule: AB -> CD (meaning that if I have AB, I can derive CD)"] * 13,
                         completions=completions)
    assert rewards[0] is not None and rewards[1:] == [None] * 12
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(logged) == 2, logged
    assert "12 of them failed" in logged[0] and "could not score 12 of 13 completions" in logged[1]


def test_backbone_that_rejects_a_completion_gives_none_for_it_only():
    # The rule oracle cannot parse a non-ClaimTrees step (it raises): that completion gets None, others are scored.
    reward = AresReward(AresReranker(ClaimTreesOracle(), step_separator="\n", prompt_split="lines"))
    rule = "Rule: A1 -> B1 (meaning that if I have A1, I can derive B1)"
    step = "I have A1, I use rule (A1 -> B1) to derive B1, now I have B1"
    unsupported = "I have B1, I use rule (B1 -> C1) to derive C1, now I have C1"
    long_step = " ".join(["word"] * 5000)
    assert reward([f"{rule}\nI have A1"] * 3, [step, long_step, unsupported]) == [1.0, None, 0.0]


def test_logs_through_trl_callbacks(reward):
    metrics, extras = [], {}
    values = reward(
        prompts=["a\nb"] * 3,
        completions=["so b\n\nso c", "so b", ""],
        log_metric=lambda name, value: metrics.append((name, value)),
        log_extra=lambda column, vals: extras.setdefault(column, []).extend(vals),
    )
    assert values == [0.0, 1.0, None]
    logged = dict(metrics)
    assert logged["ares_final/scored"] == pytest.approx(2 / 3)
    assert logged["ares_final/num_steps"] == pytest.approx(1.5)
    assert logged["ares_final/flagged_frac"] == pytest.approx((1 / 2 + 0) / 2)  # the mean of each chain's fraction
    assert logged["ares_final/evaluations"] == pytest.approx(1.5)
    assert extras == {"ares_final/num_steps": [2, 1, None], "ares_final/first_error": [1, -1, None]}
    quiet = AresReward(reward.reranker, log_stats=False)
    quiet(["a"], ["so a"], log_metric=lambda *a: pytest.fail("logged with log_stats=False"))


def test_picklable_and_values_survive_pickling():
    reward = AresReward(AresReranker(FunctionBackbone(soft_overlap), prompt_split="lines"), aggregate="mean")
    clone = pickle.loads(pickle.dumps(reward))
    args = (["a b\nc"] * 2, ["a b\n\nc d e", "x"])
    assert clone(*args) == reward(*args)
    assert clone.__name__ == reward.__name__
    lazy_clone = pickle.loads(pickle.dumps(ares_reward))
    assert lazy_clone.__name__ == "ares_reward" and lazy_clone.reranker is None


def test_ares_reward_loads_default_lazily_on_first_call(monkeypatch):
    loads = []

    def fake_loader(spec, **kwargs):
        loads.append(spec)
        return FunctionBackbone(last_word_entailed)

    monkeypatch.delenv(BACKBONE_ENV, raising=False)
    monkeypatch.setattr(rerank_module, "_load_backbone", fake_loader)
    assert ares_reward.__name__ == "ares_reward"
    assert not ares_reward.is_loaded and loads == []
    assert ares_reward(prompts=["a b"], completions=["so b"]) == [1.0]
    assert loads == ["default"] and ares_reward.is_loaded
    assert ares_reward(prompts=["a b", "a b"], completions=["so c", "so a"]) == [0.0, 1.0]
    assert loads == ["default"]  # built once, then reused


def test_default_backbone_overrides(monkeypatch):
    loads = []
    monkeypatch.setattr(rerank_module, "_load_backbone", lambda spec, **kw: loads.append(spec) or ClaimTreesOracle())
    monkeypatch.setenv(BACKBONE_ENV, "path/to/head")
    assert default_reranker().backbone.__class__ is ClaimTreesOracle and loads == ["path/to/head"]
    configure_default(FunctionBackbone(last_word_entailed), prompt_split="lines", method="entail-prev")
    assert rewards_default._default is None  # reconfiguring drops the built reranker; nothing loads until the next call
    assert ares_reward(["a\nb"], ["so b"]) == [1.0]
    assert default_reranker().method == "entail-prev" and loads == ["path/to/head"]


def test_importing_rewards_loads_no_model():
    code = (
        "import json, sys\n"
        "import ares_rerank.rewards as r\n"
        "print(json.dumps({'loaded': r.ares_reward.is_loaded, 'transformers': 'transformers' in sys.modules,"
        " 'default': r.default.default_is_built()}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                         timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"loaded": False, "transformers": False, "default": False}


# -- the dotted-path reward's environment (kind, backbone options, aggregate, reranker options) -----------------------
ENV_NAMES = ("ARES_RERANK_BACKBONE", "ARES_RERANK_KIND", "ARES_RERANK_BACKBONE_OPTIONS", "ARES_RERANK_AGGREGATE",
             "ARES_RERANK_RERANKER_OPTIONS")


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_environment_names_kind_options_aggregate_and_reranker_options(clean_env):
    assert ENV_NAMES == (rewards.BACKBONE_ENV, rewards.KIND_ENV, rewards.BACKBONE_OPTIONS_ENV, rewards.AGGREGATE_ENV,
                         rewards.RERANKER_OPTIONS_ENV)
    loads = []

    def fake_loader(spec, **kwargs):
        loads.append((spec, kwargs))
        return FunctionBackbone(last_word_entailed)

    clean_env.setattr(rerank_module, "_load_backbone", fake_loader)
    clean_env.setenv("ARES_RERANK_BACKBONE", "org/math-prm")
    clean_env.setenv("ARES_RERANK_KIND", "prm")
    clean_env.setenv("ARES_RERANK_BACKBONE_OPTIONS", '{"dtype": "bfloat16", "batch_size": 8}')
    clean_env.setenv("ARES_RERANK_AGGREGATE", "mean")
    clean_env.setenv("ARES_RERANK_RERANKER_OPTIONS",
                     '{"prompt_split": "lines", "method": "entail-prev", "config": {"eps": 0.05}}')
    assert ares_reward(["a\nb"], ["so b\n\nso c"]) == [0.5]  # entail-prev, mean of 1.0 and 0.0
    assert loads == [("org/math-prm", {"dtype": "bfloat16", "batch_size": 8, "kind": "prm"})]
    built = default_reranker()
    assert built.method == "entail-prev" and built.aggregate == "mean" and built.config.eps == 0.05
    # configure_default wins over the environment, setting by setting
    configure_default(kind="nli", aggregate="final")
    ares_reward(["a\nb"], ["so b"])
    assert loads[-1] == ("org/math-prm", {"dtype": "bfloat16", "batch_size": 8, "kind": "nli"})
    assert default_reranker().aggregate == "final" and default_reranker().method == "entail-prev"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ARES_RERANK_KIND", "cross-encoder",
         r"ARES_RERANK_KIND='cross-encoder' is unknown: use one of \[.*'judge'.*'nli'"),
        ("ARES_RERANK_BACKBONE_OPTIONS", "{dtype: bf16}", "ARES_RERANK_BACKBONE_OPTIONS=.* is not valid JSON"),
        ("ARES_RERANK_BACKBONE_OPTIONS", "[1, 2]", "is a JSON list, not an object"),
        ("ARES_RERANK_BACKBONE_OPTIONS", '{"kind": "prm"}', "has a 'kind' key: set ARES_RERANK_KIND instead"),
        ("ARES_RERANK_AGGREGATE", "median", r"ARES_RERANK_AGGREGATE='median' is unknown: use one of \['final'"),
        ("ARES_RERANK_RERANKER_OPTIONS", '{"backbone": "x"}', r"unknown keys \['backbone'\]: use \['method'"),
        ("ARES_RERANK_RERANKER_OPTIONS", '{"config": {"eps": 7}}', "'config' is not a valid AresConfig"),
        # were accepted here and failed at the first reward call without naming the variable
        ("ARES_RERANK_RERANKER_OPTIONS", '{"batch_size": 0}', r"ARES_RERANK_RERANKER_OPTIONS=.*batch_size=0"),
        ("ARES_RERANK_RERANKER_OPTIONS", '{"method": "foo"}', r"ARES_RERANK_RERANKER_OPTIONS=.*method='foo'"),
    ],
)
def test_bad_environment_values_are_errors_naming_the_variable(clean_env, name, value, message):
    clean_env.setenv(name, value)
    clean_env.setattr(rerank_module, "_load_backbone", lambda spec, **kw: pytest.fail("loaded despite a bad setting"))
    with pytest.raises(ValueError, match=message):
        rewards.settings_from_env()
    with pytest.raises(ValueError, match=message):  # the first reward call raises: a configuration error
        ares_reward(["a"], ["so a"])


# -- async rewards: TRL awaits them together; the blocking scoring runs in a thread ----------------------------------
class MeetingBackbone:
    """Waits (on its first call) until the other backbone of the pair is inside its own call too, and records the
    interval it spent: the two calls must run at the same time, or the barrier times out (BrokenBarrierError)."""

    def __init__(self, barrier, intervals: list) -> None:
        self.barrier, self.intervals = barrier, intervals

    def entailment_probs(self, premises, hypotheses):
        import time

        start = time.monotonic()
        self.barrier.wait()
        self.intervals.append((start, time.monotonic()))
        return last_word_entailed(premises, hypotheses)


def test_two_async_rewards_overlap_in_time():
    import asyncio
    import inspect
    import threading

    barrier, intervals = threading.Barrier(2, timeout=30), []
    first = rewards.AsyncAresReward(AresReranker(MeetingBackbone(barrier, intervals), prompt_split="lines"), name="a")
    second = rewards.AsyncAresReward(AresReranker(MeetingBackbone(barrier, intervals), prompt_split="lines"), name="b")
    assert inspect.iscoroutinefunction(type(first).__call__)  # what TRL's is_async_callable looks at

    async def both():
        return await asyncio.gather(first(["a\nb"] * 2, ["so b", "so c"]), second(["a\nb"], ["so a"]))

    assert asyncio.run(both()) == [[1.0, 0.0], [1.0]]
    (s1, e1), (s2, e2) = intervals
    assert s1 < e2 and s2 < e1  # the recorded intervals overlap: both backbones were inside a call together


def test_async_reward_values_logging_and_pickling_match_the_sync_reward():
    import asyncio

    reranker = AresReranker(FunctionBackbone(soft_overlap), prompt_split="lines")
    sync, async_ = AresReward(reranker, aggregate="mean"), rewards.AsyncAresReward(reranker, aggregate="mean")
    args = (["a b\nc"] * 3, ["a b\n\nc d e", "x", ""])
    metrics = []
    values = asyncio.run(async_(*args, log_metric=lambda name, value: metrics.append(name)))
    assert values == sync(*args) and values[2] is None
    assert "ares_mean/scored" in metrics and async_.__name__ == "ares_mean"
    clone = pickle.loads(pickle.dumps(async_))
    assert asyncio.run(clone(*args)) == values
    assert rewards.async_ares_reward.__name__ == "ares_reward_async" and not rewards.async_ares_reward.is_loaded


def test_a_custom_aggregate_that_fails_leaves_the_completion_unscored_not_the_call():
    """AresReward never raises for one completion: an aggregate's IndexError escaped it, as a bare IndexError."""
    from ares_rerank import AresReranker, AresReward, FunctionBackbone

    reranker = AresReranker(FunctionBackbone(lambda P, H: [0.9] * len(H)), aggregate=lambda s: s[1])
    reward = AresReward(reranker)
    rewards = reward(["p", "p"], ["one step", "one step\n\ntwo steps"])
    assert rewards[0] is None and rewards[1] == pytest.approx(0.9)
    with pytest.raises(ValueError, match=r"aggregate=<function .*> raised IndexError: list index out of range"):
        reranker.score("p", ["one step"])


def test_configure_default_checks_the_reranker_keywords_when_called(clean_env):
    with pytest.raises(TypeError, match="configure_default: .*unexpected keyword argument 'foo'"):
        configure_default(foo=1)  # was accepted, then failed at the first reward call of a training run
    with pytest.raises(ValueError, match="batch_size=0"):
        configure_default(batch_size=0)
    configure_default(method="prm-chain")  # a whole-chain method: its backbone is checked when it is loaded


def test_the_backbone_lock_registry_lets_dead_backbones_go():
    """Locks were kept by id() forever: the registry grew with every backbone scored, and a new object reusing an
    old id() inherited its lock (found by an audit)."""
    import gc
    import weakref

    backbone = FunctionBackbone(last_word_entailed)
    lock = rewards.backbone_lock(backbone)
    assert rewards.backbone_lock(backbone) is lock
    alive, before = weakref.ref(backbone), len(rewards_default._backbone_locks)
    del backbone, lock
    gc.collect()
    assert alive() is None  # the registry held no reference to it
    assert len(rewards_default._backbone_locks) <= before - 1  # its entry went with it (others may have too)

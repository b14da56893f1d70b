"""AresReranker: score / rank / select, aggregates, batching (one backbone call per step wave), baselines by name,
conversational input, error isolation, and the ClaimTrees oracle reranking experiment (ARES vs Entail-Prev)."""

from __future__ import annotations

import random

import pytest

from ares_rerank import AresConfig, ClaimTreesOracle, FunctionBackbone, sample_size
from ares_rerank.rerank import reranker as rerank_module
from ares_rerank.aggregate import AGGREGATES, aggregate_scores, get_aggregate
from ares_rerank.data.claimtrees import claimtrees_vanilla
from ares_rerank.rerank.reranker import AresReranker, message_text, resolve_backbone


def last_word_entailed(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """1.0 iff the hypothesis' last word occurs in the premises: "so b" follows from "b", "so c" does not."""
    return [float(h.split()[-1] in " ".join(p).split()) for p, h in zip(premises, hypotheses)]


class CountingBackbone:
    """Counts calls and pairs; delegates to :func:`last_word_entailed`."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def entailment_probs(self, premises, hypotheses):
        self.calls.append(len(hypotheses))
        return last_word_entailed(premises, hypotheses)


@pytest.fixture
def reranker() -> AresReranker:
    return AresReranker(FunctionBackbone(last_word_entailed), prompt_split="lines")


def test_score_records_have_steps_tau_score_and_certificate(reranker):
    # Prompt claims "a", "b". Candidate 0: "so b" (entailed) then "so b" -> sound. Candidate 1: "so c" (not entailed),
    # then "thus c": ARES judges it on accepted claims only ("so c" was rejected) -> 0 even though "c" was said.
    records = reranker.score("a\nb", ["so b\n\nthen b", "so c\n\nthus c"])
    assert [r["index"] for r in records] == [0, 1]
    assert records[0]["steps"] == ["so b", "then b"]
    assert records[0]["step_scores"] == [1.0, 1.0] and records[0]["score"] == 1.0
    assert records[1]["step_scores"] == [0.0, 0.0] and records[1]["score"] == 0.0
    assert records[0]["first_error"] == -1 and records[1]["first_error"] == 0
    cert = records[0]["certificate"]
    assert cert["method"] == "ares" and cert["mode"] == "exact" and cert["error_bounds"] == [0.0, 0.0]
    assert cert["evaluations"] == 2
    assert records[0]["error"] is None


def test_rank_sorts_best_first_ties_by_index_unscorable_last(reranker):
    completions = ["so c", "", "so b", "so a", "   "]
    ranked = reranker.rank("a\nb", completions)
    assert [r["index"] for r in ranked] == [2, 3, 0, 1, 4]  # 2 and 3 tie at 1.0: lower index first
    assert [r["score"] for r in ranked] == [1.0, 1.0, 0.0, None, None]
    assert ranked[0]["text"] == "so b"
    top = reranker.rank("a\nb", completions, top_k=2, return_documents=False)
    # CrossEncoder.rank's corpus_id, with index kept as its alias
    assert top == [{"corpus_id": 2, "index": 2, "score": 1.0}, {"corpus_id": 3, "index": 3, "score": 1.0}]


def test_select_returns_the_best_record(reranker):
    assert reranker.select("a\nb", ["so c", "so b"]) == {"corpus_id": 1, "index": 1, "score": 1.0, "text": "so b"}
    with pytest.raises(ValueError, match="nothing to select"):
        reranker.select("a\nb", [])
    assert reranker.rank("a\nb", []) == []


def test_aggregates_final_mean_min_product_and_callable():
    # Steps: "so b" (1.0), "so c" (0.0 -> rejected), "so b" (1.0): final 1, mean 2/3, min 0, product 0.
    backbone = FunctionBackbone(last_word_entailed)
    reranker = AresReranker(backbone, prompt_split="lines")
    completion = "so b\n\nso c\n\nso b"
    expected = {"final": 1.0, "mean": 2 / 3, "min": 0.0, "product": 0.0}
    for name, value in expected.items():
        assert reranker.score("a\nb", [completion], aggregate=name)[0]["score"] == pytest.approx(value)
    assert set(AGGREGATES) == set(expected)
    second = reranker.score("a\nb", [completion], aggregate=lambda s: s[1])[0]["score"]
    assert second == 0.0
    assert aggregate_scores([0.5, 0.2], "product") == pytest.approx(0.1)
    with pytest.raises(ValueError, match="aggregate='median' is unknown"):
        get_aggregate("median")
    with pytest.raises(TypeError, match="aggregate must be a name"):
        get_aggregate(3)
    with pytest.raises(ValueError, match="finite"):
        aggregate_scores([0.5], lambda s: float("nan"))
    with pytest.raises(ValueError, match="nothing to aggregate"):
        aggregate_scores([], "final")
    for name in ("min", "final", "mean"):  # min() skipped a NaN step silently
        with pytest.raises(ValueError, match=r"holds nan at step 1 \(1 non-finite in all\)"):
            aggregate_scores([0.5, float("nan"), 0.9], name)


def test_many_prompts_one_backbone_call_per_step_wave():
    backbone = CountingBackbone()
    reranker = AresReranker(backbone, prompt_split="lines")
    prompts = ["a\nb", "x\ny", "p"]
    candidates = [
        ["so b\n\nso a\n\nso b", "so c\n\nso b"],  # 3 and 2 steps
        ["so y", "so z\n\nso x\n\nso y\n\nso x"],  # 1 and 4 steps
        ["so p\n\nso p"],
    ]
    batched = reranker.score_batch(prompts, candidates)
    # Exact mode with a 0/1 backbone keeps one mask per chain and step: one call per wave, 4 waves (longest chain).
    assert len(backbone.calls) == 4
    assert backbone.calls[0] == 5  # the first step of all five chains in one call
    single = [reranker.score(p, c) for p, c in zip(prompts, candidates)]
    assert [[r["score"] for r in g] for g in batched] == [[r["score"] for r in g] for g in single]
    assert [[r["index"] for r in g] for g in batched] == [[0, 1], [0, 1], [0]]


def test_baselines_by_name_one_call_and_underscores_accepted():
    backbone = CountingBackbone()
    reranker = AresReranker(backbone, method="entail_prev", prompt_split="lines")
    assert reranker.method == "entail-prev"
    records = reranker.score("a\nb", ["so c\n\nthus c", "so b\n\nthen b"])
    # Entail-Prev reads all earlier steps, so "thus c" is entailed by the (unsound) "so c": final step 1.0.
    assert [r["score"] for r in records] == [1.0, 1.0]
    assert [r["step_scores"] for r in records] == [[0.0, 1.0], [1.0, 1.0]]
    assert records[0]["certificate"]["method"] == "entail-prev"
    assert len(backbone.calls) == 1
    with pytest.raises(ValueError, match=r"method=.judge-me.\) is unknown"):
        AresReranker(backbone, method="judge-me")


def test_conversational_prompts_and_completions(reranker):
    prompt = [{"role": "system", "content": "ignored z"}, {"role": "user", "content": "a\nb"}]
    completion = [{"role": "assistant", "content": "so b\n\nthen b"}]
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "so z"}, {"type": "image"}]}]
    records = reranker.score(prompt, [completion, "so b", parts])
    assert [r["score"] for r in records] == [1.0, 1.0, 0.0]  # the system turn is not a base claim by default
    assert records[0]["text"] is completion
    with_system = AresReranker(reranker.backbone, prompt_split="lines", prompt_roles=("system", "user"))
    assert with_system.score(prompt, [parts])[0]["score"] == 1.0
    assert message_text(completion, ("assistant",)) == "so b\n\nthen b"
    with pytest.raises(TypeError, match="pass a string or a list"):
        message_text(42, ("user",), "completion")
    with pytest.raises(TypeError, match="one conversation .* not a list of candidates"):
        reranker.rank(prompt, completion)


def test_bad_input_raises_by_default_and_is_isolated_with_on_error_none(reranker):
    with pytest.raises(TypeError, match="completion is int"):
        reranker.score("a", [42])
    with pytest.raises(TypeError, match="got a string"):
        reranker.score_batch("a", [["so a"]])
    with pytest.raises(ValueError, match="2 prompts for 1 completions"):
        reranker.score_pairs(["a", "b"], ["so a"])
    records = reranker.score_pairs(["a\nb"] * 3, ["so b", 42, None], on_error="none")
    assert [r["score"] for r in records] == [1.0, None, None]
    assert "completion is int" in records[1]["error"]
    with pytest.raises(ValueError, match="on_error='skip'"):
        reranker.score_pairs(["a"], ["so a"], on_error="skip")


def test_backbone_failure_on_one_chain_spares_the_others():
    def picky(premises, hypotheses):
        if any("boom" in h for h in hypotheses):
            raise RuntimeError("cannot judge boom")
        return last_word_entailed(premises, hypotheses)

    reranker = AresReranker(FunctionBackbone(picky), prompt_split="lines")
    with pytest.raises(RuntimeError, match="cannot judge boom"):
        reranker.score_pairs(["a\nb"] * 2, ["so b", "boom b"])
    records = reranker.score_pairs(["a\nb"] * 3, ["so b", "boom b", "so c"], on_error="none")
    assert [r["score"] for r in records] == [1.0, None, 0.0]
    assert records[1]["error"] == "RuntimeError: cannot judge boom"


def test_constructor_validation_and_backbone_specs(monkeypatch):
    backbone = FunctionBackbone(last_word_entailed)
    with pytest.raises(ValueError, match="prompt_split='words'"):
        AresReranker(backbone, prompt_split="words")
    with pytest.raises(ValueError, match="step_separator=''"):
        AresReranker(backbone, step_separator="")
    with pytest.raises(TypeError, match="AresConfig"):
        AresReranker(backbone, config={"eps": 0.1})
    with pytest.raises(TypeError, match="no entailment_probs"):
        resolve_backbone(object())
    loaded = []
    monkeypatch.setattr(rerank_module, "_load_backbone", lambda spec, **kw: loaded.append((spec, kw)) or backbone)
    reranker = AresReranker("some/checkpoint")
    assert reranker.backbone is backbone and loaded == [("some/checkpoint", {})]


def test_backbone_specs_go_through_load_backbone(tiny_nli_path):
    assert isinstance(AresReranker("claimtrees-oracle").backbone, ClaimTreesOracle)
    # A real (tiny, untrained) entailment head loaded from a path: scores are probabilities, one per candidate.
    reranker = AresReranker(str(tiny_nli_path), prompt_split="sentences", aggregate="mean")
    records = reranker.score("Let x = 3. Then 2x = 6.", ["So x + 1 = 4.\n\nThe answer is 5.", "The answer is 5."])
    assert [len(r["step_scores"]) for r in records] == [2, 1]
    assert all(0.0 <= s <= 1.0 for r in records for s in r["step_scores"])
    ranked = reranker.rank("Let x = 3. Then 2x = 6.", ["So x + 1 = 4.\n\nThe answer is 5.", "The answer is 5."])
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in records), reverse=True)


def test_sample_mode_certificate_reported():
    half = FunctionBackbone(lambda P, H: [0.5] * len(H))
    reranker = AresReranker(half, config=AresConfig(mode="sample", eps=0.1, delta=0.1))
    (record,) = reranker.score("p", ["s1\n\ns2"])
    cert = record["certificate"]
    assert cert["mode"] == "sample" and cert["eps"] == 0.1 and cert["delta"] == 0.1
    assert cert["num_samples"] == sample_size(2, 0.1, 0.1)
    assert record["step_scores"][0] == pytest.approx(0.5)


# -- the oracle reranking experiment ----------------------------------------------------------------------------------
def claimtrees_reranking_problem(idx: int, length: int = 10) -> tuple[str, list[str], int]:
    """One ClaimTrees-L prompt with 4 candidates: the sound chain and 3 chains that each skip one rule application
    (a deleted step at a different depth), in a seeded order. Returns (prompt, candidates, index of the sound one).

    The prompt is every base claim of the complete problem (the generator's claims plus the claim it deleted), one
    per line, so ``prompt_split="lines"`` recovers exactly those claims; candidates join steps with newlines.
    """
    example = claimtrees_vanilla(idx, length)
    base = list(example.base_claims)
    base.insert(random.Random(idx).randint(0, len(base)), example.meta["deleted_claim"])
    steps = list(example.steps)
    # Skipping the last step would leave a sound (if unfinished) chain: delete among the first L - 2 steps.
    depths = sorted(random.Random(idx + 1).sample(range(length - 2), 3))
    chains = [steps] + [steps[:d] + steps[d + 1 :] for d in depths]
    order = list(range(len(chains)))
    random.Random(idx + 2).shuffle(order)
    return "\n".join(base), ["\n".join(chains[o]) for o in order], order.index(0)


def test_oracle_reranking_ares_final_always_picks_the_sound_chain_entail_prev_does_not():
    problems = [claimtrees_reranking_problem(i) for i in range(50)]
    prompts, candidates, gold = (list(x) for x in zip(*problems))
    results = {}
    for method in ("ares", "entail-prev"):
        reranker = AresReranker(ClaimTreesOracle(), method=method, step_separator="\n", prompt_split="lines")
        assert reranker.to_chain(prompts[0], candidates[0][0]).num_base == 10  # 9 rules + the fact, re-split exactly
        selected = reranker.select_batch(prompts, candidates, aggregate="final")
        ranked = reranker.rank_batch(prompts, candidates, aggregate="final")
        picked = sum(s["index"] == g for s, g in zip(selected, gold)) / len(gold)
        strict = sum(r[0]["index"] == g and r[0]["score"] > r[1]["score"] for r, g in zip(ranked, gold)) / len(gold)
        results[method] = (picked, strict)
    print(
        f"\nClaimTrees-10, 50 prompts x 4 candidates, final-step selection with the rule oracle: "
        f"ARES picks the sound chain {results['ares'][0]:.2f} (strictly best {results['ares'][1]:.2f}); "
        f"Entail-Prev {results['entail-prev'][0]:.2f} (strictly best {results['entail-prev'][1]:.2f}; "
        "ties -> lower index)"
    )
    assert results["ares"] == (1.0, 1.0)
    # Entail-Prev gives the final step of every candidate 1.0 unless the skipped step is the one right before it:
    # the sound chain is never strictly best, and tie-breaking by position picks it only by chance.
    assert results["entail-prev"][1] < 0.2
    assert results["entail-prev"][0] < 0.6


# -- CrossEncoder-shaped surfaces: corpus_id, return_documents, batch_size, show_progress_bar --------------------------
def test_rank_records_carry_corpus_id_with_index_as_alias(reranker):
    ranked = reranker.rank("a\nb", ["so c", "so b"])
    assert ranked == [{"corpus_id": 1, "index": 1, "score": 1.0, "text": "so b"},
                      {"corpus_id": 0, "index": 0, "score": 0.0, "text": "so c"}]
    assert list(ranked[0]) == ["corpus_id", "index", "score", "text"]  # CrossEncoder.rank's keys, in its order
    bare = reranker.rank_batch(["a\nb"], [["so c", "so b"]], return_documents=False)[0]
    assert [set(r) for r in bare] == [{"corpus_id", "index", "score"}] * 2


def test_batch_size_sets_chains_per_estimator_call_and_leaves_scores_unchanged():
    backbone = CountingBackbone()
    prompts = ["a\nb", "x\ny", "p"]
    candidates = [["so b\n\nso a", "so c"], ["so y", "so z\n\nso x"], ["so p"]]
    whole = AresReranker(backbone, prompt_split="lines", batch_size=None).score_batch(prompts, candidates)
    assert backbone.calls == [5, 2]  # one estimator call: one backbone call per step wave of all five chains
    backbone.calls.clear()
    chunked = AresReranker(backbone, prompt_split="lines", batch_size=2).score_batch(prompts, candidates)
    assert backbone.calls == [2, 1, 2, 1, 1]  # chunks of 2, 2 and 1 chains, each with its own waves
    assert [[r["step_scores"] for r in g] for g in chunked] == [[r["step_scores"] for r in g] for g in whole]
    backbone.calls.clear()
    AresReranker(backbone, prompt_split="lines").score_batch(prompts, candidates, batch_size=1)  # per-call override
    assert len(backbone.calls) == 7
    with pytest.raises(ValueError, match=r"AresReranker\(batch_size=0\) must be a positive int"):
        AresReranker(backbone, batch_size=0)
    with pytest.raises(ValueError, match=r"score_pairs\(batch_size=-1\)"):
        AresReranker(backbone).score_pairs(["a"], ["so a"], batch_size=-1)
    with pytest.raises(TypeError, match="show_progress_bar='yes'"):
        AresReranker(backbone, show_progress_bar="yes")


def test_progress_bar_for_long_calls_off_by_flag(reranker, capsys):
    prompts, candidates = ["a\nb"] * 3, [["so b", "so c"]] * 3
    reranker.score_batch(prompts, candidates)  # one batch (default 64 chains): no bar
    assert "scoring" not in capsys.readouterr().err
    reranker.score_batch(prompts, candidates, batch_size=2)  # three batches: a bar over the six chains
    assert "scoring (ares)" in capsys.readouterr().err.replace("\r", "\n")
    quiet = AresReranker(reranker.backbone, prompt_split="lines", batch_size=2, show_progress_bar=False)
    quiet.rank_batch(prompts, candidates)
    assert capsys.readouterr().err == ""
    quiet.select("a\nb", ["so b", "so c"], show_progress_bar=True)
    assert "2/2" in capsys.readouterr().err
    chains = [reranker.to_chain("a\nb", c) for c in ("so b", "so c", "so a")]
    from ares_rerank import score_chains

    assert [s.step_scores for s in score_chains(chains, reranker.backbone, batch_size=1, show_progress_bar=True)] == [
        s.step_scores for s in score_chains(chains, reranker.backbone)
    ]
    assert "3/3" in capsys.readouterr().err


def test_a_reasoning_models_chain_is_scored_and_unknown_message_shapes_are_named():
    """TRL parses a reasoning model's <think> part into reasoning_content: that is the chain to score, not only the
    final answer in content. A conversation without the expected roles was read as an empty completion."""
    seen = []

    def record(premises, hypotheses):
        seen.extend(hypotheses)
        return [0.9] * len(hypotheses)

    reranker = AresReranker(FunctionBackbone(record))
    completion = [{"role": "assistant", "reasoning_content": "x is 3.\n\nSo 2x is 6.", "content": "The answer is 6."}]
    reranker.score("x is 3", [completion])
    assert list(dict.fromkeys(seen)) == ["x is 3.", "So 2x is 6.", "The answer is 6."]
    tool_call = [{"role": "assistant", "content": None, "tool_calls": [{"name": "f"}]},
                 {"role": "assistant", "content": ["2x is 6.", {"type": "text", "text": "Done."}]}]
    assert message_text(tool_call, ("assistant",)) == "2x is 6.\nDone."
    with pytest.raises(ValueError, match=r"no message of the roles \['assistant'\] \(its roles: \['model'\]\)"):
        message_text([{"role": "model", "content": "so y is 3"}], ("assistant",), "completion")
    with pytest.raises(TypeError, match=r"a message without a 'role' \(keys \['from', 'value'\]\)"):
        message_text([{"from": "gpt", "value": "so y is 3"}], ("assistant",), "completion")
    [record_] = reranker.score("p", [[{"role": "model", "content": "so y is 3"}]], on_error="none")
    assert record_["score"] is None and "no message of the roles" in record_["error"]


def test_on_error_none_keeps_the_other_candidates_and_an_outage_is_not_retried_chain_by_chain():
    from ares_rerank.backbones.served import ServerError

    def picky(premises, hypotheses):
        if any("poison" in h for h in hypotheses):
            raise ValueError("this step cannot be scored")
        return [0.9] * len(hypotheses)

    reranker = AresReranker(FunctionBackbone(picky))
    with pytest.raises(ValueError, match="cannot be scored"):
        reranker.rank("p", ["a fine step", "a poison step"])
    ranked = reranker.rank("p", ["a poison step", "a fine step"], on_error="none")
    assert [r["index"] for r in ranked] == [1, 0] and ranked[1]["score"] is None
    assert "cannot be scored" in ranked[1]["error"]

    calls = []

    def down(premises, hypotheses):
        calls.append(len(hypotheses))
        raise ServerError("connection refused", url="http://127.0.0.1:9/v1", status=None)

    records = AresReranker(FunctionBackbone(down)).score("p", ["s1", "s2", "s3", "s4"], on_error="none")
    assert [r["score"] for r in records] == [None] * 4 and "connection refused" in records[0]["error"]
    assert len(calls) == 1  # one wave failed; four more waves would each have waited for the server


def test_a_whole_chain_method_needs_a_whole_chain_backbone_at_construction():
    with pytest.raises(TypeError, match="method='prm-chain' needs a backbone that scores a whole chain"):
        AresReranker(FunctionBackbone(lambda P, H: [0.5] * len(H)), method="prm-chain")

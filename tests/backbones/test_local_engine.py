"""The local generative-verifier engine shares a prompt's states: its samples continue from one pass over the prompt,
and the verdict reads of one prompt's samples run the prompt once per batch. The results must be those of running
every row whole (greedy generations identical; log-probabilities within float32 noise), and the token positions that
reach the model must show the saving (counted with a forward hook, not timed).
"""

from __future__ import annotations

import pytest
import torch

from ares_rerank.backbones.generative import LocalEngine, LogprobQuery, Sampling


@pytest.fixture(scope="module")
def model_and_tokenizer():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from verifier_mirrors import qwen25_tokenizer

    torch.set_num_threads(1)
    tok = qwen25_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return Qwen2ForCausalLM(config).eval(), tok


class PositionCounter:
    """Counts the input positions (batch rows x sequence length) of every forward of ``model``."""

    def __init__(self, model):
        self.positions = 0
        self.handle = model.model.embed_tokens.register_forward_hook(self.hook)

    def hook(self, module, args, output):
        self.positions += args[0].numel()

    def close(self):
        self.handle.remove()


PROMPT = "Question: Janet has 16 eggs and eats 3. Previous steps: 16 - 3 = 13. Step to verify: 13 * 2 = 26."


def test_greedy_samples_equal_the_whole_run_and_the_prompt_runs_once(model_and_tokenizer):
    model, tok = model_and_tokenizer
    engine = LocalEngine(model, tok, seed=0)
    ids = engine.encode(PROMPT)
    sampling = Sampling(temperature=0.0, max_tokens=5)
    counter = PositionCounter(model)
    try:
        got = engine.generate(PROMPT, 4, sampling)
    finally:
        counter.close()
    with torch.inference_mode():  # the reference: the stock generate on the prompt alone, no cache given
        whole = model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               max_new_tokens=5, do_sample=False, pad_token_id=engine.pad_id)
    expected = whole[0, len(ids):].tolist()
    assert all(g.token_ids == expected[: len(g.token_ids)] for g in got) and got[0].token_ids
    # the prompt but its last token once, then 4 rows of the last prompt token and 4 of each new token but the last
    assert counter.positions <= (len(ids) - 1) + 4 * 5
    assert counter.positions < 4 * len(ids)  # what expanding the prompt to 4 rows would cost


def test_sampled_rows_differ_and_are_reproducible(model_and_tokenizer):
    model, tok = model_and_tokenizer
    sampling = Sampling(temperature=1.0, max_tokens=6)
    a, b = LocalEngine(model, tok, seed=3), LocalEngine(model, tok, seed=3)
    first = [g.token_ids for g in a.generate(PROMPT, 6, sampling)]
    assert first == [g.token_ids for g in b.generate(PROMPT, 6, sampling)]
    assert len({tuple(t) for t in first}) > 1  # the rows sample independently from the shared prompt states


def test_reads_of_one_prompt_share_it_and_equal_whole_runs(model_and_tokenizer):
    model, tok = model_and_tokenizer
    engine = LocalEngine(model, tok, seed=0, batch_size=8)
    ids = engine.encode(PROMPT)
    tails = [engine.encode(t) for t in (" yes it holds", " no", " the product is 26 so", " wrong")]
    queries = [LogprobQuery(ids + tail, token) for tail in tails for token in (10, 11)]  # two reads per context
    queries.append(LogprobQuery(engine.encode("Another prompt entirely"), 12))
    counter = PositionCounter(model)
    try:
        answers = engine.logprobs(queries, top=5)
    finally:
        counter.close()
    with torch.inference_mode():
        for query, answer in zip(queries, answers):
            logp = torch.log_softmax(model(input_ids=torch.tensor([query.context])).logits[0, -1], dim=-1)
            assert answer.logprob == pytest.approx(float(logp[query.token]), abs=1e-5)
            values, index = torch.topk(logp, 5)
            assert list(answer.top) == index.tolist()
            assert list(answer.top.values()) == pytest.approx(values.tolist(), abs=1e-5)
    whole = sum(len(q.context) for q in queries)
    distinct = sum(len(ids) + len(t) for t in tails) + len(queries[-1].context)
    # the shared prompt once and the four tails (padded to the longest), the other prompt whole: far under either
    assert counter.positions <= len(ids) + 4 * max(len(t) for t in tails) + 4 + len(queries[-1].context)
    assert counter.positions < distinct < whole


OTHER = "Question: a train goes 60 km in 1.5 hours. Step to verify: its speed is 40 km/h."


def test_prompts_sampled_together_equal_each_alone_and_each_runs_once(model_and_tokenizer):
    model, tok = model_and_tokenizer
    engine = LocalEngine(model, tok, seed=0)
    sampling = Sampling(temperature=0.0, max_tokens=5)
    prompts = [(PROMPT, 3), (OTHER, 2), ("Short one.", 1)]
    alone = [engine.generate(p, n, sampling) for p, n in prompts]
    calls = engine.calls
    counter = PositionCounter(model)
    try:
        together = engine.generate_many(prompts, sampling)
    finally:
        counter.close()
    assert engine.calls == calls + 1  # one generate call for the three prompts' six rows
    assert [[g.token_ids for g in gs] for gs in together] == [[g.token_ids for g in gs] for gs in alone]
    assert all(len(gs) == n for gs, (_, n) in zip(together, prompts))
    lengths = [len(engine.encode(p)) for p, _ in prompts]
    # each prompt but its last token once, then the six rows' last prompt token and new tokens (padded rows count)
    assert counter.positions <= sum(length - 1 for length in lengths) + 6 * 5
    small = LocalEngine(model, tok, seed=0, generate_rows=3)  # the rows bound splits the call: 3 + (2 + 1)
    assert [[g.token_ids for g in gs] for gs in small.generate_many(prompts, sampling)] == [
        [g.token_ids for g in gs] for gs in alone]
    assert small.calls == 2


def test_sampled_prompts_together_draw_independent_rows(model_and_tokenizer):
    model, tok = model_and_tokenizer
    engine = LocalEngine(model, tok, seed=1)
    out = engine.generate_many([(PROMPT, 4), (OTHER, 4)], Sampling(temperature=1.0, max_tokens=6))
    rows = [tuple(g.token_ids) for gs in out for g in gs]
    assert len(set(rows)) > 2 and all(len(gs) == 4 for gs in out)
    with pytest.raises(ValueError, match="generate_rows"):
        LocalEngine(model, tok, generate_rows=0)


def test_a_budget_per_request_cuts_each_row_where_its_own_budget_ends(model_and_tokenizer):
    model, tok = model_and_tokenizer
    sampling = Sampling(temperature=1.0, max_tokens=6)
    prompts = [(PROMPT, 2), (OTHER, 2), ("Short one.", 1)]
    whole = LocalEngine(model, tok, seed=4).generate_many(prompts, sampling)
    engine = LocalEngine(model, tok, seed=4)  # the same seeded draw: the call samples up to the largest budget
    cut = engine.generate_many(prompts, sampling, max_tokens=[6, 3, 0])
    assert engine.calls == 1
    assert [g.token_ids for g in cut[0]] == [g.token_ids for g in whole[0]]
    assert [g.token_ids for g in cut[1]] == [g.token_ids[:3] for g in whole[1]]
    assert [g.text for g in cut[1]] == [tok.decode(g.token_ids[:3], skip_special_tokens=True) for g in whole[1]]
    assert [(g.text, g.token_ids) for g in cut[2]] == [("", [])]
    for bad in ([6, 3], [6, 3, -1], [6, 3, 1.5]):
        with pytest.raises(ValueError, match="max_tokens=.*one whole number >= 0 per request"):
            engine.generate_many(prompts, sampling, max_tokens=bad)


def test_a_one_stage_verifier_samples_all_its_inputs_in_one_call_and_counts_it(model_and_tokenizer):
    from ares_rerank.backbones.generative import GenerativeVerifier

    model, tok = model_and_tokenizer
    engine = LocalEngine(model, tok, seed=0, batch_size=64)
    verifier = GenerativeVerifier(engine, sampling=Sampling(temperature=1.0, max_tokens=4), use_chat_template=False)
    generated = []
    inner = engine.sample_rows
    engine.sample_rows = lambda prompts, counts, sampling, budgets=None: generated.append(list(counts)) or inner(
        prompts, counts, sampling, budgets)
    premises = [["Janet has 16 eggs."], ["Janet has 16 eggs.", "She eats 3."], []]
    hypotheses = ["She eats 3.", "13 are left.", "16 - 3 = 13."]
    out = verifier.sample_verdicts(premises, hypotheses, [2, 3, 1], num_base=[1, 1, 0])
    assert generated == [[2, 3, 1]]  # the three inputs' six rows in one generate call
    assert [len(p) for p in out.probs] == [2, 3, 1] and all(0.0 <= x <= 1.0 for p in out.probs for x in p)
    # every call counted once, on the first pair (the module's rule): the generate call and the read batches
    assert sum(out.requests) == out.requests[0] == engine.calls >= 2
    assert all(0 < t <= n * 4 for t, n in zip(out.generated_tokens, [2, 3, 1]))


def test_reads_after_sampling_reuse_the_prompts_states_and_the_store_is_bounded(model_and_tokenizer):
    model, tok = model_and_tokenizer
    engine = LocalEngine(model, tok, seed=0, batch_size=8)
    generations = engine.generate(PROMPT, 3, Sampling(temperature=1.0, max_tokens=4))
    ids = engine.encode(PROMPT)
    queries = [LogprobQuery(ids + g.token_ids + engine.encode(" Verdict:"), 10) for g in generations]
    counter = PositionCounter(model)
    try:
        answers = engine.logprobs(queries, top=3)
    finally:
        counter.close()
    # the stored prompt (all but its last token) is not run again: only each row's own tokens after it
    assert counter.positions <= 3 * max(len(q.context) - (len(ids) - 1) for q in queries)
    with torch.inference_mode():
        for query, answer in zip(queries, answers):
            logp = torch.log_softmax(model(input_ids=torch.tensor([query.context])).logits[0, -1], dim=-1)
            assert answer.logprob == pytest.approx(float(logp[query.token]), abs=1e-5)
    lengths = [len(engine.encode(text)) - 1 for text in (PROMPT, OTHER)]
    small = LocalEngine(model, tok, seed=0, prompt_store_tokens=max(lengths) + 1)  # one of the two at a time
    assert sum(lengths) > small.prompt_store_tokens
    small.generate(PROMPT, 1, Sampling(temperature=0.0, max_tokens=2))
    small.generate(OTHER, 1, Sampling(temperature=0.0, max_tokens=2))
    assert list(small.prompts) == [tuple(small.encode(OTHER)[:-1])]  # the older prompt dropped to fit
    assert small.stored_tokens == len(small.encode(OTHER)) - 1 <= small.prompt_store_tokens


def test_a_sliding_window_cache_is_not_joined_and_its_prompt_runs_once_per_call():
    from transformers import MistralConfig, MistralForCausalLM

    from verifier_mirrors import qwen25_tokenizer

    tok = qwen25_tokenizer()
    torch.manual_seed(0)
    model = MistralForCausalLM(MistralConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             sliding_window=512, max_position_embeddings=512)).eval()
    engine = LocalEngine(model, tok, seed=0)
    assert engine.cache_argument is not None and not engine.joinable  # read from the config, before any pass
    ids = engine.encode(PROMPT)
    counter = PositionCounter(model)
    try:
        got = engine.generate(PROMPT, 3, Sampling(temperature=0.0, max_tokens=4))
    finally:
        counter.close()
    with torch.inference_mode():
        whole = model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               max_new_tokens=4, do_sample=False, pad_token_id=engine.pad_id)
    assert all(g.token_ids == whole[0, len(ids):].tolist()[: len(g.token_ids)] for g in got)
    assert counter.positions <= (len(ids) - 1) + 3 * 4  # its own cache, once, repeated to the three rows
    assert not engine.prompts  # nothing stored

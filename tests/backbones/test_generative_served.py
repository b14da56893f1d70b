"""A served generative verifier against the local one: a fake OpenAI-compatible server answering in vLLM's schema
(``/v1/models``; ``/v1/completions`` with ``n=`` samples, ``return_tokens_as_token_ids`` tokens, and
``prompt_logprobs`` on token-id prompts; ``/v1/chat/completions`` with ``n=``, ``continue_final_message`` /
``add_generation_prompt`` / ``add_special_tokens`` rendered by the tokenizer's chat template, ``return_token_ids``
and ``prompt_logprobs``), backed by the same mirror model, equals the local family within 1e-5 on either endpoint.

The fake samples with its own :class:`LocalEngine` seeded as the local verifier's is, so both draw the same
rationales (asserted), and it computes prompt log-probabilities with the mirror's forward pass, as vLLM does.
"""

from __future__ import annotations

import copy
import threading

import pytest
import torch

from ares_rerank import load_backbone
from ares_rerank.backbones.generative import LocalEngine, Sampling, ServedEngine
from ares_rerank.backbones.verifier_engines import ChatEngine
from ares_rerank.backbones.served import ServerResponseError
from fake_servers import FakeServer, Reply
from verifier_mirrors import genprm_mirror, rprm_mirror, thinkprm_mirror


QUESTION = ["Janet's ducks lay 16 eggs per day.", "How many are left after three?"]
STEPS = ["Step 1: 16 - 3 = 13.", "The answer is 13."]
SEED = 4
MIRRORS = {"prm-genprm": genprm_mirror, "prm-thinkprm": thinkprm_mirror, "prm-rprm": rprm_mirror}
SMALL = {"prm-genprm": {"max_tokens": 30}, "prm-thinkprm": {"max_length": 40}, "prm-rprm": {"max_tokens": 16}}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class VLLMLike:
    """``respond`` for :class:`FakeServer`: vLLM's answers, computed with ``model`` (module docstring)."""

    def __init__(self, model, tokenizer):
        self.engine = LocalEngine(model, tokenizer, seed=SEED)
        self.model, self.tokenizer = model, tokenizer
        self.lock = threading.Lock()  # one request at a time through the model (the sampler's order matters)

    def __call__(self, method, path, payload):
        if path == "/v1/models":
            return Reply({"object": "list", "data": [{"id": "mirror", "object": "model", "max_model_len": 4096}]})
        with self.lock:
            if path == "/v1/chat/completions":
                return Reply(self.chat(payload))
            if "prompt_logprobs" in payload:
                return Reply({"choices": [self.prompt_logprobs(p, payload["prompt_logprobs"], i)
                                          for i, p in enumerate(payload["prompt"])]})
            return Reply(self.completions(payload))

    def prompt_logprobs(self, ids, top, index):
        with torch.no_grad():
            rows = torch.log_softmax(self.model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
        table = [None]
        for i in range(1, len(ids)):
            row = rows[i - 1]
            values, order = torch.topk(row, top)
            entry = {str(t): {"logprob": v, "rank": r + 1, "decoded_token": self.tokenizer.decode([t])}
                     for r, (t, v) in enumerate(zip(order.tolist(), values.tolist()))}
            entry.setdefault(str(ids[i]), {"logprob": float(row[ids[i]]), "rank": 99,
                                           "decoded_token": self.tokenizer.decode([ids[i]])})
            table.append(entry)
        return {"index": index, "text": "", "prompt_logprobs": table, "finish_reason": "length"}

    def chat(self, payload):
        """vLLM's chat route: the messages rendered by the tokenizer's template, tokenized, then sampled or read."""
        assert "seed" not in payload
        generation_prompt = payload.get("add_generation_prompt", True)
        continued = payload.get("continue_final_message", False)
        assert not (generation_prompt and continued)  # vLLM refuses both
        text = self.tokenizer.apply_chat_template(payload["messages"], tokenize=False,
                                                  add_generation_prompt=generation_prompt,
                                                  continue_final_message=continued)
        ids = self.tokenizer.encode(text, add_special_tokens=payload.get("add_special_tokens", False))
        body = {"id": "chatcmpl", "object": "chat.completion", "model": "mirror"}
        if payload.get("return_token_ids") and self.token_ids:
            body["prompt_token_ids"] = ids
        if payload.get("prompt_logprobs") is not None:
            if self.prompt_logprobs_on_chat:
                body["prompt_logprobs"] = self.prompt_logprobs(ids, payload["prompt_logprobs"], 0)["prompt_logprobs"]
            body["choices"] = [{"index": 0, "message": {"role": "assistant", "content": ""},
                                "finish_reason": "length"}]
            return body
        self.engine.encode = lambda _text: list(ids)  # sample from the ids this server rendered
        gens = self.completions({**payload, "prompt": text})["choices"]
        body["choices"] = [{"index": c["index"], "message": {"role": "assistant", "content": c["text"]},
                            "finish_reason": "stop",
                            "logprobs": {"content": [{"token": t, "logprob": 0.0, "top_logprobs": []}
                                                     for t in c["logprobs"]["tokens"]]},
                            **({"token_ids": [int(t[9:]) for t in c["logprobs"]["tokens"]]}
                               if payload.get("return_token_ids") and self.token_ids else {})}
                           for c in gens]
        return body

    token_ids = True  # answer return_token_ids (vLLM's prompt_token_ids / token_ids)
    prompt_logprobs_on_chat = True

    def completions(self, payload):
        assert "seed" not in payload  # a fixed seed would repeat the samples on every call
        sampling = Sampling(temperature=payload["temperature"], top_p=payload["top_p"],
                            top_k=max(0, payload.get("top_k", 0)), max_tokens=payload["max_tokens"],
                            stop=tuple(payload.get("stop") or ()),
                            include_stop=payload.get("include_stop_str_in_output", False),
                            repetition_penalty=payload.get("repetition_penalty", 1.0))
        gens = self.engine.generate(payload["prompt"], payload["n"], sampling)
        choices = [{"index": i, "text": g.text, "finish_reason": "stop",
                    "logprobs": {"tokens": [f"token_id:{t}" for t in g.token_ids],
                                 "token_logprobs": [0.0] * len(g.token_ids)}} for i, g in enumerate(gens)]
        return {"id": "cmpl", "object": "text_completion", "model": "mirror", "choices": choices,
                "usage": {"completion_tokens": sum(len(g.token_ids) for g in gens)}}


def one_call_per_request(engine):
    """The local engine's ``generate_many`` as the served one with ``concurrency=1`` runs it: one seeded draw per
    request, in order, so GenPRM's outputs asked together draw what the fake server draws."""
    whole = type(engine).generate_many

    def each(requests, sampling, max_tokens=None):
        budgets = max_tokens if max_tokens is not None else [sampling.max_tokens] * len(requests)
        return [whole(engine, [request], sampling, [budget])[0] for request, budget in zip(requests, budgets)]

    engine.generate_many = each


@pytest.mark.parametrize("kind", sorted(MIRRORS))
def test_served_family_equals_the_local_family(tmp_path, kind):
    path = MIRRORS[kind](tmp_path / kind)
    local = load_backbone(path, kind=kind, seed=SEED, device="cpu", **SMALL[kind])
    one_call_per_request(local.engine)
    with FakeServer(VLLMLike(local.engine.model, local.tokenizer)) as server:
        served = load_backbone(server.url, kind=kind, tokenizer=local.tokenizer, **SMALL[kind])
        served.engine.concurrency = 1
        assert isinstance(served.engine, ServedEngine)
        remote = served.verify(QUESTION, STEPS, n=3)
        bodies = [body for _, route, body in server.requests if route == "/v1/completions"]
    here = local.verify(QUESTION, STEPS, n=3)
    assert [v.rationale for v in remote] == [v.rationale for v in here]  # the same samples drawn
    assert [v.verdict_text for v in remote] == [v.verdict_text for v in here]
    assert [v.prob for v in remote] == pytest.approx([v.prob for v in here], abs=1e-5)
    assert bodies[0]["n"] == 3  # one input's samples asked together
    assert all(isinstance(p, list) for b in bodies if "prompt_logprobs" in b for p in b["prompt"])
    assert sum(v.requests for v in remote) == len(bodies)  # every request counted


def test_served_engine_refuses_a_fixed_seed_and_a_missing_tokenizer(tmp_path):
    with pytest.raises(ValueError, match="seed"):
        ServedEngine("http://127.0.0.1:9", object.__new__(type("T", (), {"encode": lambda self, t: [1]})),
                     extra_body={"seed": 0})
    with pytest.raises(ValueError, match="tokenizer="):
        load_backbone("http://127.0.0.1:9", kind="prm-rprm")


def test_served_engine_names_a_server_without_prompt_logprobs(tmp_path):
    path = rprm_mirror(tmp_path / "rprm")
    local = load_backbone(path, kind="prm-rprm", device="cpu")

    def respond(method, route, payload):
        if route == "/v1/models":
            return Reply({"data": [{"id": "m"}]})
        return Reply({"choices": [{"index": i, "text": "", "prompt_logprobs": None}
                                  for i in range(len(payload["prompt"]))]})

    with FakeServer(respond) as server:
        engine = ServedEngine(server.url, local.tokenizer)
        from ares_rerank.backbones.generative import LogprobQuery

        with pytest.raises(ServerResponseError, match="prompt_logprobs"):
            engine.logprobs([LogprobQuery([1, 2], 3)])


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def chat_pair(tmp_path, kind, **options):
    """The local family and its served twin on the fake's /v1/chat/completions (R-PRM's tokenizer given ChatML)."""
    path = MIRRORS[kind](tmp_path / kind)
    local = load_backbone(path, kind=kind, seed=SEED, device="cpu", **SMALL[kind], **options)
    if kind == "prm-rprm":
        local.tokenizer.chat_template = CHATML  # Qwen2.5's template is ChatML (the mirror's tokenizer has none)
    return local


@pytest.mark.parametrize("kind", sorted(MIRRORS))
def test_served_chat_family_equals_the_local_family(tmp_path, kind):
    local = chat_pair(tmp_path, kind)
    one_call_per_request(local.engine)
    with FakeServer(VLLMLike(local.engine.model, local.tokenizer)) as server:
        served = load_backbone(server.url, kind=kind, tokenizer=local.tokenizer, api="chat", **SMALL[kind])
        served.engine.concurrency = 1
        assert isinstance(served.engine, ChatEngine)
        remote = served.verify(QUESTION, STEPS, n=3)
        bodies = [body for _, route, body in server.requests if route == "/v1/chat/completions"]
    here = local.verify(QUESTION, STEPS, n=3)
    assert [v.rationale for v in remote] == [v.rationale for v in here]  # the same samples drawn
    assert [v.verdict_text for v in remote] == [v.verdict_text for v in here]
    assert [v.prob for v in remote] == pytest.approx([v.prob for v in here], abs=1e-5)
    assert bodies[0]["n"] == 3 and bodies[0]["continue_final_message"] is True  # one input's samples together
    assert all(b["add_generation_prompt"] is False for b in bodies)  # every family writes past the prompt
    assert sum(v.requests for v in remote) == len(bodies)  # every request counted
    assert sum(v.generated_tokens for v in remote) == sum(v.generated_tokens for v in here)


@pytest.mark.parametrize("mirror", ["r1", "chatml"])
def test_served_chat_generative_kind_equals_local(tmp_path, mirror):
    path = (genprm_mirror if mirror == "r1" else rprm_mirror)(tmp_path / "mirror")
    options = {"prompt": "Q: {question}\nBefore: {previous_steps}\nCheck: {step}", "num_samples": 2,
               "sampling": Sampling(temperature=1.0, max_tokens=12)}
    tokenizer = None
    if mirror == "chatml":  # the Qwen2.5-style tokenizer given a ChatML template
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        tokenizer.chat_template = CHATML
    local = load_backbone(path, kind="generative", seed=SEED, device="cpu", tokenizer=tokenizer,
                          use_chat_template=True, **options)
    with FakeServer(VLLMLike(local.engine.model, local.tokenizer)) as server:
        served = load_backbone(server.url, kind="generative", tokenizer=local.tokenizer, api="chat", **options)
        remote = served.sample_verdicts([QUESTION + STEPS[:1]], [STEPS[1]], [3], num_base=[2])
        first = next(body for _, route, body in server.requests if route == "/v1/chat/completions")
    assert first["add_generation_prompt"] is True  # the prompt ends at the generation prompt: sent as one
    here = local.sample_verdicts([QUESTION + STEPS[:1]], [STEPS[1]], [3], num_base=[2])
    assert remote.probs[0].tolist() == pytest.approx(here.probs[0].tolist(), abs=1e-5)
    assert remote.generated_tokens == here.generated_tokens


def test_served_chat_refuses_what_it_cannot_send_or_read(tmp_path):
    local = chat_pair(tmp_path, "prm-thinkprm")
    with pytest.raises(ValueError, match="api='completions'"):  # a tokenizer without a chat template
        load_backbone("http://127.0.0.1:9", kind="prm-rprm", tokenizer=rprm_mirror(tmp_path / "r"), api="chat")
    with pytest.raises(ValueError, match="api="):
        load_backbone("http://127.0.0.1:9", kind="prm-rprm", tokenizer=local.tokenizer, api="chats")
    with pytest.raises(ValueError, match="server URL"):
        load_backbone(tmp_path / "prm-thinkprm", kind="prm-thinkprm", api="chat", device="cpu")
    fake = VLLMLike(local.engine.model, local.tokenizer)
    with FakeServer(fake) as server:
        plain = load_backbone(server.url, kind="generative", tokenizer=local.tokenizer, api="chat",
                              use_chat_template=False, prompt="{question} {step}")
        with pytest.raises(ValueError, match="not rendered from chat messages.*api='completions'"):
            plain.verify(QUESTION, STEPS, n=1)
        served = load_backbone(server.url, kind="prm-thinkprm", tokenizer=local.tokenizer, api="chat",
                               **SMALL["prm-thinkprm"])
        fake.prompt_logprobs_on_chat = False
        with pytest.raises(ServerResponseError, match="without prompt_logprobs"):
            served.verify(QUESTION, STEPS, n=1)
        fake.token_ids = False
        with pytest.raises(ServerResponseError, match="return_token_ids"):
            served.verify(QUESTION, STEPS, n=1)


def test_served_chat_refuses_a_server_whose_template_differs(tmp_path):
    local = chat_pair(tmp_path, "prm-thinkprm")
    other = copy.deepcopy(local.tokenizer)
    other.chat_template = other.chat_template.replace("<｜User｜>", "<｜User｜>Hi. ")
    with FakeServer(VLLMLike(local.engine.model, other)) as server:
        served = load_backbone(server.url, kind="prm-thinkprm", tokenizer=local.tokenizer, api="chat",
                               **SMALL["prm-thinkprm"])
        with pytest.raises(ServerResponseError, match="chat template differs"):
            served.verify(QUESTION, STEPS, n=1)

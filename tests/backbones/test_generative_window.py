"""The window of a generative verifier: an input's prompt plus what a sample may add (the generation budget and the
verdict read's text) is checked against the engine's window (local: ``max_model_len`` or the model's position table
/ config; served: ``max_model_len`` or the server's ``/v1/models``), and ``window=`` decides: ``"refuse"`` (the
default, an error naming the option), ``"truncate"`` (the earliest premises dropped first) or ``"relevant"``.
"""

from __future__ import annotations

import warnings

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from ares_rerank import load_backbone
from ares_rerank.backbones.generative import GenerativeVerifier, LocalEngine, Sampling, ServedEngine
from fake_servers import FakeServer, Reply
from verifier_mirrors import genprm_mirror


TEMPLATE = "Q: {question}\nBefore: {previous_steps}\nCheck: {step}"
QUESTION = "How many eggs are left?"
EARLIER = ["Step one says " + "sixteen eggs per day " * 6, "Step two says " + "three for breakfast " * 6,
           "Step three: 16 - 3 = 13."]
STEP = "The answer is 13."


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    path = genprm_mirror(tmp_path_factory.mktemp("window") / "mirror")
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def prompt_tokens(tokenizer, question, earlier):
    """The template's prompt tokens, counted here from the text (independent of the verifier's renderer)."""
    text = TEMPLATE.format(question=question, previous_steps="\n".join(earlier) if earlier else "(none)", step=STEP)
    return len(tokenizer.encode(text))


def verifier(mirror, max_model_len, **options):
    model, tokenizer = mirror
    engine = LocalEngine(model, tokenizer, seed=0, max_model_len=max_model_len)
    return GenerativeVerifier(engine, prompt=TEMPLATE, use_chat_template=False, sampling=Sampling(max_tokens=4),
                              **options)


def test_a_local_engine_takes_the_models_window(mirror, tmp_path):
    model, tokenizer = mirror
    assert LocalEngine(model, tokenizer).window() == model.config.max_position_embeddings == 4096
    assert LocalEngine(model, tokenizer, max_model_len=300).window() == 300
    loaded = load_backbone(genprm_mirror(tmp_path / "m"), kind="prm-genprm", device="cpu", max_model_len=512)
    assert loaded.engine.window() == 512


def test_an_input_that_fits_is_sent_whole(mirror):
    v = verifier(mirror, 4096)
    (verdict,) = v.verify([QUESTION], EARLIER + [STEP], n=1)
    assert all(step in verdict.prompt for step in EARLIER) and v.stats.premises_dropped == 0


def test_refuse_is_the_default_and_names_the_option(mirror):
    tokenizer = mirror[1]
    reserve = verifier(mirror, 4096).new_tokens()
    window = prompt_tokens(tokenizer, QUESTION, EARLIER) + reserve - 1  # one token short of the whole input
    v = verifier(mirror, window)
    with pytest.raises(ValueError, match="window='refuse' drops none.*window='truncate'"):
        v.verify([QUESTION], EARLIER + [STEP], n=1)
    assert v.engine.calls == 0  # nothing generated


def test_truncate_drops_the_earliest_premises_first(mirror):
    tokenizer = mirror[1]
    reserve = verifier(mirror, 4096).new_tokens()
    window = prompt_tokens(tokenizer, "", EARLIER[1:]) + reserve  # the question and step one cannot stay
    v = verifier(mirror, window, window="truncate")
    with pytest.warns(UserWarning, match="2 of its 4 premises were left out"):
        (verdict,) = v.verify([QUESTION], EARLIER + [STEP], n=1)
    assert QUESTION not in verdict.prompt and EARLIER[0] not in verdict.prompt
    assert EARLIER[1] in verdict.prompt and EARLIER[2] in verdict.prompt and STEP in verdict.prompt
    assert len(tokenizer.encode(verdict.prompt)) + reserve <= window
    assert v.stats.premises_dropped == 2 and v.stats.pairs_windowed == 1


def test_relevant_keeps_what_fits(mirror):
    tokenizer = mirror[1]
    reserve = verifier(mirror, 4096).new_tokens()
    window = prompt_tokens(tokenizer, QUESTION, EARLIER[2:]) + reserve
    v = verifier(mirror, window, window="relevant")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        (verdict,) = v.verify([QUESTION], EARLIER + [STEP], n=1)
    assert STEP in verdict.prompt and len(tokenizer.encode(verdict.prompt)) + reserve <= window
    assert v.stats.premises_dropped >= 1


def test_a_step_that_alone_does_not_fit_is_refused_in_every_choice(mirror):
    tokenizer = mirror[1]
    reserve = verifier(mirror, 4096).new_tokens()
    window = prompt_tokens(tokenizer, "", []) + reserve - 1
    for choice in ("refuse", "truncate", "relevant"):
        with pytest.raises(ValueError, match="never cut"):
            verifier(mirror, window, window=choice).verify([QUESTION], EARLIER + [STEP], n=1)


def test_an_unknown_choice_is_named(mirror):
    with pytest.raises(ValueError, match="window='cut' is unknown"):
        verifier(mirror, 4096, window="cut")


def test_a_served_window_comes_from_max_model_len_or_the_server(mirror):
    model, tokenizer = mirror
    reserve = verifier(mirror, 4096).new_tokens()
    limit = prompt_tokens(tokenizer, QUESTION, EARLIER) + reserve - 1

    def respond(method, route, payload):
        assert route == "/v1/models", "nothing may be generated for an input past the window"
        return Reply({"object": "list", "data": [{"id": "mirror", "max_model_len": limit}]})

    with FakeServer(respond) as server:
        engine = ServedEngine(server.url, tokenizer)
        assert engine.window() == limit and engine.model == "mirror"
        v = GenerativeVerifier(engine, prompt=TEMPLATE, use_chat_template=False, sampling=Sampling(max_tokens=4))
        with pytest.raises(ValueError, match="window='refuse'"):
            v.verify([QUESTION], EARLIER + [STEP], n=1)
        given = ServedEngine(server.url, tokenizer, "mirror", max_model_len=128)
        assert given.window() == 128
        asked = [route for _, route, _ in server.requests]
    assert asked == ["/v1/models"]  # max_model_len= given: the server is not asked
    with pytest.raises(ValueError, match="max_model_len"):
        ServedEngine("http://127.0.0.1:9", tokenizer, max_model_len=0)

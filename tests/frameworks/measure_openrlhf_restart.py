"""Measure what a restart of ``ares-rerank serve`` costs OpenRLHF 0.11.2's own rollout and reward client.

Runs ``ares-rerank serve --backbone BACKBONE --port 0`` as a subprocess and reports how long the process takes from
its start to listening and to ready; then stops it (SIGTERM), starts an OpenRLHF rollout of PROMPTS x SAMPLES
samples at once against its port (OpenRLHF's command line, ``PromptDataset`` with ``--data.apply_chat_template``,
``SamplesGenerator`` and ``SingleTurnAgentExecutor``, as in tests/frameworks/openrlhf_harness.py), waits GAP seconds
and starts a new server process on the same port. It reports the outage (from the old process's exit to the new one
being ready), how many rewards OpenRLHF lost (``None``) and whether the others equal ``AresReward`` on the plain
(question, response) pairs with the same backbone. With ``--gap 10`` nothing listens for 10 s, what a server that
listens only once loaded would cost.

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 python tests/frameworks/measure_openrlhf_restart.py --backbone default --prompts 8 --samples 8
    HF_HUB_OFFLINE=1 python tests/frameworks/measure_openrlhf_restart.py --backbone default --gap 10
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(HERE)]  # tests/ (chat_mirrors) and tests/frameworks/ (the harness)


def start_server(backbone: str, port: int) -> tuple[subprocess.Popen, float, int]:
    """The server process, the seconds from its start to its listening line, and its port."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ares_rerank.cli", "serve", "--backbone", backbone, "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=REPO_ROOT)
    line = proc.stdout.readline()
    match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
    if not match:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, time.monotonic() - started, int(match.group(1))


def wait_ready(port: int, since: float) -> float:
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=600) as answer:
                if json.load(answer)["status"] == "ok":
                    return time.monotonic() - since
        except OSError:
            pass
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", default="default")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--gap", type=float, default=0.0, help="seconds with nothing listening before the restart")
    parser.add_argument("--family", default="qwen2.5", help="the policy tokenizer's family (tests/chat_mirrors.py)")
    options = parser.parse_args()

    from chat_mirrors import policy_tokenizer
    from openrlhf_harness import load_openrlhf, openrlhf_args, rollout

    from ares_rerank import AresReranker, load_backbone
    from ares_rerank.data.claimtrees import claimtrees_example
    from ares_rerank.rewards import AresReward

    frameworks = load_openrlhf()
    tokenizer = policy_tokenizer(options.family)
    chains = [claimtrees_example(i, 5, variant="vanilla" if i % 2 else "insertion", valid=4)
              for i in range(options.prompts)]
    questions = ["\n".join(c.base_claims) for c in chains]
    responses = ["\n\n".join(c.steps) for c in chains]
    ids = [tokenizer(r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for r in responses]

    proc, listen_s, port = start_server(options.backbone, 0)
    ready_s = wait_ready(port, time.monotonic() - listen_s)
    print(f"first start: listening {listen_s:.2f} s after the process started, ready after {ready_s:.2f} s")

    args = openrlhf_args(["--reward.remote_url", f"http://127.0.0.1:{port}/get_reward", "--data.apply_chat_template",
                          "--rollout.n_samples_per_prompt", str(options.samples), "--rollout.batch_size",
                          str(options.prompts), "--rollout.max_new_tokens", str(max(map(len, ids))),
                          "--data.max_len", str(max(map(len, ids)) + 1024)])
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    down = time.monotonic()
    box: dict = {}
    client = threading.Thread(target=lambda: box.update(experiences=rollout(frameworks, args, tokenizer,
                                                                            [{"input": q} for q in questions],
                                                                            [ids[i] for i in range(len(ids))])))
    client.start()
    time.sleep(options.gap)
    proc, listen_again_s, _ = start_server(options.backbone, port)
    ready_again = wait_ready(port, down)
    client.join()
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)

    experiences = box["experiences"]
    lost = sum(e.rewards is None for e in experiences)
    print(f"restart: nothing listening for {options.gap:.1f} s, then the new process listened "
          f"{listen_again_s:.2f} s after it started; ready {ready_again:.2f} s after the old one exited")
    print(f"OpenRLHF rewards lost: {lost} of {len(experiences)} (samples {options.prompts} x {options.samples})")
    if lost < len(experiences):
        import torch

        reranker = AresReranker(load_backbone(options.backbone))
        question_of = {tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                     add_generation_prompt=True): q for q in questions}
        scored = [e for e in experiences if e.rewards is not None]
        which = [max((i for i, r in enumerate(ids) if e.sequences[0].tolist()[-len(r):] == r),
                     key=lambda i: len(ids[i]))
                 for e in scored]
        expected = AresReward(reranker, unscorable_value=0.0)([question_of[e.prompts[0]] for e in scored],
                                                              [responses[i] for i in which])
        same = sum(torch.equal(e.rewards.reshape(-1), torch.tensor([x])) for e, x in zip(scored, expected))
        gap = max(abs(e.rewards.reshape(-1).item() - x) for e, x in zip(scored, expected))
        print(f"rewards equal to AresReward on the plain (question, response): {same} of {len(scored)} exactly "
              f"(as float32), the largest difference {gap:.1e}")

if __name__ == "__main__":
    main()

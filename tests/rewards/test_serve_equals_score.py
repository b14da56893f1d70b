"""One set of defaults: ``ares-rerank serve``'s reward equals ``ares-rerank score``'s chain score on the same text,
each command run as it is, with nothing but the backbone given (a deterministic fake: tests/helpers.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_server import health, post, wait_for


REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPT = ("I have A\nRule: A -> B (meaning that if I have A, I can derive B)\n"
          "Rule: B -> C (meaning that if I have B, I can derive C)")
RESPONSES = ["\nI have A, I use rule (A -> B) to derive B, now I have B\n\nI have B, I use rule (B -> C) to derive C, "
             "now I have C", "\nI have B, I use rule (B -> C) to derive C, now I have C<|im_end|>"]


@pytest.mark.timeout(180)
def test_serve_and_score_give_the_same_number_on_the_same_text(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "tests"), str(REPO_ROOT)])}
    backbone = ["--backbone", "helpers:HashBackbone"]
    rows = tmp_path / "rows.jsonl"
    # what serve scores is the response without its end marker: score gets that text
    rows.write_text("".join(json.dumps({"prompt": PROMPT, "completion": r.replace("<|im_end|>", "")}) + "\n"
                            for r in RESPONSES))
    done = subprocess.run([sys.executable, "-m", "ares_rerank.cli", "score", str(rows), *backbone],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    scored = [json.loads(line)["step_scores"][-1] for line in done.stdout.splitlines()]  # the final step's tau
    proc = subprocess.Popen([sys.executable, "-m", "ares_rerank.cli", "serve", *backbone, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert match, proc.stderr.read() if proc.poll() is not None else "no listening line"
        server = type("Address", (), {"host": "127.0.0.1", "port": int(match.group(1))})()
        wait_for(lambda: health(server)["status"] == "ok", "the backbone loaded")
        status, _, answer = post(server, {"query": [PROMPT + r for r in RESPONSES], "prompts": [PROMPT] * 2})
    finally:
        proc.terminate()
        proc.wait(60)
    assert status == 200
    assert answer["rewards"] == pytest.approx(scored, abs=1e-12)
    assert len(set(scored)) == 2  # two different numbers, each matched

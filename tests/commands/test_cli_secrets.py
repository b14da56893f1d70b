"""Credentials never reach a file the CLI writes or a line it prints: a ``user:password`` in ``--backbone`` and an
``api_key`` in ``--backbone-options`` are redacted in the ``.partial`` header a killed run leaves, in finished
results, in summaries and in error lines (malformed ``--backbone-options`` included), for every command that takes a
backbone here (score, rank, search, eval); and an adapted head pushed to the Hub names no local folder.

The backbone is the served judge (``--kind openai``) against a fake OpenAI-compatible server on 127.0.0.1
(tests/fake_servers.py), which can be told to fail after some requests: the command then stops with its partial
results kept, as a killed run would leave them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ares_rerank.cli import main
from ares_rerank.utils.http import find_secrets, redact
from ares_rerank.utils.io import ResumableOutput, local_names
from fake_servers import FakeServer, Reply, load_fixture


PASSWORD = "pw-S3cr3t-9f2a"
API_KEY = "sk-S3cr3t-key-77c1"
MODELS = {"object": "list", "data": [{"id": "served-judge", "object": "model", "max_model_len": 4096}]}


class Judge:
    """A fake OpenAI-compatible judge: one ' Yes' / ' No' choice per prompt; a prompt holding ``fail_on`` is
    answered 400 (a backbone that goes away mid-run, at the third input)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.choice = load_fixture("openai_completions_topk.json")["response"]["choices"][0]

    def __call__(self, method, path, payload):
        if path == "/v1/models":
            return Reply(MODELS)
        if path != "/v1/completions":
            return Reply({"detail": "Not Found"}, status=404)
        prompts = payload["prompt"] if isinstance(payload["prompt"], list) else [payload["prompt"]]
        if self.fail_on is not None and any(self.fail_on in p for p in prompts):
            return Reply({"error": {"message": "the judge went away"}}, status=400)
        choices = [{**copy.deepcopy(self.choice), "index": i} for i in range(len(prompts))]
        return Reply({"object": "text_completion", "model": "served-judge", "choices": choices})


def backbone_flags(server, credential: str) -> list[str]:
    host = server.url.removeprefix("http://")
    if credential == "password":
        return ["--backbone", f"http://alice:{PASSWORD}@{host}", "--kind", "openai", "--backbone-options",
                json.dumps({"model": "served-judge", "max_retries": 0})]
    return ["--backbone", f"http://{host}", "--kind", "openai", "--backbone-options",
            json.dumps({"model": "served-judge", "max_retries": 0, "api_key": API_KEY})]


def assert_no_secret(folder: Path, printed: str) -> None:
    for secret in (PASSWORD, API_KEY):
        assert secret not in printed, f"printed: {printed[printed.index(secret) - 200:][:400]}"
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), f"{path} holds a credential"


@pytest.fixture
def candidates(tmp_path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"We have a{i}.\na{i} gives b{i}.",
                                        "candidates": [f"So b{i}.\nThen c{i}.", f"So c{i}."]}) + "\n"
                            for i in range(4)))
    return path


@pytest.fixture
def chains(tmp_path) -> Path:
    path = tmp_path / "chains.jsonl"
    path.write_text("".join(json.dumps({"id": f"c{i}", "base_claims": [f"We have a{i}.", f"a{i} gives b{i}."],
                                        "steps": [f"So b{i}.", f"Then c{i}."]}) + "\n" for i in range(4)))
    return path


def command(name: str, source: Path, out: Path) -> list[str]:
    if name == "score":
        return ["score", str(source), "--output", str(out), "--batch-size", "1", "--no-progress"]
    return ["rank", "--input", str(source), "--output", str(out), "--batch-size", "1", "--no-progress",
            "--step-separator", "\\n", "--prompt-split", "lines"]


@pytest.mark.parametrize("credential", ["password", "api_key"])
@pytest.mark.parametrize("name", ["score", "rank"])
def test_a_run_killed_midway_leaves_no_credential_in_its_partial_file_or_its_output(name, credential, tmp_path,
                                                                                    chains, candidates, capsys):
    source = chains if name == "score" else candidates
    out = tmp_path / "out.jsonl"
    judge = Judge(fail_on="a2.")
    with FakeServer(judge) as server:
        argv = [*command(name, source, out), *backbone_flags(server, credential)]
        assert main(argv) == 2
        printed = "".join(capsys.readouterr())
        partial = out.with_name(f".{out.name}.partial")
        assert partial.is_file() and not out.exists()  # stopped midway: the partial results are kept for a rerun
        header = json.loads(partial.read_text().splitlines()[0])
        assert "***" in json.dumps(header)  # the credential's place is marked, not silently dropped
        assert_no_secret(tmp_path, printed)
        judge.fail_on = None  # the rerun resumes: the same settings, the redacted header matches
        assert main(argv) == 0
        printed = "".join(capsys.readouterr())
    assert len(out.read_text().splitlines()) == 4 and not partial.exists()
    assert_no_secret(tmp_path, printed)


@pytest.mark.parametrize("credential", ["password", "api_key"])
def test_eval_results_and_their_file_names_hold_no_credential(credential, tmp_path, capsys):
    with FakeServer(Judge()) as server:
        assert main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--length", "3", "--n", "5", "--methods", "ares",
                     "--output-dir", str(tmp_path / "runs"), "--no-progress", *backbone_flags(server, credential)]) == 0
    printed = "".join(capsys.readouterr())
    results = list((tmp_path / "runs").glob("*.json"))
    assert results and "***" in results[0].read_text()
    assert_no_secret(tmp_path, printed)


@pytest.mark.timeout(600)
def test_search_summary_and_partial_header_hold_no_password(tiny_causal_lm_path, tmp_path, capsys):
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps({"id": f"p{i}", "prompt": p}) + "\n"
                                for i, p in enumerate(["Let x = 3.", "We have pepper."])))
    out = tmp_path / "out.jsonl"
    argv = ["search", str(tiny_causal_lm_path), "--problems", str(problems), "--approach", "best-of-n", "--n", "2",
            "--output", str(out), "--step-separator", " ", "--max-step-tokens", "4", "--num-iterations", "2",
            "--batch-size", "1", "--no-progress"]
    with FakeServer(Judge()) as server:
        assert main([*argv, *backbone_flags(server, "password")]) == 0
    printed = "".join(capsys.readouterr())
    assert "backbone=http://***@127.0.0.1" in printed
    assert_no_secret(tmp_path, printed)


@pytest.mark.parametrize("raw", ['{"api_key": "%s", oops' % API_KEY, "{api_key: %s}" % API_KEY,
                                 '["%s"]' % API_KEY, '[{"api_key": "%s"}]' % API_KEY])
def test_malformed_backbone_options_do_not_echo_the_key(raw, chains, capsys):
    assert main(["score", str(chains), "--backbone", "claimtrees-oracle", "--backbone-options", raw]) == 2
    err = capsys.readouterr().err
    assert "--backbone-options" in err and "Traceback" not in err
    assert API_KEY not in err


@pytest.mark.parametrize("kind", [[], ["--kind", "nli"], ["--kind", "openai"]], ids=["no kind", "nli", "openai"])
def test_an_error_that_quotes_the_password_is_redacted_on_its_way_out(kind, chains, capsys):
    """Whatever a library's message holds (a URL given without --kind, or as a model folder, is quoted whole by
    load_backbone), the CLI's error line is scrubbed of the credentials in its arguments."""
    url = f"http://alice:{PASSWORD}@127.0.0.1:9"  # nothing listens on port 9
    assert main(["score", str(chains), "--backbone", url, *kind, "--backbone-options",
                 '{"max_retries": 0, "timeout": 2}' if kind == ["--kind", "openai"] else "{}"]) == 2
    err = capsys.readouterr().err
    assert "ares-rerank score: error:" in err and PASSWORD not in err and "127.0.0.1:9" in err


def test_redact_and_find_secrets():
    settings = {"backbone": f"https://bob:{PASSWORD}@judge.example/v1", "hf_token": "hf_x1y2",
                "backbone_options": json.dumps({"api_key": API_KEY, "max_new_tokens": 3}),
                "nested": [{"client_secret": "abc123"}], "tokenizer": "Qwen/Qwen2.5-0.5B", "max_step_tokens": 64}
    shown = redact(settings)
    text = json.dumps(shown)
    for secret in (PASSWORD, "hf_x1y2", API_KEY, "abc123"):
        assert secret not in text
    assert shown["backbone"] == "https://***@judge.example/v1" and shown["tokenizer"] == "Qwen/Qwen2.5-0.5B"
    assert json.loads(shown["backbone_options"]) == {"api_key": "***", "max_new_tokens": 3}
    assert shown["max_step_tokens"] == 64
    assert {PASSWORD, API_KEY, "hf_x1y2", "abc123"} <= find_secrets(settings)
    assert redact(f"refused {API_KEY}!", find_secrets(settings)) == "refused ***!"
    assert redact("user:pw@host:8000") == "***@host:8000"
    url = "https://judge.example/v1?api-version=2024-06&api-key=AZ-k3y&key=g00gle"
    assert redact(url) == "https://judge.example/v1?api-version=2024-06&api-key=***&key=***"
    assert {"AZ-k3y", "g00gle"} <= find_secrets({"backbone": url})
    assert redact({"prompt_key": "prompt", "candidates_key": "candidates"}) == {"prompt_key": "prompt",
                                                                               "candidates_key": "candidates"}


def test_the_partial_header_is_redacted(tmp_path):
    out = ResumableOutput(tmp_path / "o.jsonl", {"backbone": f"http://a:{PASSWORD}@h", "api_key": API_KEY})
    out.append([{"x": 1}], ["0:k"])
    out.close()
    text = (tmp_path / ".o.jsonl.partial").read_text()
    assert PASSWORD not in text and API_KEY not in text and "http://***@h" in text


def test_local_names_keep_names_and_hub_ids_only(tmp_path):
    folder = tmp_path / "runs" / "head"
    folder.mkdir(parents=True)
    record = {"head": str(folder), "rel": "./x/y", "hub": "owner/name", "url": "https://h/a/b", "plain": "mine.jsonl",
              "list": [str(tmp_path / "data.jsonl")], "n": 3}
    assert local_names(record) == {"head": "head", "rel": "y", "hub": "owner/name", "url": "https://h/a/b",
                                   "plain": "mine.jsonl", "list": ["data.jsonl"], "n": 3}


@pytest.mark.slow
def test_an_adapted_head_pushed_to_the_hub_names_no_local_folder(tmp_path, tiny_nli_path, monkeypatch, capsys):
    """The adapted head's card and calibration record name the head, the chains file and the base by their folder
    or file names; what push_to_hub uploads (card, calibration, adapter config) holds no path of this machine."""
    from huggingface_hub import HfApi

    from ares_rerank.backbones.loading import load_backbone
    from test_adapt import _tiny_head, _write_chains

    root = tmp_path / "home-of-alice"
    root.mkdir()
    head = _tiny_head(root, tiny_nli_path)
    chains = _write_chains(root / "mine.jsonl")
    out = root / "adapted"
    assert main(["adapt", str(head), "--chains_file", str(chains), "--output_dir", str(out), "--max_steps", "1",
                 "--batch_size", "4", "--replay_chains", "3", "--progress", "false",
                 "--cache_dir", str(root / "hub-cache")]) == 0
    capsys.readouterr()
    saved = out / "head"
    for name in ("README.md", "ares_calibration.json"):
        text = (saved / name).read_text()
        assert str(root) not in text and str(tiny_nli_path) not in text, name
    record = json.loads((saved / "ares_calibration.json").read_text())
    assert record["adaptation"]["head"] == "head" and record["adaptation"]["chains_file"] == "mine.jsonl"
    assert "cache_dir" not in record["adaptation"]["arguments"]
    uploaded: dict = {}

    def upload_folder(self, **kwargs):
        folder = Path(kwargs["folder_path"])
        uploaded.update({p.name: p.read_text(errors="replace") for p in folder.iterdir()
                         if p.suffix in (".md", ".json")})
        return type("CommitInfo", (), {"commit_url": "https://huggingface.co/me/head/commit/abc", "pr_url": None})()

    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kw: type("R", (), {"repo_id": repo_id})())
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    load_backbone(str(saved), device="cpu").push_to_hub("me/head")
    assert {"README.md", "ares_calibration.json", "adapter_config.json"} <= set(uploaded)
    for name, text in uploaded.items():
        assert str(root) not in text and str(tiny_nli_path) not in text and "/tmp/" not in text, (name, text[:300])

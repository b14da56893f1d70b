"""OpenRLHF 0.11.2's own rollout and remote-reward code, run in this process against a reward server.

What runs is OpenRLHF's code:

- ``openrlhf.cli.train_ppo_ray``'s command line (its parser and its argument checks, run as ``__main__``; stopped
  where ``train()`` starts, at ``get_strategy``): :func:`openrlhf_args` returns the hierarchized ``args`` it built,
  so ``--reward.remote_url`` is read by OpenRLHF itself;
- ``PromptDataset`` (``preprocess_data``: ``apply_chat_template(..., add_generation_prompt=True)`` with
  ``--data.apply_chat_template``) and its ``collate_fn``;
- ``SamplesGenerator.generate_samples`` (prompts dispatched to the rollout actors, results collected with
  ``ray.wait`` and turned into ``Experience`` tensors by ``_process_response_into_experience``);
- ``RolloutRayActor.generate_responses`` (``n_samples_per_prompt`` executions at once) and
  ``SingleTurnAgentExecutor`` (the prompt tokenized and cut to its last ``max_len - max_new_tokens`` tokens, prompt
  and response decoded with ``skip_special_tokens=False``, POSTed to each ``--reward.remote_url`` with 5 tries 1 s
  apart, ``rewards`` / ``scores`` / ``extra_logs`` read back).

What is replaced, and why:

- the vLLM engine: :class:`FixedTokenEngine` overrides ``RolloutRayActor.__init__`` (which starts vLLM; it builds the
  executor exactly as the original does) and ``RolloutRayActor.generate`` (which runs it), answering fixed token ids;
- ``ray``, ``vllm``, ``deepspeed``, ``flash_attn``: stubbed by :func:`frameworks.stubs.install_stubs` (that module
  says why). Two names those stand-ins lack are set here on the stand-in modules, for the code driven:
  ``ray.wait`` (``SamplesGenerator`` collects its rollouts with it) and ``vllm.SamplingParams`` (a record of its
  fields: the executor reads ``max_tokens`` and ``logprobs`` and deep-copies it). A really installed ray or vllm is
  left alone.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import runpy
import sys
import time
from types import SimpleNamespace
from typing import Any, Sequence

import pytest

from frameworks.stubs import install_stubs, shutdown_actors


__all__ = ["SamplingParams", "fixed_token_engines", "load_openrlhf", "openrlhf_args", "rollout", "wait"]

OPENRLHF_VERSION = "0.11.2"


class SamplingParams:
    """vLLM's ``SamplingParams`` as a record of the keyword arguments it was built with (the stand-in for ``vllm``
    has none; the executor only reads ``max_tokens`` and ``logprobs``)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update({"max_tokens": None, "logprobs": None, **fields})


def wait(refs: Sequence[Any], num_returns: int = 1, timeout: float | None = None, **_: Any) -> tuple[list, list]:
    """``ray.wait`` for the stand-in's references: ``(ready, pending)`` once ``num_returns`` are done or ``timeout``
    seconds pass, in the given order."""
    refs = list(refs)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        done = [ref for ref in refs if ref.future.done()]
        left = None if deadline is None else deadline - time.monotonic()
        if len(done) >= num_returns or (left is not None and left <= 0):
            ready = done[:num_returns]
            return ready, [ref for ref in refs if ref not in ready]
        pending = [ref.future for ref in refs if not ref.future.done()]
        concurrent.futures.wait(pending, timeout=left, return_when=concurrent.futures.FIRST_COMPLETED)


def load_openrlhf() -> SimpleNamespace:
    """OpenRLHF's modules the tests drive, imported with the heavy modules stubbed; skips (fails under CI) when
    OpenRLHF 0.11.2 or what its code imports is not installed."""
    stubbed = install_stubs()
    try:
        import openrlhf
        from importlib.metadata import version

        found = version("openrlhf")
        if found != OPENRLHF_VERSION:
            raise ImportError(f"openrlhf {found} is installed; these tests pin {OPENRLHF_VERSION}")
        if "vllm" in stubbed:
            importlib.import_module("vllm").SamplingParams = SamplingParams  # before samples_generator binds it
        if "ray" in stubbed:
            importlib.import_module("ray").wait = wait
        agent = importlib.import_module("openrlhf.utils.agent")
        engine = importlib.import_module("openrlhf.trainer.ray.vllm_engine")
        samples = importlib.import_module("openrlhf.trainer.ppo_utils.samples_generator")
        datasets = importlib.import_module("openrlhf.datasets")
    except ImportError as err:
        reason = (f"OpenRLHF {OPENRLHF_VERSION} is not importable here ({type(err).__name__}: {err}); "
                  "scripts/install_frameworks.sh installs it and what its code imports")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return SimpleNamespace(openrlhf=openrlhf, agent=agent, engine=engine, samples=samples, datasets=datasets,
                           stubbed=stubbed)


class _Parsed(Exception):
    def __init__(self, args: Any) -> None:
        super().__init__("train_ppo_ray parsed its arguments")
        self.parsed = args


def openrlhf_args(argv: Sequence[str]) -> Any:
    """The ``args`` OpenRLHF's ``train_ppo_ray`` command line builds from ``argv`` (its parser, ``hierarchize`` and
    its checks), taken where ``train(args)`` asks for its strategy; a bad flag exits as argparse does."""
    import openrlhf.utils

    def capture(args: Any) -> None:
        raise _Parsed(args)

    saved_argv, saved = sys.argv, openrlhf.utils.get_strategy
    sys.argv, openrlhf.utils.get_strategy = ["train_ppo_ray", *argv], capture
    try:
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")
    except _Parsed as parsed:
        return parsed.parsed
    finally:
        sys.argv, openrlhf.utils.get_strategy = saved_argv, saved
    raise AssertionError("train_ppo_ray ended without asking for its strategy")


def fixed_token_engines(frameworks: SimpleNamespace, remote_url: Any, responses: Sequence[Sequence[int]],
                        count: int = 1) -> list[Any]:
    """``count`` rollout actors (OpenRLHF's ``RolloutRayActor``, through the stand-in ``ray.remote``) whose vLLM
    engine answers ``responses[i % len(responses)]`` (token ids) to its i-th generation."""
    actor_class = frameworks.engine.RolloutRayActor.cls  # the class under the stand-in ray.remote
    executor_class = frameworks.agent.SingleTurnAgentExecutor

    class FixedTokenEngine(actor_class):
        def __init__(self, remote_rm_url: Any, answers: Sequence[Sequence[int]]) -> None:
            # RolloutRayActor.__init__ without starting vLLM: the same executor, built the same way
            self.executor = executor_class(remote_rm_url)
            self._mm_pad_token_ids = None
            self.answers, self.calls = [list(a) for a in answers], 0

        async def generate(self, prompt_token_ids: list[int], sampling_params: Any,
                           multi_modal_data: Any = None) -> Any:
            ids = self.answers[self.calls % len(self.answers)][: sampling_params.max_tokens]
            self.calls += 1
            output = SimpleNamespace(token_ids=ids, text="", finish_reason="stop", logprobs=None)
            return SimpleNamespace(outputs=[output])

        def get_num_unfinished_requests(self) -> int:
            return 0

    remote = sys.modules["ray"].remote(FixedTokenEngine)
    return [remote.remote(remote_url, responses) for _ in range(count)]


def rollout(frameworks: SimpleNamespace, args: Any, tokenizer: Any, rows: Sequence[dict[str, Any]],
            responses: Sequence[Sequence[int]], engines: int = 1) -> list[Any]:
    """One ``SamplesGenerator.generate_samples`` batch over ``rows`` (dataset rows, ``args.data.input_key``), with
    the generation kwargs ``train_ppo_ray`` gives the trainer; the ``Experience`` list it returns."""
    strategy = SimpleNamespace(args=args, is_rank_0=lambda: True)
    from torch.utils.data import DataLoader

    dataset = frameworks.datasets.PromptDataset(list(rows), tokenizer, strategy,
                                                input_template=args.data.input_template)
    loader = DataLoader(dataset, batch_size=1, shuffle=False, collate_fn=dataset.collate_fn)
    vllm_engines = fixed_token_engines(frameworks, args.reward.remote_url, responses, engines)
    generator = frameworks.samples.SamplesGenerator(strategy, loader, None, tokenizer, vllm_engines)
    generate_kwargs = {"do_sample": True, "max_len": args.data.max_len, "max_new_tokens": args.rollout.max_new_tokens,
                       "temperature": args.rollout.temperature, "top_p": args.rollout.top_p}
    try:
        experiences, _, _, _ = generator.generate_samples(**generate_kwargs)
    finally:
        shutdown_actors()
    return experiences

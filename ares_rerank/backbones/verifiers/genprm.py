"""GenPRM (``kind="prm-genprm"``): GenPRM/GenPRM-1.5B, -7B and -32B, sampled and read as the authors' inference code
(``src/prm_evaluation/infer_module/genprm_inference.py``, class ``GenPRM``, and its demo notebook) does.

- **messages**: the system turn ``"You are a math teacher. Your task is to review and critique the paragraphs in
  solution step by step."``, the user turn ``"Question: {question}\\n\\n{step 1}"``, then for every later step an
  assistant turn and the step as a user turn; the judged step is the last user turn, ``cur_step`` its 1-based index.
  The demo fills each earlier assistant turn with the model's own critique of that step, generated before; here they
  are empty (as the demo's messages are before it fills them), so the input stays a function of (premises, step).
- **prompt**: ``apply_chat_template(messages, tokenize=False, add_generation_prompt=False)`` with a trailing
  ``eos + "\\n"`` (or ``eos``) removed (``build_prompt``), tokenized by the engine with special tokens.
- **stage 1** (analyze): ``prompt + "<analyze>\\nLet's analyze the Paragraph {cur_step} step by step: "``, sampled
  at temperature 0.6, top-p 0.95, top-k 20, up to ``max_tokens`` (2,048), stopped at ``"</analyze>\\n"`` (kept).
- **stage 2** (output; ``verify=False``: no code): ``prompt + analyze_start + text1 + "<output>\\n**Judgement**:
  $\\\\boxed"`` with ``max_tokens`` less the tokens of that continuation (the published ``tokenize(cur_prompt)``),
  stopped at ``"</output>\\n"``; an answer that does not end with it gets ``"[Code Output]\\n\\n```\\n"`` appended
  and is continued, at most ``time_limit`` (3) times, then the analysis is cut at ``</analyze>`` and the output asked
  again with 20 tokens (the published fallback; that last answer is taken whatever it ends with, where the
  published loop would ask again forever). The outputs of all samples in a round are asked together, each with its
  own budget (``generate_many``). ``verify=True`` inserts the ``<verify>`` python stage without running
  the code (the published ``execute=False`` branch); running model-written code (``execute=True``) is refused.
- **verdict**: the first ``(Yes|No)}`` in the final text (any case, capitalized); at the last occurrence of that
  decision's token (``tokenizer.encode("Yes")[-1]`` / ``"No"``) among the last stage's generated ids, the top-20
  log-probabilities plus the sampled token: the other answer's log-probability, or the smallest of them when it is
  not among them; ``P(Yes) = p_yes / (p_yes + p_no)``. No match: 0.5 (published); a decision whose token is not among
  the generated ids (the published code raises): 0.5, verdict text kept. The log-probabilities are the model's raw
  ones (vLLM V1's; the demo's vLLM 0.7.1 V0 engine returned them after temperature and top-k / top-p).
- **score**: the mean over samples (``majority_num``): ARES asks one verdict per trajectory instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..generative import (PROMPTS_PER_CALL, Generation, GenerativeVerifier, LogprobAnswer, LogprobQuery,
                          PendingVerdict, Sampling, softmax_pair)


__all__ = ["GENPRM_SYSTEM_PROMPT", "GenPRM"]

GENPRM_SYSTEM_PROMPT = ("You are a math teacher. Your task is to review and critique the paragraphs in solution step "
                        "by step.")
ANALYZE_TEMPLATE = "<analyze>\nLet's analyze the Paragraph {cur_step} step by step: "
VERIFY_TEMPLATE = "<verify>\nLet's use python code to find any potential error:\n```python\n"
OUTPUT_TEMPLATE = "<output>\n**Judgement**: $\\boxed"
CODE_OUTPUT = "[Code Output]\n\n```\n"
_DECISION = re.compile(r"(Yes|No)\}", re.IGNORECASE)


class GenPRM(GenerativeVerifier):
    """GenPRM, sampled and read as its authors' code does (see the module docstring).

    Args:
        engine: A :class:`~ares_rerank.backbones.generative.LocalEngine` or ``ServedEngine`` on the model.
        max_tokens: The generation budget of a sample (2,048).
        temperature, top_p, top_k, repetition_penalty: The published sampling (0.6, 0.95, 20, 1.0).
        verify: The ``<verify>`` stage (code written, not run); default off.
        execute: Must stay False: model-written code is never run here.
        time_limit: Continuations of stage 2 before its fallback (3).
        system_prompt: The published system turn.
        question_separator, num_samples, window: As every generative verifier (``num_samples`` 8, the demo's
            majority).
    """

    kind = "prm-genprm"
    hub_ids = ("GenPRM/GenPRM-1.5B", "GenPRM/GenPRM-7B", "GenPRM/GenPRM-32B")
    verdict_top = 20  # vLLM's logprobs=20 at the decision token: the other answer, or the smallest of them

    def __init__(self, engine: Any, *, max_tokens: int = 2048, temperature: float = 0.6, top_p: float = 0.95,
                 top_k: int = 20, repetition_penalty: float = 1.0, verify: bool = False, execute: bool = False,
                 time_limit: int = 3, system_prompt: str = GENPRM_SYSTEM_PROMPT, question_separator: str = "\n",
                 num_samples: int = 8, window: str = "refuse") -> None:
        self._init_common(engine, question_separator, num_samples, window)
        if execute:
            raise ValueError("execute=True would run the Python code GenPRM writes: ares-rerank never runs "
                             "model-written code. Use verify=True with execute=False (the code is kept in the "
                             "rationale, as the published execute=False branch does) or verify=False.")
        if not isinstance(time_limit, int) or isinstance(time_limit, bool) or time_limit < 1:
            raise ValueError(f"time_limit={time_limit!r} must be a positive whole number (stage-2 attempts), e.g. 3.")
        self.base_sampling = Sampling(temperature=temperature, top_p=top_p, top_k=top_k, max_tokens=max_tokens,
                                      repetition_penalty=repetition_penalty)
        self.max_tokens, self.verify_stage, self.time_limit = max_tokens, bool(verify), time_limit
        self.system_prompt = system_prompt
        self.yes_id = int(self.tokenizer.encode("Yes")[-1])
        self.no_id = int(self.tokenizer.encode("No")[-1])

    def new_tokens(self) -> int:
        """``max_tokens`` (the stages share it, templates included) plus the fallback's 20 and its templates."""
        fallback = ANALYZE_TEMPLATE.format(cur_step=999) + "</analyze>\n" + OUTPUT_TEMPLATE
        return self.max_tokens + 20 + self.count_tokens(fallback)

    def messages(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[dict[str, str]]:
        """The chat the published demo builds, the earlier steps' assistant turns empty (module docstring)."""
        out = [{"role": "system", "content": self.system_prompt}]
        for i, step in enumerate(steps):
            if i:
                out.append({"role": "assistant", "content": ""})
            content = f"Question: {self.question(base_claims)}\n\n{step}" if i == 0 else step
            out.append({"role": "user", "content": content})
        return out

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        messages = self.messages(base_claims, steps)
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        eos = self.tokenizer.eos_token or ""
        if eos and prompt.endswith(f"{eos}\n"):
            prompt = prompt[: -len(f"{eos}\n")]
        elif eos and prompt.endswith(eos):
            prompt = prompt[: -len(eos)]
        return self.rendered_from(messages, prompt)

    def first_stage(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, Sampling]:
        """The analysis: the prompt and the step's ``<analyze>`` opening, up to ``</analyze>``."""
        analyze_start = ANALYZE_TEMPLATE.format(cur_step=len(steps))
        stage1 = replace(self.base_sampling, stop=("</analyze>\n",), include_stop=True)
        return self.render(base_claims, steps) + analyze_start, stage1

    def finish(self, base_claims: Sequence[str], steps: Sequence[str], prompt: str,
               generations: Sequence[Generation]) -> list[PendingVerdict]:
        return self.finish_many([(base_claims, steps, prompt, generations)])[0]

    def finish_many(self, items: Sequence[tuple[Sequence[str], Sequence[str], str, Sequence[Generation]]]) -> list[
            list[PendingVerdict]]:
        """The published stage-2 loop (``verify``: code written, never run) for every sample of ``items`` in lockstep:
        each round asks the output of every sample still going together (``generate_many``, each with its own
        budget, :data:`~ares_rerank.backbones.generative.PROMPTS_PER_CALL` at a time; one ``generate`` per sample on
        an engine without it), then the verdict read (module docstring). Each output is drawn as it would be alone:
        its own text, budget and stop."""
        out, going = [], []
        for _, steps, prompt, generations in items:
            analyze_start = ANALYZE_TEMPLATE.format(cur_step=len(steps))
            prompt = prompt[: -len(analyze_start)]  # first_stage's prompt is the rendered input + the analysis opening
            samples = []
            for first in generations:
                sample = PendingVerdict(prompt, tokens=len(first.token_ids))
                cur = analyze_start + first.text + (VERIFY_TEMPLATE if self.verify_stage else OUTPUT_TEMPLATE)
                going.append(_StageTwo(sample, prompt, analyze_start, first.text, cur))
                samples.append(sample)
            out.append(samples)
        while going:
            results, requests = self._ask_outputs([self._next_ask(state) for state in going])
            going[0].sample.requests += requests
            still = []
            for state, result in zip(going, results):
                state.sample.tokens += len(result.token_ids)
                state.attempts += 1
                if result.text.endswith("</output>\n") or state.final:
                    state.sample.rationale = state.cur + result.text
                    self._read_verdict(state.sample, self.engine.encode(state.prompt + state.cur), result.token_ids)
                else:
                    state.cur = state.cur + result.text + CODE_OUTPUT  # the published execute=False continuation
                    still.append(state)
            going = still
        return out

    def _next_ask(self, state: "_StageTwo") -> tuple[str, int]:
        """The text and budget of a sample's next output request; past its budget or attempts, the published
        fallback (the analysis alone, then the output in 20 tokens), marked final."""
        left = self.max_tokens - len(self.tokenizer.tokenize(state.cur))
        state.final = not (left > 0 and state.attempts < self.time_limit)
        if state.final:
            state.cur = (state.analyze_start + state.text1.split("</analyze>")[0] + "</analyze>\n"
                         + OUTPUT_TEMPLATE)
            left = 20
        return state.prompt + state.cur, left

    def _ask_outputs(self, asks: list[tuple[str, int]]) -> tuple[list[Generation], int]:
        """One output per ``(text, budget)``, and the requests (engine calls) they took."""
        # the published execute=False branch stops at the output's end only, with or without <verify>
        stage = replace(self.base_sampling, stop=("</output>\n",), include_stop=True)
        many = getattr(self.engine, "generate_many", None)
        results: list[Generation] = []
        calls = getattr(self.engine, "calls", 0)
        for start in range(0, len(asks), PROMPTS_PER_CALL if many else 1):
            chunk = asks[start : start + (PROMPTS_PER_CALL if many else 1)]
            if many:
                results += [gens[0] for gens in many([(text, 1) for text, _ in chunk], stage,
                                                     max_tokens=[left for _, left in chunk])]
            else:
                (text, left), = chunk
                results += self.engine.generate(text, 1, replace(stage, max_tokens=left))
        return results, (self.engine.calls - calls) if many else len(asks)

    def _read_verdict(self, sample: PendingVerdict, context: list[int], generated: list[int]) -> None:
        match = _DECISION.search(sample.rationale)
        if match is None:
            sample.fixed = 0.5  # published: no \boxed{Yes/No}, a neutral score
            return
        decision = match.group(1).capitalize()
        sample.verdict_text = decision
        token, other = (self.yes_id, self.no_id) if decision == "Yes" else (self.no_id, self.yes_id)
        if token not in generated:
            sample.fixed = 0.5  # the published code raises here (list.index): neutral instead
            return
        at = len(generated) - 1 - generated[::-1].index(token)
        sample.queries = [LogprobQuery(context + list(generated[:at]), token)]

        def read(answers: list[LogprobAnswer]) -> float:
            (answer,) = answers
            table = {**answer.top, token: answer.logprob}  # the top 20 and the sampled token, as vLLM returns them
            own = answer.logprob
            alt = table.get(other, min(table.values()))  # published: the smallest returned when it is not there
            return softmax_pair(own, alt) if decision == "Yes" else softmax_pair(alt, own)

        sample.read = read


@dataclass
class _StageTwo:
    """One sample's place in GenPRM's stage-2 loop: its prompt, analysis and the continuation asked so far."""

    sample: PendingVerdict
    prompt: str
    analyze_start: str
    text1: str
    cur: str
    attempts: int = 0
    final: bool = False

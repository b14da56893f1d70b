"""ThinkPRM (``kind="prm-thinkprm"``): launch/ThinkPRM-1.5B, -7B and -14B, sampled and read as the authors' API
verifier (``prm/thinkprm_api.py``, ``APIThinkPRMVerifier``, with ``utils/helper.py``'s template) does, in its
process-verifier setting (``process_verifier=True``, what its step-level beam search runs).

- **solution**: each step with any ``Step <n>:`` removed and stripped, then prefixed ``"Step {i}: "``, joined by
  newlines (an empty solution is one empty step, as published); the judged step is the last.
- **prompt**: the published instruction template (``[Math Problem]`` / ``[Solution]`` and the default instruction,
  filled by successive ``str.replace`` as published) as the user turn of the tokenizer's chat template with the
  generation prompt, then ``"\\nLet's verify step by step:"``.
- **verification**: sampled at temperature 0.7 (``APIThinkPRMVerifier``'s default; top-p 1, no top-k, as sglang)
  for at most ``max_length - 20`` tokens, stopped (not kept, as sglang) at ``"Is the solution correct?"``, the eos
  token, ``"</think>"`` and ``"Step {max + 1}:"`` (``max``: the largest number after ``Step`` in the prompt, compared as
  text, as the published ``max`` over the matched strings is).
- **verdict**: ``"\\nIs the solution correct? "`` appended, then sglang's ``select`` over ``("yes", "no")``: each
  choice's tokens are those of ``text + choice`` from the prompt's last token on, the first dropped when its text is
  still a suffix of the prompt (sglang's token healing); the choice's score is the mean log-probability of those
  tokens, and ``P(yes) = softmax(scores / decision_temperature)[0]`` (temperature 1). With Qwen-style tokenizers the
  choice absorbs the trailing space (``"?"``, ``" yes"``), so the score is ``log P(" yes" | ...correct?)``.
- **score**: the mean over the ``n`` parallel samples (ARES asks one per trajectory instead).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from ..generative import Generation, GenerativeVerifier, LogprobAnswer, LogprobQuery, PendingVerdict, Sampling


__all__ = ["THINKPRM_INSTRUCTION", "THINKPRM_TEMPLATE", "ThinkPRM"]

THINKPRM_INSTRUCTION = ("Review and critique each step in the proposed solution to determine whether each step is "
                        "correct. If the solution is incomplete, only verify the provided steps.")
THINKPRM_TEMPLATE = ("You are given a math problem and a proposed step-by-step solution:\n\n[Math Problem]\n\n"
                     "{problem}\n\n[Solution]\n\n{solution}\n\n{_instruction}")
_STEP_LABEL = re.compile(r"Step \d+:")
_STEP_NUMBER = re.compile(r"Step (\d+):")


class ThinkPRM(GenerativeVerifier):
    """ThinkPRM, sampled and read as its authors' API verifier does (see the module docstring).

    Args:
        engine: A :class:`~ares_rerank.backbones.generative.LocalEngine` or ``ServedEngine`` on the model.
        max_length: The verification budget (8,192; ``max_length - 20`` tokens are generated).
        temperature: The verification's sampling temperature (0.7).
        decision_temperature: Divides the choices' scores before their softmax (1.0).
        predecision_string: Placed before the choice (``"\\nIs the solution correct? "``).
        label_categories: The choices, the first scored (``("yes", "no")``).
        process_verifier: Prefix the steps ``"Step {i}: "`` and stop at the next step number (True).
        instruction: The instruction (default: the one the models were trained with).
        question_separator, num_samples, window: As every generative verifier.
    """

    kind = "prm-thinkprm"
    hub_ids = ("launch/ThinkPRM-1.5B", "launch/ThinkPRM-7B", "launch/ThinkPRM-14B")

    def __init__(self, engine: Any, *, max_length: int = 8192, temperature: float = 0.7,
                 decision_temperature: float = 1.0, predecision_string: str = "\nIs the solution correct? ",
                 label_categories: Sequence[str] = ("yes", "no"), process_verifier: bool = True,
                 instruction: str | None = None, question_separator: str = "\n", num_samples: int = 4,
                 window: str = "refuse") -> None:
        self._init_common(engine, question_separator, num_samples, window)
        if not isinstance(max_length, int) or max_length <= 20:
            raise ValueError(f"max_length={max_length!r} must be a whole number above 20 (tokens), e.g. 8192.")
        if not isinstance(decision_temperature, (int, float)) or decision_temperature <= 0:
            raise ValueError(f"decision_temperature={decision_temperature!r} must be a number > 0, e.g. 1.0.")
        labels = list(label_categories)
        if len(labels) < 2 or not all(isinstance(c, str) and c for c in labels):
            raise ValueError(f"label_categories={label_categories!r} must be at least two non-empty strings, the "
                             "first the one scored, e.g. ('yes', 'no').")
        self.sampling = Sampling(temperature=temperature, max_tokens=max_length - 20)
        self.decision_temperature = float(decision_temperature)
        self.predecision_string, self.labels = predecision_string, labels
        self.process_verifier, self.instruction = bool(process_verifier), instruction or THINKPRM_INSTRUCTION

    def new_tokens(self) -> int:
        """The verification's budget, the pre-decision string and the longest choice."""
        return (self.sampling.max_tokens + self.count_tokens(self.predecision_string)
                + max(self.count_tokens(c) for c in self.labels) + 1)

    def solution(self, steps: Sequence[str]) -> str:
        """The steps as the published ``process_example`` writes them."""
        steps = list(steps) or [""]
        lines = []
        for i, step in enumerate(steps):
            step = _STEP_LABEL.sub("", step).strip()
            lines.append((f"Step {i + 1}: " if self.process_verifier else "") + step)
        return "\n".join(lines)

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        user = (THINKPRM_TEMPLATE.replace("{problem}", self.question(base_claims))
                .replace("{solution}", self.solution(steps)).replace("{_instruction}", self.instruction))
        messages = [{"role": "user", "content": user}]
        chat = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.rendered_from(messages, chat) + "\nLet's verify step by step:"

    def stops(self, prompt: str) -> tuple[str, ...]:
        """The published stop patterns for this prompt."""
        stops = ["Is the solution correct?", self.tokenizer.eos_token or "", "</think>"]
        if self.process_verifier:
            numbers = _STEP_NUMBER.findall(prompt)
            top = int(max(numbers)) if numbers else 1  # max over the strings, as published ("9" > "10")
            stops.append(f"Step {top + 1}:")
        return tuple(s for s in stops if s)

    def first_stage(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, Sampling]:
        """The verification chain, stopped where the published stops say (they depend on the step's number)."""
        prompt = self.render(base_claims, steps)
        return prompt, replace(self.sampling, stop=self.stops(prompt))

    def finish(self, base_claims: Sequence[str], steps: Sequence[str], prompt: str,
               generations: Sequence[Generation]) -> list[PendingVerdict]:
        samples = []
        for gen in generations:
            sample = PendingVerdict(prompt, gen.text + self.predecision_string, tokens=len(gen.token_ids))
            self._choices(sample, prompt + sample.rationale)
            samples.append(sample)
        return samples

    def choice_tokens(self, text: str, choice: str) -> tuple[list[int], int]:
        """``(ids of text + choice, where the choice's scored tokens start)``: sglang's ``select`` with its token
        healing (module docstring)."""
        full = self.engine.encode(text + choice)
        start = max(len(self.engine.encode(text)) - 1, 0)
        if start < len(full) - 1 and text.endswith(self.tokenizer.decode([full[start]])):
            start += 1  # the prompt's own last token, unchanged by the choice: not the choice's
        return full, start

    def _choices(self, sample: PendingVerdict, text: str) -> None:
        spans = []
        for choice in self.labels:
            full, start = self.choice_tokens(text, choice)
            spans.append(len(sample.queries))
            sample.queries += [LogprobQuery(full[:j], full[j]) for j in range(start, len(full))]
        spans.append(len(sample.queries))
        labels, temperature = self.labels, self.decision_temperature

        def read(answers: list[LogprobAnswer]) -> float:
            means = np.array([np.mean([a.logprob for a in answers[spans[c]: spans[c + 1]]])
                              for c in range(len(labels))])
            scores = np.exp((means - means.max()) / temperature)  # shifted: the same softmax, no overflow
            sample.verdict_text = labels[int(np.argmax(means))]
            return float(scores[0] / scores.sum())

        sample.read = read

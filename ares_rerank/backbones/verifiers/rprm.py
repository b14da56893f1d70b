"""R-PRM (``kind="prm-rprm"``): kevinpro/R-PRM-7B-DPO, sampled and read as the authors' evaluation pipeline does
(``src/evaluate/PRMBench/code/inference.py`` samples the analyses, ``src/evaluate/GenPRM/evaluate-PRM-CoT.py`` reads
them, the prompt ``src/prompts/GenPRM/GenPRM-evaluate-new3-qwen.txt``; previous steps as its guided search joins
them).

- **prompt**: the published text, ChatML written out in it (no chat template applied; it ends in the two
  characters backslash-n twice, as the file does), ``str.format``-ed with the question, the previous steps joined
  by newlines (``"Since the Now Step is the first step, there are no Previous Steps."`` when there are none) and the
  judged step; for generation ``"left-brackets"`` / ``"right-brackets"`` then become ``{`` / ``}`` (published).
- **analyses**: sampled at temperature 0.95, top-p 1, up to 4,096 tokens, no stop string; each answer is stripped
  (``.strip().strip("\\\\").strip("\\\\n").strip()``: character sets, as published) and its lines stripped and
  re-joined (``split_text``).
- **verdict**: the analysis cut after ``"Is the step correct (Yes/No)?"`` (or, without it, followed by ``"\\nBased on
  your analysis. Is the answer correct (Yes/No)?"``) is appended to the prompt, tokenized with special tokens, and
  ``P(Yes) = softmax(logits[" Yes"], logits[" No"])[0]`` at the last position (the first token of each).
- **score**: the mean over K = 10 analyses (ARES asks one per trajectory instead).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..generative import Generation, GenerativeVerifier, PendingVerdict, Sampling


__all__ = ["RPRM", "RPRM_PROMPT", "split_text"]

# GenPRM-evaluate-new3-qwen.txt as published: its last line ends in a backslash and "n" (twice), not newlines.
RPRM_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nYou are an excellent math teacher. "
    "Please verify the correctness of the Now Step.\n\nYou first need to analyze the Now Step and the Previous Steps "
    "and then summarize based on your analysis.\nAnalysis:\nYou need to analyze the following aspects.\n**Previous "
    "Steps Analysis**: You need to analyze the Previous Steps step by step. For each step, you need to first explain "
    "what the current step is doing, then you try to find any error in the current step.\n**Now Step Analysis**: You "
    "first need to explain what the Now Step is doing, and then point out which part of the Question it is trying to "
    "solve or which part of the information it states.\n**Data Source Analysis**: First you need to find out what "
    "data are used in the Now Step, and then you need to determine whether the source of the data is reasonable and "
    "correct. When you judge whether the source of a data is reasonable and correct, you need to specify the "
    "specific source of this data: such as which part of the question, or which content of the previous step; and "
    "then determine the source and current use is consistent, the Now Step is used correctly.\n**Consistency "
    "Analysis**: You need to check that the Now Step is consistent with the contents of the Previous Steps, and then "
    "you need to check that all the information inside the Now Step is consistent.\n**Calculation Analysis**: If the "
    "Now Step involves any calculations, such as addition, subtraction, multiplication, division, equations, modulo "
    "operations, etc., you will first need to perform a check on the calculation, such as a reverse operation, to "
    "see if the calculation was done correctly, and then analyze the results of your check to see if there was an "
    "error in the calculation.\nConclusion: \nPlease verify the correctness of the Now Step based on your analysis, "
    "if there is any error in the Now Step then the Now Step is wrong and vice versa the Now Step is correct. At the "
    "end of the Conclusion, when you give your final answer, write it in the form \"Verification: Is the step correct "
    "(Yes/No)? X\", where X is either Yes or No.\n\nQuestion: {}\nPrevious Steps: {}\nNow Step: {}\nPlease carefully "
    "analyze the correctness of the Now Step.\nReply: <|im_end|>\\n<|im_start|>assistant\\n"
)
CHATML_SYSTEM = "You are a helpful assistant."
CHATML_HEAD = f"<|im_start|>system\n{CHATML_SYSTEM}<|im_end|>\n<|im_start|>user\n"  # how RPRM_PROMPT begins
NO_PREVIOUS = "Since the Now Step is the first step, there are no Previous Steps."
MARKER = "Is the step correct (Yes/No)?"
FALLBACK = "\nBased on your analysis. Is the answer correct (Yes/No)?"


def split_text(text: str) -> str:
    """The published post-processing: lines (split at newlines and at literal backslash-n) stripped, re-joined."""
    lines = [part.strip() for line in text.split("\n") for part in line.split("\\n")]
    return "\n".join(lines)


class RPRM(GenerativeVerifier):
    """R-PRM, sampled and read as its authors' evaluation does (see the module docstring).

    Args:
        engine: A :class:`~ares_rerank.backbones.generative.LocalEngine` or ``ServedEngine`` on the model.
        temperature, top_p, max_tokens: The published sampling (0.95, 1.0, 4,096).
        question_separator, num_samples, window: As every generative verifier (``num_samples`` 10, the published
            K).
    """

    kind = "prm-rprm"
    hub_ids = ("kevinpro/R-PRM-7B-DPO",)

    def __init__(self, engine: Any, *, temperature: float = 0.95, top_p: float = 1.0, max_tokens: int = 4096,
                 question_separator: str = "\n", num_samples: int = 10, window: str = "refuse") -> None:
        self._init_common(engine, question_separator, num_samples, window)
        self.sampling = Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens)
        self.yes_id = int(self.tokenizer.encode(" Yes", add_special_tokens=False)[0])
        self.no_id = int(self.tokenizer.encode(" No", add_special_tokens=False)[0])

    def new_tokens(self) -> int:
        """The analysis budget and the fallback question appended before the read."""
        return self.sampling.max_tokens + self.count_tokens(FALLBACK) + 1

    def fields(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, str, str]:
        previous = "\n".join(steps[:-1]) if len(steps) > 1 else NO_PREVIOUS
        return self.question(base_claims), previous, steps[-1]

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        """The generation prompt (with the published bracket words replaced)."""
        prompt = RPRM_PROMPT.format(*self.fields(base_claims, steps))
        return self.chatml(prompt.replace("left-brackets", "{").replace("right-brackets", "}"))

    def chatml(self, text: str) -> str:
        """``text`` (the published prompt, ChatML written out), told to a chat engine as its system and user turns:
        a ChatML template continuing the user turn renders it back exactly (the literal backslash-n included)."""
        return self.rendered_from([{"role": "system", "content": CHATML_SYSTEM},
                                   {"role": "user", "content": text[len(CHATML_HEAD):]}], text)

    def finish(self, base_claims: Sequence[str], steps: Sequence[str], prompt: str,
               generations: Sequence[Generation]) -> list[PendingVerdict]:
        scoring = self.chatml(RPRM_PROMPT.format(*self.fields(base_claims, steps)))  # formatted anew, as published
        samples = []
        for gen in generations:
            response = split_text(gen.text.strip().strip("\\").strip("\\n").strip())
            if MARKER in response:
                response = response.split(MARKER)[0] + MARKER
            else:
                response = response + FALLBACK
            sample = PendingVerdict(prompt, response, tokens=len(gen.token_ids))
            said = gen.text.split(MARKER, 1)[1].split() if MARKER in gen.text else []
            sample.verdict_text = said[0].strip(".*") if said and said[0].strip(".*") in ("Yes", "No") else ""
            self.next_token_read(sample, scoring + response, self.yes_id, self.no_id)
            samples.append(sample)
        return samples

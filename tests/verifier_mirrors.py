"""Offline mirrors of published generative verifiers: tiny causal LMs built from configs, with locally trained
tokenizers carrying each family's special tokens and chat template (random weights, tiny sizes).

Facts taken from the published models:

- GenPRM (GenPRM/GenPRM-1.5B, -7B, -32B) and ThinkPRM (launch/ThinkPRM-1.5B, -14B) are fine-tuned
  DeepSeek-R1-Distill-Qwen models: a Qwen2 causal LM; a byte-level BPE tokenizer whose ``encode`` adds BOS
  ``<｜begin▁of▁sentence｜>``, eos (and pad) ``<｜end▁of▁sentence｜>``, ``<｜User｜>`` / ``<｜Assistant｜>`` /
  ``<think>`` / ``</think>`` tokens, and R1-Distill's chat template (written here without its tool branches, which
  do not render for these messages): BOS, the system text, ``<｜User｜>`` + user turns, ``<｜Assistant｜>`` +
  assistant turns + eos, and ``<｜Assistant｜><think>\\n`` as the generation prompt.
- R-PRM (kevinpro/R-PRM-7B-DPO) is a fine-tuned Qwen2.5-Math-7B-Instruct: a Qwen2 causal LM and the Qwen2.5
  tokenizer (ChatML specials, no BOS); its prompt writes ChatML out in the text, so no chat template is applied.

**Steered weights.** A random model samples uniformly over a few hundred tokens and would never write a verdict
such as ``Yes}``. So one hidden coordinate is held at a large constant (its embedding column set, the attention
and MLP outputs kept out of it) and the output layer reads it as a penalty on every token except a few favoured
ones (the verdict words, braces, newlines): the model then samples, nearly uniformly, among those, and the families'
parsers meet real verdicts. Everything else stays random; nothing is trained.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
from tokenizers import models as tok_models
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM


__all__ = ["R1_TEMPLATE", "genprm_mirror", "rprm_mirror", "thinkprm_mirror"]

R1_BOS, R1_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
R1_SPECIAL = [R1_BOS, R1_EOS, "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"]
# DeepSeek-R1-Distill-Qwen's chat template without its tool branches.
R1_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}"
    "{%- for message in messages %}{%- if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}"
    "{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}"
    "{% set content = message['content'] %}{% if '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}"
    "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
)
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CORPUS = [
    "Question: Janet's ducks lay 16 eggs per day. She eats three for breakfast. How many are left?",
    "Step 1: 16 - 3 = 13 eggs left. Step 2: 13 * 2 = 26. The answer is 26.",
    "<analyze>\nLet's analyze the Paragraph 1 step by step: the formula is correct.\n</analyze>\n",
    "<output>\n**Judgement**: $\\boxed{Yes}$\n</output>\n <output>\n**Judgement**: $\\boxed{No}$\n</output>\n",
    "[Code Output]\n\n```\n5050\n```\n <verify>\nLet's use python code to find any potential error:\n```python\n",
    "You are a math teacher. Your task is to review and critique the paragraphs in solution step by step.",
    "You are given a math problem and a proposed step-by-step solution: [Math Problem] [Solution]",
    "Review and critique each step in the proposed solution to determine whether each step is correct.",
    "Let's verify step by step: Step 1 is \\boxed{correct} Step 2 is \\boxed{incorrect}",
    "Is the solution correct? yes Is the solution correct? no Is the solution correct? yes",
    "Verification: Is the step correct (Yes/No)? Yes Is the step correct (Yes/No)? No",
    "Previous Steps: Now Step: Since the Now Step is the first step, there are no Previous Steps.",
    "Based on your analysis. Is the answer correct (Yes/No)? Yes No Yes No yes no",
]
# What the steered models sample among (module docstring).
FAVOURED = ["Yes", "No", "}", " yes", " no", " Yes", " No", "\n", " step"]


def _byte_level(special: list[str], vocab_size: int = 600) -> Tokenizer:
    tok = Tokenizer(tok_models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 8, trainer=trainer)
    return tok


def r1_tokenizer() -> PreTrainedTokenizerFast:
    """A DeepSeek-R1-Distill-Qwen-style tokenizer: byte-level BPE, BOS added by ``encode``, its chat template."""
    tok = _byte_level(R1_SPECIAL)
    bos = tok.token_to_id(R1_BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{R1_BOS} $A", pair=f"{R1_BOS} $A {R1_BOS} $B",
                                                       special_tokens=[(R1_BOS, bos)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=R1_BOS, eos_token=R1_EOS, pad_token=R1_EOS,
                                        additional_special_tokens=R1_SPECIAL[2:])
    tokenizer.chat_template = R1_TEMPLATE
    return tokenizer


def qwen25_tokenizer() -> PreTrainedTokenizerFast:
    """A Qwen2.5-style tokenizer: byte-level BPE, ChatML special tokens, no BOS."""
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_byte_level(QWEN_SPECIAL), eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>",
                                        additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    return tokenizer


def _steered_qwen2(tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = Qwen2ForCausalLM(config)
    favoured = sorted({t for text in FAVOURED for t in tokenizer.encode(text, add_special_tokens=False)})
    d = config.hidden_size - 1
    with torch.no_grad():
        model.model.embed_tokens.weight[:, d] = 10.0  # a constant coordinate, in every position's residual stream
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[d, :] = 0.0
            layer.mlp.down_proj.weight[d, :] = 0.0
        model.lm_head.weight.mul_(4.0)
        model.lm_head.weight[:, d] = -2.0  # read back as a penalty on every token...
        model.lm_head.weight[favoured, d] = 0.0  # ...but the favoured ones
    return model.eval()


def _save(model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerFast, path: str | Path) -> Path:
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def genprm_mirror(path: str | Path, seed: int = 0) -> Path:
    """GenPRM: a Qwen2 causal LM on R1-Distill's tokenizer and chat template (steered)."""
    tokenizer = r1_tokenizer()
    return _save(_steered_qwen2(tokenizer, seed), tokenizer, path)


def thinkprm_mirror(path: str | Path, seed: int = 1) -> Path:
    """ThinkPRM: the same base as GenPRM (R1-Distill-Qwen), other random weights."""
    tokenizer = r1_tokenizer()
    return _save(_steered_qwen2(tokenizer, seed), tokenizer, path)


def rprm_mirror(path: str | Path, seed: int = 2) -> Path:
    """R-PRM: a Qwen2 causal LM on the Qwen2.5 tokenizer (steered)."""
    tokenizer = qwen25_tokenizer()
    return _save(_steered_qwen2(tokenizer, seed), tokenizer, path)

"""Offline mirrors of the policy tokenizers RL trainers template prompts with: the special tokens and the chat
template layout of each family's instruct model, on a small byte-level BPE trained here (nothing downloaded).

The templates are written here to render what the published ones render for user / assistant / system messages
(tool branches left out): Qwen2.5-Instruct (ChatML with its default system turn), Llama-3.1-Instruct (the system
turn with its knowledge-date lines, :data:`prm_mirrors.LLAMA31_TEMPLATE`), DeepSeek-R1 (the system prompt before the
first header, ``<think>\\n`` opening the generation), Mistral-Instruct v0.3 (``[INST] ... [/INST]``), Gemma-2-it
(``model`` for the assistant, no system role) and Phi-3-mini-instruct.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from prm_mirrors import LLAMA31_TEMPLATE


__all__ = ["POLICY_FAMILIES", "policy_tokenizer"]

QWEN25_INSTRUCT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if message.role == 'user' or message.role == 'assistant' "
    "or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

DEEPSEEK_R1_TEMPLATE = (
    "{%- set system = namespace(text='') %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{%- set system.text = message['content'] %}{%- endif %}{%- endfor %}"
    "{{- bos_token }}{{- system.text }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{- '<｜User｜>' + message['content'] }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{%- set content = message['content'] %}{%- if '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1] %}{%- endif %}"
    "{{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<｜Assistant｜><think>\\n' }}{%- endif %}"
)

MISTRAL_V03_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{- '[INST] ' + message['content'] + '[/INST]' }}"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] | trim + eos_token }}"
    "{%- else %}{{- raise_exception('Only user and assistant roles are supported!') }}{%- endif %}{%- endfor %}"
)

GEMMA2_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}{{- raise_exception('System role not supported') }}{%- endif %}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{- '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"
)

PHI3_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] in ['system', 'user', 'assistant'] %}"
    "{{- '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- else %}{{- eos_token }}{%- endif %}"
)

# family -> (chat template, special tokens, bos, eos, pad, the known layout's name)
POLICY_FAMILIES = {
    "qwen2.5": (QWEN25_INSTRUCT_TEMPLATE, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, "<|im_end|>",
                "<|endoftext|>", "chatml"),
    "llama3.1": (LLAMA31_TEMPLATE, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                    "<|end_header_id|>", "<|eot_id|>"], "<|begin_of_text|>", "<|eot_id|>",
                 "<|end_of_text|>", "llama3"),
    "deepseek-r1": (DEEPSEEK_R1_TEMPLATE, ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>",
                                           "<｜Assistant｜>", "<think>", "</think>"], "<｜begin▁of▁sentence｜>",
                    "<｜end▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "deepseek"),
    "mistral": (MISTRAL_V03_TEMPLATE, ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"], "<s>", "</s>", None,
                "mistral"),
    "gemma2": (GEMMA2_TEMPLATE, ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"], "<bos>", "<eos>",
               "<pad>", "gemma"),
    "phi3": (PHI3_TEMPLATE, ["<unk>", "<s>", "</s>", "<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>",
                             "<|end|>"], "<s>", "<|endoftext|>", "<|endoftext|>", "phi3"),
}

_CORPUS = [
    "We have pepper. We have garlic. Because we have completed all previous steps, we can now do the step.",
    "Let x = 3. Then 2x = 6, so x + 1 = 4. The answer is 5. Step one. Step two.",
    "I have AB, I use rule (AB -> CD) to derive CD, now I have CD. Rule: AB -> CD",
    "system user assistant model You are a helpful assistant. Cutting Knowledge Date: December 2023 Today Date",
    "The quick brown fox jumps over the lazy dog; 0 1 2 3 4 5 6 7 8 9 = * / ( ) , . : ? !",
]


def policy_tokenizer(family: str) -> PreTrainedTokenizerFast:
    """A tokenizer with ``family``'s special tokens and chat template (see the module docstring)."""
    template, special, bos, eos, pad, _ = POLICY_FAMILIES[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=pad,
                                        additional_special_tokens=[t for t in special if t not in (bos, eos, pad)])
    tokenizer.chat_template = template
    return tokenizer

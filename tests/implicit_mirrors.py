"""Offline mirrors of an implicit PRM and its reference model: EurusPRM-Stage1/2 and Qwen2.5-Math-7B-Instruct.

Facts taken from the published files: both are ``Qwen2ForCausalLM`` (``model_type: "qwen2"``, untied output
embedding, the same vocabulary), the PRM's config with ``bos_token_id`` / ``pad_token_id`` 151643
(``<|endoftext|>``) and ``eos_token_id`` 151645 (``<|im_end|>``); Qwen2.5's tokenizer (byte-level BPE, no BOS, its
special tokens, ``"\\n\\n"`` one token) with Qwen2.5-Math's ChatML template, whose default system turn is "Please
reason step by step, and put your final answer within \\boxed{}.". The PRM is a fine-tune of the reference, so the
mirror's PRM is the reference's weights plus a small random change (their log-probabilities differ, but not wildly).
Sizes are tiny and the weights random; nothing here scores anything (tests/backbones/test_implicit_prm.py does).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from prm_mirrors import CORPUS, QWEN_TEMPLATE


__all__ = ["QWEN25_SPECIAL", "eurus_mirror", "qwen25_math_tokenizer"]

# Qwen2.5's special tokens, in their published order (ids 151643...).
QWEN25_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
]
# Qwen2's pre-tokenizer split (its tokenizer.json): digits one by one, "\n\n" one piece.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
               r"\s+(?!\S)|\s+")
# Step-by-step text with "\n\n" between steps, so the mirror's BPE learns "\n\n" as one token (as Qwen2.5's has).
_STEPS_CORPUS = [
    "Step 1: 16 - 3 = 13 eggs left.\n\nStep 2: 13 - 4 = 9.\n\nStep 3: 9 * 2 = 18.\n\nThe answer is: 18",
    "Let x = 3.\n\nThen 2x = 6.\n\nSo x + y = 7.\n\nThe answer is \\boxed{7}.",
]


def qwen25_math_tokenizer() -> PreTrainedTokenizerFast:
    """A Qwen2.5-Math-style tokenizer: byte-level BPE, no BOS, Qwen2.5's special tokens, Qwen2.5-Math's template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=QWEN25_SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((CORPUS + _STEPS_CORPUS) * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=QWEN25_SPECIAL[1:])
    tokenizer.chat_template = QWEN_TEMPLATE
    return tokenizer


def eurus_mirror(root: str | Path, seed: int = 0, spread: float = 0.3) -> tuple[Path, Path]:
    """Save a tiny EurusPRM (``root/prm``) and its reference Qwen2.5-Math-Instruct (``root/ref``).

    Args:
        root: The folder for both.
        seed: Seeds the reference's weights and the PRM's change.
        spread: The PRM's weights are the reference's plus ``spread`` times a random normal of each weight's std.

    Returns:
        ``(prm folder, reference folder)``, each loadable with ``from_pretrained``.
    """
    root = Path(root)
    tokenizer = qwen25_math_tokenizer()
    pad, eos = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         tie_word_embeddings=False, bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    torch.manual_seed(seed)
    ref = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # peaked next-token distributions (random tiny models are near uniform otherwise)
        ref.lm_head.weight.mul_(30.0)
    prm = Qwen2ForCausalLM(config).eval()
    prm.load_state_dict(ref.state_dict())
    with torch.no_grad():
        for weight in prm.parameters():
            weight.add_(torch.randn_like(weight) * spread * (weight.std() if weight.numel() > 1 else 1.0))
    folders = []
    for name, model in (("prm", prm), ("ref", ref)):
        path = root / name
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        config_file = path / "config.json"
        published = json.loads(config_file.read_text())
        published.update(architectures=["Qwen2ForCausalLM"], model_type="qwen2")
        config_file.write_text(json.dumps(published, indent=2))
        folders.append(path)
    return folders[0], folders[1]

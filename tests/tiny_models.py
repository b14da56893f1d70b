"""Tiny models built offline for tests: a locally trained tokenizer and tiny Qwen2 / BERT models saved to disk, and a
local Hugging Face Hub cache to load them from by hub id (:func:`hub_cache_repo`).

Nothing is downloaded. Every builder saves with ``save_pretrained`` and returns the directory, so tests load the
models back through the real ``Auto*.from_pretrained`` path, exactly as users load real checkpoints.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2ForTokenClassification,
)


__all__ = [
    "CHAT_TEMPLATE",
    "STEP_TAG",
    "build_tokenizer",
    "hub_cache_repo",
    "tiny_bert_classifier",
    "tiny_qwen2_causal_lm",
    "tiny_qwen2_token_classifier",
    "tiny_remote_code_prm",
]

STEP_TAG = "<extra_0>"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", STEP_TAG, "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"]

# A Qwen-style ChatML template (system turn optional), enough for apply_chat_template and add_generation_prompt.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "Rule: AB -> CD (meaning that if I have AB, I can derive CD)",
    "I have AB, I use rule (AB -> CD) to derive CD, now I have CD",
    "I have XY. Question: what is 2 + 3? Answer: 5. The answer is 5.",
    "Does the context entail the hypothesis? Answer Yes or No. Yes No Yes No",
    "Context: Hypothesis: Step: Very Likely Likely Somewhat Likely Neutral Somewhat Unlikely Unlikely Very Unlikely",
    "We have pepper. We have garlic. Because we have completed all previous steps, we can now do the step.",
    "Let x = 3. Then 2x = 6, so x + 1 = 4. + - + - ki na",
    "The quick brown fox jumps over the lazy dog; 0 1 2 3 4 5 6 7 8 9 = * / ( ) , . : ? !",
]


def build_tokenizer(vocab_size: int = 400, pair_template: bool = False) -> PreTrainedTokenizerFast:
    """Train a small byte-level BPE tokenizer on a fixed corpus (deterministic, offline, ~1 s).

    ``pair_template=True`` adds BERT's ``[CLS] A [SEP] B [SEP]`` post-processing for sentence-pair encoders.
    """
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    if pair_template:
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="[UNK]",
    )
    fast.add_special_tokens({"additional_special_tokens": [STEP_TAG]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _qwen2_config(tokenizer: PreTrainedTokenizerFast, **kwargs) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
        **kwargs,
    )


def _save(model: torch.nn.Module, tokenizer: PreTrainedTokenizerFast, path: str | Path) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def tiny_qwen2_causal_lm(path: str | Path, seed: int = 0) -> Path:
    """A 2-layer Qwen2ForCausalLM (~30k params) with a chat template; returns the saved directory."""
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    return _save(Qwen2ForCausalLM(_qwen2_config(tokenizer)), tokenizer, path)


def tiny_qwen2_token_classifier(path: str | Path, seed: int = 0, kind: str | None = "prm") -> Path:
    """A 2-label Qwen2ForTokenClassification read with the configurable layout (ChatML, step tag ``<extra_0>``).

    ``kind`` is recorded in its config as ``ares-rerank train prm`` records it (``ares_kind``), so ``load_backbone``
    detects kind ``"prm"``; ``None`` leaves it out: a token classifier as TRL's PRMTrainer saves it (``"prm-trl"``).
    """
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    config = _qwen2_config(tokenizer, num_labels=2, id2label={0: "negative", 1: "positive"},
                           label2id={"negative": 0, "positive": 1})
    if kind is not None:
        config.ares_kind = kind
    return _save(Qwen2ForTokenClassification(config), tokenizer, path)


def tiny_bert_classifier(
    path: str | Path,
    num_labels: int = 2,
    id2label: dict[int, str] | None = None,
    seed: int = 0,
) -> Path:
    """A 2-layer BertForSequenceClassification; default labels: 2-way not_entailment/entailment, or MNLI's 3-way."""
    torch.manual_seed(seed)
    tokenizer = build_tokenizer(pair_template=True)
    tokenizer.cls_token, tokenizer.sep_token, tokenizer.mask_token = "[CLS]", "[SEP]", "[MASK]"
    if id2label is None:
        id2label = (
            {0: "not_entailment", 1: "entailment"}
            if num_labels == 2
            else {0: "entailment", 1: "neutral", 2: "contradiction"}
        )
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=num_labels,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    return _save(BertForSequenceClassification(config), tokenizer, path)


REMOTE_PRM_MODELING = '''
import torch
from transformers import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput


class TinyPRMConfig(Qwen2Config):
    model_type = "tiny_prm"


class TinyQwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    config_class = TinyPRMConfig

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.score = torch.nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return TokenClassifierOutput(logits=self.score(hidden))
'''


def tiny_remote_code_prm(path: str | Path, seed: int = 0) -> Path:
    """:func:`tiny_qwen2_token_classifier` shipped as remote code, the way Qwen2.5-Math-PRM is: its own modeling file,
    ``model_type`` unknown to transformers, and an ``auto_map`` with ``AutoModel`` only (needs ``trust_remote_code``).
    """
    import json

    path = tiny_qwen2_token_classifier(path, seed=seed)
    (path / "modeling_tiny_prm.py").write_text(REMOTE_PRM_MODELING)
    config = json.loads((path / "config.json").read_text())
    config.update(model_type="tiny_prm", architectures=["TinyQwen2ForProcessRewardModel"],
                  auto_map={"AutoConfig": "modeling_tiny_prm.TinyPRMConfig",
                            "AutoModel": "modeling_tiny_prm.TinyQwen2ForProcessRewardModel"})
    (path / "config.json").write_text(json.dumps(config))
    return path


def hub_cache_repo(
    cache_dir: str | Path,
    repo_id: str,
    folder: str | Path,
    *,
    commit: str | None = None,
    refs: tuple[str, ...] = ("main",),
    known_missing: tuple[str, ...] = (),
) -> str:
    """Put the files of ``folder`` into a Hugging Face Hub cache at ``cache_dir``, laid out as ``hf_hub_download``
    leaves a download: ``models--owner--name/blobs/<sha256>``, ``snapshots/<commit>/<file>`` (a link to its blob) and
    ``refs/<ref>`` holding the commit; ``known_missing`` files get the ``.no_exist/<commit>/<file>`` record that the
    Hub said the repo lacks them. Then ``from_pretrained(repo_id, cache_dir=cache_dir)`` works offline.

    Args:
        cache_dir: The cache root (what ``HF_HUB_CACHE`` or ``cache_dir=`` names).
        repo_id: ``"owner/name"``.
        folder: A saved model, adapter or head (every file under it, kept relative).
        commit: The 40-hex commit id (default: a hash of the files, so each saved version gets its own).
        refs: Branches / tags that point at this commit (the last call for a ref wins).
        known_missing: File names recorded as absent from the repo at this commit.

    Returns:
        The commit id.
    """
    import hashlib
    import os

    folder, repo = Path(folder), Path(cache_dir) / f"models--{repo_id.replace('/', '--')}"
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    digest = hashlib.sha1()
    for path in files:
        digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    commit = commit or digest.hexdigest()
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for path in files:
        data = path.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / path.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, link.parent))
    for name in known_missing:
        marker = repo / ".no_exist" / commit / name
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return commit

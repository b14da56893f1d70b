"""Offline mirrors of published PRMs: each family's config class and architecture name, a tokenizer with its
published special tokens and chat template, its head layout and weight names, random weights (tiny sizes).

Nothing here scores anything: the tests (tests/backbones/test_prm_families.py) run each family's published scoring code,
re-written there, beside the project on these folders. Facts taken from the published files:

- Qwen2.5-Math-PRM: ``config.json`` with ``architectures: ["Qwen2ForProcessRewardModel"]``, ``model_type: "qwen2"``,
  ``auto_map`` to ``configuration_qwen2_rm.Qwen2RMConfig`` / ``modeling_qwen2_rm.Qwen2ForProcessRewardModel``, no
  ``num_labels`` or ``pad_token_id``; weights ``model.*``, ``score.0.*``, ``score.2.*``; Qwen2.5 tokenizer (no BOS),
  ``<extra_0>`` a special token, ChatML template whose default system turn is the PRM prompt.
- Skywork-o1-Open-PRM: ``architectures: ["Qwen2ForPrmModel"]``, ``model_type: "qwen2"``, ``auto_map`` to remote
  files (not shipped here: loading must not need them), ``tie_word_embeddings: true``, one ``pytorch_model.bin`` with
  ``model.*``, ``lm_head.weight``, ``v_head.summary.weight`` / ``.bias``; tokenizer ``bos_token`` ``<|im_start|>``.
- Math-Shepherd: a Mistral causal LM; a SentencePiece-style tokenizer (``▁`` word boundaries, ``LlamaTokenizer``,
  BOS ``<s>`` added by ``encode``), with ``ки``, ``▁+`` and ``▁-`` as tokens.
- RLHFlow: a Llama causal LM; a Llama-3 byte-level tokenizer (BOS ``<|begin_of_text|>`` added by ``encode``,
  ``<|start_header_id|>``, ``<|end_header_id|>``, ``<|eot_id|>``) with Llama-3.1-Instruct's chat template (the
  Deepseek-Data model; its system block with the knowledge-cutoff date) or Llama-3-Instruct's (Mistral-Data).
- TRL-trained: a ``Qwen2ForTokenClassification`` (2 labels) on its base's tokenizer.
- ReasonFlux-PRM-7B: loaded by its card as Qwen2.5-Math-PRM is (``AutoModel`` with remote code, 2-label logits read
  at ``<extra_0>``), so Qwen's architecture and files; its config was not readable offline. Built with Qwen2.5-Math's
  and with Qwen2.5-Instruct's chat template (their default system turns differ; the card passes none).
- PURE-PRM-7B: ``Qwen2ForTokenClassification`` (its card loads ``AutoModelForTokenClassification``), Qwen2.5-Math-7B's
  tokenizer (no BOS).
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForTokenClassification,
)


__all__ = [
    "LLAMA3_TEMPLATE",
    "LLAMA31_TEMPLATE",
    "QWEN_INSTRUCT_TEMPLATE",
    "QWEN_MODELING",
    "math_shepherd_mirror",
    "pure_mirror",
    "qwen_prm_mirror",
    "reasonflux_mirror",
    "rlhflow_mirror",
    "skywork_mirror",
    "trl_prm_mirror",
]

CORPUS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning.",
    "Step 1: 16 - 3 = 13 eggs left. Step 2: 13 - 4 = 9. The answer is: 18",
    "Let x = 3 and y = 4. Then 2x = 6, so x + y = 7. The answer is 7.",
    "Такие задачи решаются просто: ки кит кино. Ответ: 5.",
    "What is 2 + 3? So 5 * 2 = 10 and 10 / 2 = 5 + - + - ( ) , . : ? ! $ %",
    "Sue lives in a fun neighborhood. Please reason step by step, and put your final answer within boxed{}.",
]

QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"]
# Qwen2.5-Math's ChatML template without its tool branches (they do not render for these messages).
QWEN_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nPlease reason step by step, and put your final answer within \\\\boxed{}."
    "<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant') %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + "
    "'\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
# Meta-Llama-3-8B-Instruct's template, as published.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
# Llama-3.1-8B-Instruct's template without its tool branches (they do not render without tools).
LLAMA31_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

# The published Qwen2ForProcessRewardModel, re-written for transformers 5 (the checkpoint's own code targets 4.37).
QWEN_MODELING = '''
import torch
from transformers import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput


class Qwen2RMConfig(Qwen2Config):
    model_type = "qwen2_rm"


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    config_class = Qwen2RMConfig

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self.model = Qwen2Model(config)
        self.score = torch.nn.Sequential(
            torch.nn.Linear(config.hidden_size, config.hidden_size),
            torch.nn.ReLU(),
            torch.nn.Linear(config.hidden_size, self.num_labels),
        )
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden_states = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return TokenClassifierOutput(logits=self.score(hidden_states))
'''


def _byte_level(special: list[str], vocab_size: int = 500) -> Tokenizer:
    """A byte-level BPE (Qwen2 / Llama-3 style) trained on :data:`CORPUS`."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    return tok


def _qwen_tokenizer(bos: str | None) -> PreTrainedTokenizerFast:
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_byte_level(QWEN_SPECIAL), eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", bos_token=bos,
                                        additional_special_tokens=["<|im_start|>", "<|im_end|>", "<extra_0>"])
    tokenizer.chat_template = QWEN_TEMPLATE
    return tokenizer


def _qwen2_config(tokenizer: PreTrainedTokenizerFast, **kwargs) -> Qwen2Config:
    return Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, **kwargs)


def _rewrite_config(path: Path, **published) -> None:
    config = json.loads((path / "config.json").read_text())
    for key in ("num_labels", "id2label", "label2id", "pad_token_id", "auto_map", "ares_kind"):
        config.pop(key, None)
    config.update(published)
    (path / "config.json").write_text(json.dumps(config, indent=2))


def _remote_module(path: Path, filename: str, code: str, name: str) -> types.ModuleType:
    """Write ``code`` as the mirror's remote-code file ``filename`` in ``path`` and import it (to build the weights
    with the published classes before ``save_pretrained``)."""
    import importlib.util
    import sys

    path.mkdir(parents=True, exist_ok=True)
    (path / filename).write_text(code)
    spec = importlib.util.spec_from_file_location(name, path / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def qwen_prm_mirror(path: str | Path, seed: int = 0) -> Path:
    """Qwen2.5-Math-PRM: its remote code and published config; weights under the published names."""
    path = Path(path)
    module = _remote_module(path, "modeling_qwen2_rm.py", QWEN_MODELING, f"qwen_rm_mirror_{seed}")
    (path / "configuration_qwen2_rm.py").write_text(
        "from transformers import Qwen2Config\n\n\nclass Qwen2RMConfig(Qwen2Config):\n    model_type = 'qwen2_rm'\n")
    tokenizer = _qwen_tokenizer(bos=None)
    torch.manual_seed(seed)
    config = module.Qwen2RMConfig(**_qwen2_config(tokenizer).to_dict())
    model = module.Qwen2ForProcessRewardModel(config)
    with torch.no_grad():  # a larger head spreads the random scores away from 0.5 (still away from 0 and 1)
        model.score[2].weight.mul_(20)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    _rewrite_config(path, architectures=["Qwen2ForProcessRewardModel"], model_type="qwen2",
                    auto_map={"AutoConfig": "configuration_qwen2_rm.Qwen2RMConfig",
                              "AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel"},
                    bos_token_id=None, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    return path


def skywork_mirror(path: str | Path, seed: int = 0) -> Path:
    """Skywork-o1-Open-PRM: a Qwen2 causal LM plus ``v_head.summary`` in one ``pytorch_model.bin``."""
    from transformers import Qwen2ForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = _qwen_tokenizer(bos="<|im_start|>")
    torch.manual_seed(seed)
    config = _qwen2_config(tokenizer, tie_word_embeddings=True)
    lm = Qwen2ForCausalLM(config)
    state = {k: v.clone() for k, v in lm.state_dict().items()}
    state["v_head.summary.weight"] = torch.randn(1, config.hidden_size) * 0.5
    state["v_head.summary.bias"] = torch.tensor([0.1])
    lm.save_pretrained(path)
    for f in path.glob("*.safetensors"):
        f.unlink()
    torch.save(state, path / "pytorch_model.bin")
    tokenizer.save_pretrained(path)
    _rewrite_config(path, architectures=["Qwen2ForPrmModel"], model_type="qwen2",
                    auto_map={"AutoConfig": "configuration_qwen2_rm.Qwen2RMConfig",
                              "AutoModel": "modeling_qwen2_rm.Qwen2ForRewardModel"},
                    pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    return path


def math_shepherd_mirror(path: str | Path, seed: int = 0) -> Path:
    """Math-Shepherd: a Mistral causal LM with a SentencePiece-style (``▁``) tokenizer that adds BOS."""
    path = Path(path)
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("▁"), behavior="merged_with_next")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                  initial_alphabet=list("▁+-ки\n"))
    tok.train_from_iterator(CORPUS * 4 + ["ки ки ки + - + -"] * 8, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    for needed in ("ки", "▁+", "▁-"):
        assert tok.token_to_id(needed) is not None, needed
    torch.manual_seed(seed)
    config = MistralConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    MistralForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def rlhflow_mirror(path: str | Path, template: str = LLAMA31_TEMPLATE, seed: int = 0) -> Path:
    """An RLHFlow Llama-3.1 PRM: a Llama causal LM, a Llama-3 byte-level tokenizer that adds BOS, its chat template."""
    path = Path(path)
    tok = _byte_level(LLAMA3_SPECIAL)
    tokenizer = _llama3_fast(tok)
    tokenizer.chat_template = template
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def trl_prm_mirror(path: str | Path, bos: str | None = None, seed: int = 0) -> Path:
    """A PRM as TRL's PRMTrainer saves it: ``Qwen2ForTokenClassification`` (2 labels) and its base's tokenizer."""
    path = Path(path)
    tokenizer = _qwen_tokenizer(bos=bos)
    torch.manual_seed(seed)
    model = Qwen2ForTokenClassification(_qwen2_config(tokenizer, num_labels=2, pad_token_id=tokenizer.pad_token_id))
    with torch.no_grad():
        model.score.weight.mul_(20)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# -- the newer layouts of known kinds (issue 49 part 3) ---------------------------------------------------------------
# Qwen2.5-Instruct's ChatML template without its tool branches: its default system turn is Qwen's identity line.
QWEN_INSTRUCT_TEMPLATE = QWEN_TEMPLATE.replace(
    "Please reason step by step, and put your final answer within \\\\boxed{}.",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")


def reasonflux_mirror(path: str | Path, template: str = QWEN_TEMPLATE, seed: int = 1) -> Path:
    """ReasonFlux-PRM-7B: the card loads it as Qwen's (``AutoModel`` + remote code, 2-label logits at ``<extra_0>``),
    so the mirror is Qwen2.5-Math-PRM's architecture and files; ``template`` is the tokenizer's chat template (its
    default system turn is what the card's messages, which pass none, get)."""
    path = qwen_prm_mirror(path, seed=seed)
    config = json.loads((path / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    for saved in path.glob("chat_template.j*"):  # transformers 5 may save the template beside the config
        saved.write_text(template if saved.suffix == ".jinja" else json.dumps({"chat_template": template}))
    return path


def pure_mirror(path: str | Path, seed: int = 2) -> Path:
    """PURE-PRM-7B: a ``Qwen2ForTokenClassification`` (2 labels; the card loads it with
    ``AutoModelForTokenClassification``) on Qwen2.5-Math-7B's tokenizer (no BOS)."""
    return trl_prm_mirror(path, bos=None, seed=seed)


def _llama3_fast(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """A Llama-3 byte-level tokenizer as its published one behaves: BOS added to every text, its special tokens."""
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                                       special_tokens=[("<|begin_of_text|>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   pad_token="<|end_of_text|>")


def _with_tag_token(tok: Tokenizer, tag: str) -> Tokenizer:
    """Make ``tag`` one token, as the published vocabulary has it (Qwen2.5: ``" \\n\\n\\n\\n\\n"`` is 76325; Llama-3:
    ``" \\n\\n\\n\\n"`` is 23535): an added token, not a special one, extracted before pre-tokenization."""
    from tokenizers import AddedToken

    tok.add_tokens([AddedToken(tag, normalized=False, special=False)])
    return tok


def math_psa_mirror(path: str | Path, seed: int = 3) -> tuple[Path, Path]:
    """Math-psa: a peft LoRA adapter (``q_proj`` / ``v_proj``, ``CAUSAL_LM``) on a Qwen2.5-Math-Instruct-style causal
    LM, whose tokenizer has ``" \\n\\n\\n\\n\\n"``, ``" +"`` and ``" -"`` as tokens. Returns ``(adapter, base)``; the
    adapter records ``Qwen/Qwen2.5-Math-7B-Instruct`` as its base (put the base there in a hub cache to load it by id).
    """
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2ForCausalLM

    path = Path(path)
    base_path, adapter_path = path / "base", path / "adapter"
    tok = _with_tag_token(_byte_level(QWEN_SPECIAL), " \n\n\n\n\n")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    tokenizer.chat_template = QWEN_TEMPLATE
    for needed in (" +", " -", " \n\n\n\n\n"):
        assert len(tokenizer.encode(needed)) == 1, needed
    torch.manual_seed(seed)
    base = Qwen2ForCausalLM(_qwen2_config(tokenizer, tie_word_embeddings=False))
    base.save_pretrained(base_path)
    tokenizer.save_pretrained(base_path)
    lora = LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                      init_lora_weights=False)  # random A and B: the adapter changes the scores
    model = get_peft_model(base, lora)
    model.save_pretrained(adapter_path)
    config = json.loads((adapter_path / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "Qwen/Qwen2.5-Math-7B-Instruct"
    (adapter_path / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return adapter_path, base_path


def versaprm_mirror(path: str | Path, seed: int = 4) -> Path:
    """VersaPRM: a Llama causal LM with a Llama-3 byte-level tokenizer that adds BOS, ``" \\n\\n\\n\\n"``, ``"+"`` and
    ``"-"`` each one token."""
    path = Path(path)
    tok = _with_tag_token(_byte_level(LLAMA3_SPECIAL), " \n\n\n\n")
    tokenizer = _llama3_fast(tok)
    tokenizer.chat_template = LLAMA31_TEMPLATE
    for needed in ("+", "-", " \n\n\n\n"):
        assert len(tokenizer.encode(needed, add_special_tokens=False)) == 1, needed
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# ActPRM's Qwen2ForEnsemblePRM (sail-sg/ActivePRM models/qwen2_ensemble_prm + models/nets.EnsembleModel), re-written for
# transformers 5 on its own Qwen2Model (the published file copies the whole Qwen2 stack of transformers 4.4x).
ACTPRM_MODELING = '''
from copy import deepcopy

import torch
from torch import nn
from transformers import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast


class QwenEnPRMConfig(Qwen2Config):
    model_type = "qwen2"

    def __init__(self, num_ensemble=8, learning_probability=0.5, regularization_lambda=0.1, rr_token="<extra_0>",
                 rr_token_id=None, **kwargs):
        self.num_ensemble = num_ensemble
        self.learning_probability = learning_probability
        self.regularization_lambda = regularization_lambda
        self.rr_token = rr_token
        self.rr_token_id = rr_token_id
        super().__init__(**kwargs)


class EnsembleFC(nn.Module):
    def __init__(self, in_features, out_features, ensemble_size, bias=True, dtype=torch.float32):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.ensemble_size = ensemble_size
        self.weight = nn.Parameter(torch.empty(ensemble_size, in_features, out_features, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(ensemble_size, out_features, dtype=dtype))

    def forward(self, input):
        input = input.to(self.weight.dtype)
        wx = torch.einsum("eblh,ehm->eblm", input, self.weight)
        return torch.add(wx, self.bias[:, None, None, :])


class _EnsembleModel(nn.Module):
    def __init__(self, encoding_dim, num_ensemble, hidden_dim=128):
        super().__init__()
        self.num_ensemble = num_ensemble
        self.nn1 = EnsembleFC(encoding_dim, hidden_dim, num_ensemble)
        self.nn2 = EnsembleFC(hidden_dim, hidden_dim, num_ensemble)
        self.nn_out = EnsembleFC(hidden_dim, 1, num_ensemble)
        self.activation = nn.ReLU()

    def forward(self, encoding):
        x = self.activation(self.nn1(encoding))
        x = self.activation(self.nn2(x))
        return self.nn_out(x)


class EnsembleModel(nn.Module):
    def __init__(self, encoding_dim, num_ensemble, hidden_dim=128):
        super().__init__()
        self.num_ensemble = num_ensemble
        self.model = _EnsembleModel(encoding_dim, num_ensemble, hidden_dim)
        self.reg_model = deepcopy(self.model)
        for param in self.reg_model.parameters():
            param.requires_grad = False

    def forward(self, encoding):
        return self.model(encoding)


class Qwen2ForEnsemblePRM(Qwen2PreTrainedModel):
    config_class = QwenEnPRMConfig

    def __init__(self, config):
        super().__init__(config)
        self.rr_token = config.rr_token
        self.model = Qwen2Model(config)
        self.score = EnsembleModel(encoding_dim=config.hidden_size, num_ensemble=config.num_ensemble)
        self.post_init()

    @torch.no_grad()
    def inference(self, *args, **kwargs):
        outputs = self.forward(*args, **kwargs)
        outputs.logits = torch.nn.functional.sigmoid(outputs.logits)
        return outputs

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden_states = self.model(input_ids, attention_mask=attention_mask).last_hidden_state
        hidden_states = hidden_states[None, :, :, :].repeat(self.score.num_ensemble, 1, 1, 1)
        logits = self.score(hidden_states).float().squeeze(-1)  # (ensemble, batch, seq_len)
        return SequenceClassifierOutputWithPast(logits=logits)
'''


def actprm_mirror(path: str | Path, seed: int = 5, members: int = 4) -> Path:
    """ActPRM: its remote code (``QwenEnPRMConfig``, ``Qwen2ForEnsemblePRM``) and published config
    (``architectures: ["Qwen2ForEnsemblePRM"]``, ``model_type: "qwen2"``, ``num_ensemble``, ``rr_token``), weights
    ``model.*``, ``score.model.*`` and the frozen ``score.reg_model.*``; a Qwen2.5 tokenizer (``<extra_0>`` special)."""
    path = Path(path)
    module = _remote_module(path, "modeling_qwen2.py", ACTPRM_MODELING, f"actprm_mirror_{seed}")
    (path / "configuration_qwen2.py").write_text(ACTPRM_MODELING.split("class EnsembleFC")[0])
    tokenizer = _qwen_tokenizer(bos=None)
    torch.manual_seed(seed)
    config = module.QwenEnPRMConfig(num_ensemble=members, rr_token="<extra_0>",
                                    **_qwen2_config(tokenizer, tie_word_embeddings=False).to_dict())
    model = module.Qwen2ForEnsemblePRM(config)
    with torch.no_grad():  # random members that disagree, and a reg_model that differs from them (never read)
        for fc in (model.score.model.nn1, model.score.model.nn2, model.score.model.nn_out):
            fc.weight.normal_(0.0, 0.6)
            fc.bias.normal_(0.0, 0.1)
        for p in model.score.reg_model.parameters():
            p.normal_(0.0, 1.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    _rewrite_config(path, architectures=["Qwen2ForEnsemblePRM"], model_type="qwen2", num_ensemble=members,
                    rr_token="<extra_0>", auto_map={"AutoConfig": "configuration_qwen2.QwenEnPRMConfig",
                                                    "AutoModel": "modeling_qwen2.Qwen2ForEnsemblePRM"},
                    bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                    tie_word_embeddings=False)
    return path


# Universal-PRM's model is its checkpoint's own code, which no readable source publishes: the mirror's remote code is a
# Qwen2 decoder and a one-logit head on the last position, i.e. only the contract the card's code reads
# (``model(input_ids=...)[0]`` holds one value per input). The family calls whatever code the checkpoint ships.
UNIVERSAL_MODELING = '''
import torch
from transformers import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast


class UniversalPRMMirrorConfig(Qwen2Config):
    model_type = "qwen2"


class UniversalPRMMirror(Qwen2PreTrainedModel):
    config_class = UniversalPRMMirrorConfig

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.score = torch.nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden_states = self.model(input_ids, attention_mask=attention_mask).last_hidden_state
        return SequenceClassifierOutputWithPast(logits=self.score(hidden_states[:, -1]))  # (batch, 1)
'''


def universal_prm_mirror(path: str | Path, seed: int = 6) -> Path:
    """Universal-PRM-7B: a Qwen2.5 tokenizer (ChatML, ``<|im_end|>`` its eos) and remote code returning one logit per
    input (:data:`UNIVERSAL_MODELING`), mapped from ``auto_map["AutoModel"]`` as a ``custom_code`` checkpoint is."""
    path = Path(path)
    module = _remote_module(path, "modeling_universal_prm.py", UNIVERSAL_MODELING, f"universal_prm_mirror_{seed}")
    tokenizer = _qwen_tokenizer(bos=None)
    torch.manual_seed(seed)
    model = module.UniversalPRMMirror(module.UniversalPRMMirrorConfig(**_qwen2_config(tokenizer).to_dict()))
    with torch.no_grad():  # spread the random scores away from 0.5 (still away from 0 and 1)
        model.score.weight.mul_(20)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    _rewrite_config(path, architectures=["UniversalPRMMirror"], model_type="qwen2",
                    auto_map={"AutoConfig": "modeling_universal_prm.UniversalPRMMirrorConfig",
                              "AutoModel": "modeling_universal_prm.UniversalPRMMirror"},
                    bos_token_id=None, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    return path

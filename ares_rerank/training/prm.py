"""Train a step-tag PRM head (token classification) on TRL's old ``{prompt, completions, labels}`` rows.

TRL removed ``PRMTrainer`` in 1.14; this is the same objective on a plain ``transformers.Trainer``: each step is
followed by the step tag, the tag's token carries the step's label (1 = correct, 0 = wrong) and every other token
is ignored (label -100). Rows are rendered exactly as :class:`~ares_rerank.backbones.prms.StepTagPRM` renders them
at inference (chat template when the tokenizer has one; user turn = the prompt, assistant turn = the steps, each
followed by the tag), so a trained head scores ARES masks the way it was trained.

From the shell (``ares_rerank.training.prm``; a YAML config or ``--field value`` flags of
:class:`PRMTrainingArguments`)::

    ares-rerank train prm --model_name_or_path path/to/model --dataset rows.jsonl --output_dir runs/prm
    ares-rerank train prm --model_name_or_path path/to/model --dataset claimtrees --max_steps 200

``--dataset`` is a JSON-lines file of rows, a folder saved with ``datasets.Dataset.save_to_disk``, or
``claimtrees`` (rows built from the ClaimTrees training mix, see :func:`chain_rows`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from transformers import TrainingArguments

from ..backbones.hub import named_load_errors, peft_wrapping
from ..backbones.loading import KIND_CONFIG_KEY
from ..utils.io import atomic_folder, check_outside_package, prepare_run_dir


__all__ = ["PRMTrainingArguments", "chain_rows", "check_row", "encode_rows", "load_rows", "load_prm", "train_prm"]


@dataclass
class PRMTrainingArguments(TrainingArguments):
    """``TrainingArguments`` plus the PRM model, data and rendering settings."""

    model_name_or_path: str = field(default="", metadata={"help": "Model folder or hub id (token classifier or LM)."})
    dataset: str = field(default="claimtrees",
                         metadata={"help": "JSONL rows, a saved Dataset folder, or 'claimtrees'."})
    output_dir: str = field(default="runs/prm", metadata={"help": "Checkpoints and the final PRM (prm/)."})
    step_tag: str = field(default="<extra_0>",
                          metadata={"help": "Tag after each step; added if the tokenizer lacks it."})
    system_prompt: str | None = field(default=None, metadata={
        "help": "System turn (chat template only); default: the backbone's Qwen PRM prompt."})
    step_separator: str = field(default="", metadata={"help": "Text between a tag and the next step."})
    max_length: int = field(default=1024, metadata={"help": "Tokens per row; longer rows are cut (later tags lost)."})
    use_lora: bool = field(default=False, metadata={"help": "Train a LoRA adapter instead of every weight."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
                                           metadata={"help": "Linear layers that get LoRA matrices."})
    num_chains: int = field(default=400, metadata={"help": "Chains of the ClaimTrees mix when dataset='claimtrees'."})
    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Replace the PRM and checkpoints an earlier run left in output_dir (otherwise such a folder is "
                "refused before any work)."})
    report_to: str = field(default="none", metadata={"help": "Experiment trackers (none: offline)."})

    def __post_init__(self) -> None:
        if not self.model_name_or_path:
            raise ValueError("--model_name_or_path is required: a token-classification model folder or hub id.")
        if not self.step_tag:
            raise ValueError("--step_tag must be a non-empty string, e.g. '<extra_0>'.")
        if self.max_length < 1:  # 0 gave empty rows, -5 cut the last step tag off
            raise ValueError(f"--max_length={self.max_length} must be a positive number of tokens, e.g. 1024.")
        check_outside_package(self.output_dir, flag="output_dir")
        super().__post_init__()


def chain_rows(chains: Sequence[Any]) -> list[dict[str, Any]]:
    """Labelled chains -> TRL rows: prompt = base claims joined by newlines, label True = sound step."""
    rows = []
    for chain in chains:
        if chain.labels is None:
            raise ValueError(f"chain {chain.id!r} has no labels: PRM rows need a label per step.")
        rows.append({"prompt": "\n".join(chain.base_claims), "completions": list(chain.steps),
                     "labels": [label == 0 for label in chain.labels]})
    return rows


def load_rows(source: str, num_chains: int = 400) -> list[dict[str, Any]]:
    """Rows from a JSONL file, a saved ``datasets`` folder, or ``"claimtrees"``; each row is checked."""
    if source == "claimtrees":
        from .mix import MixArguments, training_chains

        rows = chain_rows(training_chains(MixArguments(num_chains=max(3, num_chains))))
    elif Path(source).is_dir():
        from datasets import load_from_disk

        rows = list(load_from_disk(source))
    elif Path(source).is_file():
        import json

        rows = [json.loads(line) for line in Path(source).read_text().splitlines() if line.strip()]
    else:
        raise ValueError(f"dataset={source!r} is neither a JSONL file, a saved Dataset folder, nor 'claimtrees'.")
    for i, row in enumerate(rows):
        check_row(i, row)
    return rows


def check_row(index: int, row: Any) -> None:
    """One ``{prompt, completions, labels}`` row, checked: a prompt string, a list of step strings and one label per
    step, ``True`` / ``1`` (the step is correct) or ``False`` / ``0``; a ValueError naming the row, field and fix."""
    if not isinstance(row, dict) or not {"prompt", "completions", "labels"} <= set(row):
        raise ValueError(f"row {index} must have prompt, completions and labels (TRL's stepwise-supervision rows); got "
                         f"{sorted(row) if isinstance(row, dict) else type(row).__name__}.")
    prompt, completions, labels = row["prompt"], row["completions"], row["labels"]
    if prompt is not None and not isinstance(prompt, str):  # a conversation crashed inside the renderer
        raise ValueError(f"row {index} prompt is {type(prompt).__name__}: a step-tag PRM reads the prompt as text; "
                         "join a conversation's messages into one string.")
    if isinstance(completions, str) or not isinstance(completions, (list, tuple)) or not all(
            isinstance(c, str) for c in completions):  # a string was read one character per step
        raise ValueError(f"row {index} completions={completions!r:.80} must be a list of step strings.")
    if not isinstance(labels, (list, tuple)) or len(labels) != len(completions):
        raise ValueError(f"row {index} labels={labels!r:.80} must be a list with one label per completion "
                         f"({len(completions)}).")
    wrong = [label for label in labels if not (isinstance(label, bool) or (type(label) is int and label in (0, 1)))]
    if wrong:  # bool() read "False" and "-" as True
        raise ValueError(f"row {index} labels={labels!r:.80} must be True / False (or 1 / 0), 1 = the step is correct; "
                         f"got {wrong[0]!r}.")


def load_prm(args: PRMTrainingArguments) -> tuple[Any, Any]:
    """The token classifier (2 labels) and its tokenizer; the step tag is added as a special token if missing."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    with named_load_errors("model_name_or_path", args.model_name_or_path):
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
        model = AutoModelForTokenClassification.from_pretrained(
            args.model_name_or_path, num_labels=2, id2label={0: "negative", 1: "positive"},
            label2id={"negative": 0, "positive": 1})
    if len(tokenizer.encode(args.step_tag, add_special_tokens=False)) != 1:
        tokenizer.add_special_tokens({"additional_special_tokens": [args.step_tag]})
        model.resize_token_embeddings(len(tokenizer))
    if model.config.pad_token_id is None:
        pad = tokenizer.pad_token_id
        model.config.pad_token_id = pad if pad is not None else tokenizer.eos_token_id
    if args.use_lora:
        from peft import LoraConfig, TaskType, get_peft_model

        with peft_wrapping():
            model = get_peft_model(model, LoraConfig(task_type=TaskType.TOKEN_CLS, r=args.lora_r,
                                                     lora_alpha=2 * args.lora_r,
                                                     target_modules=args.lora_target_modules))
    return model, tokenizer


def _renderer(model: Any, tokenizer: Any, args: PRMTrainingArguments) -> Any:
    from ..backbones.prms import QWEN_PRM_SYSTEM_PROMPT, StepTagPRM

    prompt = QWEN_PRM_SYSTEM_PROMPT if args.system_prompt is None else args.system_prompt
    return StepTagPRM(model, tokenizer, step_tag=args.step_tag, system_prompt=prompt,
                      step_separator=args.step_separator, cache_size=0)


def encode_rows(rows: Sequence[dict[str, Any]], model: Any, tokenizer: Any, args: PRMTrainingArguments) -> Any:
    """Rows -> a ``Dataset`` of ``input_ids`` and ``labels`` (step label at each tag token, -100 elsewhere)."""
    from datasets import Dataset

    prm = _renderer(model, tokenizer, args)
    encoded = {"input_ids": [], "labels": []}
    for index, row in enumerate(rows):
        check_row(index, row)
        item = prm.encode_chain([row["prompt"]] if row["prompt"] else [], list(row["completions"]))
        labels = [-100] * len(item["input_ids"])
        for position, label in zip(item["tags"], row["labels"]):
            labels[position] = int(bool(label))
        encoded["input_ids"].append(item["input_ids"][: args.max_length])
        encoded["labels"].append(labels[: args.max_length])
    return Dataset.from_dict(encoded)


def train_prm(args: PRMTrainingArguments) -> tuple[Any, Any]:
    """Train and save the PRM to ``output_dir/prm`` (model or adapter + tokenizer); returns (model, tokenizer)."""
    from transformers import DataCollatorForTokenClassification, Trainer, set_seed

    set_seed(args.seed)
    prepare_run_dir(args.output_dir, result="prm", overwrite=args.overwrite_output_dir)
    model, tokenizer = load_prm(args)
    rows = load_rows(args.dataset, args.num_chains)
    dataset = encode_rows(rows, model, tokenizer, args)
    trainer = Trainer(model=model, args=args, train_dataset=dataset,
                      data_collator=DataCollatorForTokenClassification(tokenizer))
    trainer.train()
    config = getattr(trainer.model, "config", None)
    if config is not None:  # load_backbone reads it as this layout (kind "prm"), not as a TRL-trained classifier
        setattr(config, KIND_CONFIG_KEY, "prm")
    with atomic_folder(Path(args.output_dir) / "prm") as fresh:  # a failed save leaves an earlier PRM as it was
        trainer.model.save_pretrained(fresh)
        tokenizer.save_pretrained(fresh)
    return trainer.model, tokenizer


def main(argv: Sequence[str] | None = None) -> int:
    from transformers import HfArgumentParser

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser(PRMTrainingArguments, prog="ares-rerank train prm")
    if argv and argv[0].endswith((".yaml", ".yml")):
        (args,) = parser.parse_yaml_file(argv[0])
    else:
        (args,) = parser.parse_args_into_dataclasses(args=argv)
    train_prm(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fine-tune a calibrated entailment head (LoRA by default, full fine-tuning as an option) on chain-derived pairs.

From the shell (``[config.yaml]`` first, then ``--field value`` flags of :class:`MixArguments` and
:class:`HeadTrainingArguments`; ``--help`` lists them)::

    ares-rerank train head --chains_file chains.jsonl --output_dir runs/my-head            # your labelled chains
    ares-rerank train head my_config.yaml --max_steps 50 --output_dir /tmp/try

From Python: ``mix, args = parse_args([...])`` then ``train_head(mix, args)``. The recipe of the shipped default
head (two stages, configs) is in the source checkout: ``python -m training.train_default_head``.

Steps: read or generate the chains (:mod:`ares_rerank.training.mix`), split them by id into train / val / test
BEFORE building pairs (:mod:`ares_rerank.training.pairs`), encode each pair exactly as
:class:`~ares_rerank.backbones.nli.EntailmentHead` does at inference (same premise selection, same window policy),
train with ``transformers.Trainer`` (early stopping on the val loss, best checkpoint restored), fit a temperature on
the val logits (:mod:`ares_rerank.calibration`), report ECE before / after on the test split with a reliability
diagram, and save the adapter (or model) with ``ares_calibration.json`` beside it.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from transformers import Trainer, TrainingArguments

from ..backbones.hub import head_from_adapter, named_load_errors, peft_wrapping
from ..backbones.loading import PACKAGED_ENCODER, resolve_model_name
from ..utils.io import check_outside_package, prepare_run_dir
from .adapters import continue_adapter
from .callbacks import StopAtStepCallback, TimeBudgetCallback
from .export import ID2LABEL, LABEL2ID, TrainingCollapsed, calibrate_and_save, check_not_collapsed, save_head
from .mix import MixArguments, training_chains
from .wordings import templates_of
from .pairs import build_pairs, pairs_dataset, split_chains


__all__ = [
    "HeadTrainer",
    "HeadTrainingArguments",
    "TrainedHead",
    "TrainingCollapsed",
    "check_not_collapsed",
    "chunked_loss",
    "claimtrees_oracle_for",
    "encode_pairs",
    "load_base",
    "parse_args",
    "save_head",
    "split_mix",
    "split_rows",
    "train_head",
]


@dataclass
class HeadTrainingArguments(TrainingArguments):
    """``TrainingArguments`` plus the model, LoRA and calibration settings of an entailment head."""

    output_dir: str = field(default="runs/head", metadata={"help": "Checkpoints, logs, the final head (head/)."})
    base_model: str = field(default=PACKAGED_ENCODER, metadata={
        "help": f"Encoder to fine-tune: a folder, a hub id, or {PACKAGED_ENCODER!r} (the packaged all-MiniLM-L6-v2)."})
    full_finetune: bool = field(default=False, metadata={"help": "Train every weight instead of a LoRA adapter."})
    init_adapter: str | None = field(default=None, metadata={
        "help": "Start from this trained LoRA adapter folder (a later stage of a curriculum) instead of a fresh one; "
                "a lora_r above its rank widens it (training/adapters.py), its function kept."})
    lora_r: int = field(default=8, metadata={"help": "LoRA rank (with init_adapter: its rank, or larger to widen)."})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA path."})
    lora_target_modules: list[str] = field(default_factory=lambda: ["query", "key", "value", "dense"],
                                           metadata={"help": "Linear layers that get LoRA matrices."})
    lora_layers: list[int] = field(default_factory=list, metadata={
        "help": "Encoder layers that get LoRA (e.g. 2 3 4 5 of MiniLM's 0-5; empty = all). Backpropagation then stops "
                "at the lowest one: on MiniLM the upper four made a step ~1.2x faster, but the head learned worse."})
    modules_to_save: list[str] = field(default_factory=list, metadata={
        "help": "Base modules trained whole and saved with the adapter besides the classifier (peft's "
                "modules_to_save), e.g. position_embeddings (512 x 384 weights on MiniLM) for inputs longer than "
                "the base encoder was tuned on. Also added to a continued init_adapter."})
    max_length: int = field(default=320, metadata={"help": "Encoder window in tokens (window policy beyond it)."})
    early_stopping_patience: int = field(default=3, metadata={"help": "Evaluations without val-loss improvement."})
    data_dir: str | None = field(default=None, metadata={
        "help": "The folder holding recipe_graphs/ (the ARES authors' release, github.com/fallcat/ares, "
                "data/recipe_graphs, MIT), for a mix with recipe_share > 0. Default: $ARES_DATA_DIR."})
    max_train_seconds: float = field(default=0.0, metadata={
        "help": "Stop training after this many seconds of wall time (0 = no limit), whatever max_steps says: the "
                "step that crosses it is evaluated and checkpointed, and the best checkpoint so far is calibrated."})
    stop_at_step: int = field(default=0, metadata={
        "help": "End training after this optimizer step (0 = run to max_steps), evaluated and checkpointed; "
                "max_steps still sets the learning-rate schedule, so this replays the start of a longer run."})
    max_eval_pairs: int = field(default=600, metadata={
        "help": "Val pairs used for early stopping and the temperature fit (a seeded sample; 0 = all)."})
    torch_threads: int = field(default=0, metadata={
        "help": "torch intra-op threads (0 = torch's default). On a busy shared CPU 1 thread can beat 2."})
    bucket_batches: int = field(default=0, metadata={
        "help": "0 = the Trainer's own sampler (train_sampling_strategy). N > 0: batches of similar length with the "
                "bucket's label mix, in random order, from random buckets of N batches (training/sampling.py): "
                "~1.6x less padding, but on the ClaimTrees mix the head learned far worse per step."})
    length_chunks: int = field(default=0, metadata={
        "help": "N > 1: run each training batch as N forward passes over length-sorted slices, each without the "
                "padding it does not need; same batches and same mean loss, fewer padded tokens (chunked_loss). "
                "0/1 = off."})
    calibration_bins: int = field(default=15, metadata={"help": "Bins of the ECE and the reliability diagram."})
    calibration_method: str = field(default="temperature", metadata={
        "help": "Fitted on the val pairs: temperature (one scale) or platt (scale and entailment bias; can move "
                "decisions, for a head that accepts more pairs than are entailed)."})
    export_dir: str | None = field(default=None, metadata={
        "help": "Also write the final head here, once it passed the collapse check."})
    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Replace the head and checkpoints an earlier run left in output_dir (otherwise such a folder is "
                "refused before any work)."})
    overwrite_default_head: bool = field(default=False, metadata={
        "help": "Allow export_dir to be the package's shipped default head (the checkout's recipe sets it; "
                "otherwise that folder is never written)."})
    eval_strategy: str = field(default="steps", metadata={"help": "Evaluate every eval_steps (early stopping)."})
    save_strategy: str = field(default="steps", metadata={"help": "Checkpoint with every evaluation."})
    load_best_model_at_end: bool = field(default=True, metadata={"help": "Restore the lowest-val-loss checkpoint."})
    metric_for_best_model: str = field(default="eval_loss", metadata={"help": "Early-stopping metric."})
    save_total_limit: int = field(default=2, metadata={"help": "Checkpoints kept on disk."})
    report_to: str = field(default="none", metadata={"help": "Experiment trackers (none: offline)."})

    def __post_init__(self) -> None:
        from ..calibration import check_bins, check_method

        check_method(self.calibration_method, "calibration_method")
        check_bins(self.calibration_bins, "calibration_bins")  # now, not after training
        if self.torch_threads < 0:
            raise ValueError(f"torch_threads={self.torch_threads} must be >= 0 (0 = torch's default).")
        if not math.isfinite(self.learning_rate) or self.learning_rate <= 0:  # torch said so after the model loaded
            raise ValueError(f"learning_rate={self.learning_rate} must be a finite number > 0, e.g. 5e-4.")
        if not math.isfinite(self.max_train_seconds) or self.max_train_seconds < 0:
            raise ValueError(f"max_train_seconds={self.max_train_seconds} must be a finite number >= 0 (0 = no time "
                             "limit), e.g. 3600.")
        if self.stop_at_step < 0 or (self.max_steps > 0 and self.stop_at_step > self.max_steps):
            raise ValueError(f"stop_at_step={self.stop_at_step} must be 0 (off) or a step in 1..max_steps "
                             f"(max_steps={self.max_steps}).")
        if self.lora_r < 1 or self.lora_alpha < 1:
            raise ValueError(f"lora_r={self.lora_r} and lora_alpha={self.lora_alpha} must be >= 1.")
        if any(layer < 0 for layer in self.lora_layers):
            raise ValueError(f"lora_layers={self.lora_layers} must be encoder layer indices >= 0 (or empty for all).")
        if self.modules_to_save and self.full_finetune:
            raise ValueError(f"modules_to_save={self.modules_to_save} names modules an adapter trains whole; with "
                             "full_finetune=true every module is trained already: drop one of the two.")
        if self.init_adapter and self.full_finetune:
            raise ValueError("init_adapter continues a LoRA adapter: it cannot be combined with full_finetune=true.")
        if self.length_chunks < 0 or self.length_chunks > self.per_device_train_batch_size:
            raise ValueError(f"length_chunks={self.length_chunks} must lie in [0, per_device_train_batch_size="
                             f"{self.per_device_train_batch_size}] (0 or 1 = one forward pass per batch).")
        if self.bucket_batches < 0:
            raise ValueError(f"bucket_batches={self.bucket_batches} must be >= 0 (0 = the Trainer's own sampler).")
        if self.bucket_batches and self.train_sampling_strategy != "random":
            raise ValueError(
                f"train_sampling_strategy={self.train_sampling_strategy!r} and bucket_batches={self.bucket_batches} "
                "both choose the batch order: set bucket_batches: 0 to use the Trainer's sampler.")
        if self.export_dir:
            from ..backbones.loading import DEFAULT_HEAD_DIR

            shipped = Path(self.export_dir).resolve() == DEFAULT_HEAD_DIR.resolve()
            if shipped and not self.overwrite_default_head:
                raise ValueError(
                    f"export_dir={self.export_dir!r} is the shipped default head of the installed package: export "
                    "to a folder of your own (or set overwrite_default_head: true in the checkout's recipe)."
                )
            if not shipped:  # the recipe's export of the shipped head is the one write into the package
                check_outside_package(self.export_dir, flag="export_dir")
        check_outside_package(self.output_dir, flag="output_dir")
        if not 32 <= self.max_length <= 4096:
            raise ValueError(f"max_length={self.max_length} must lie in [32, 4096] tokens (MiniLM's window is 512).")
        super().__post_init__()


@dataclass
class TrainedHead:
    """What :func:`train_head` returns: the trained model (best checkpoint), its tokenizer, the calibration record
    (also written to ``ares_calibration.json`` beside the saved head) and the folder of the saved head."""

    model: Any
    tokenizer: Any
    calibration: dict[str, Any]
    folder: Path


def load_base(args: HeadTrainingArguments) -> tuple[Any, Any]:
    """The base encoder with a fresh 2-way head (``not_entailment`` / ``entailment``), wrapped in LoRA unless full."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_model_name(args.base_model)
    with named_load_errors("base_model", args.base_model, path), head_from_adapter(bool(args.init_adapter)):
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=2, id2label=ID2LABEL, label2id=LABEL2ID)
    if args.full_finetune:
        return model, tokenizer
    names = [name for name, _ in model.named_modules()]
    missing = [m for m in args.modules_to_save if not any(n == m or n.endswith("." + m) for n in names)]
    if missing:  # peft would record the name and train nothing
        embeddings = sorted({n.rsplit(".", 1)[-1] for n in names if n.endswith("embeddings")})
        raise ValueError(f"modules_to_save={list(args.modules_to_save)}: {missing} names no module of {path} (peft "
                         f"would silently train nothing for it); its embedding modules are {embeddings}.")
    from peft import LoraConfig, TaskType, get_peft_model

    if args.init_adapter:
        return continue_adapter(model, args.init_adapter, rank=args.lora_r, alpha=args.lora_alpha,
                                dropout=args.lora_dropout, modules_to_save=args.modules_to_save), tokenizer

    config = LoraConfig(task_type=TaskType.SEQ_CLS, r=args.lora_r, lora_alpha=args.lora_alpha,
                        lora_dropout=args.lora_dropout, target_modules=list(args.lora_target_modules),
                        layers_to_transform=list(args.lora_layers) or None,
                        layers_pattern="layer" if args.lora_layers else None,
                        modules_to_save=list(args.modules_to_save) or None)
    try:
        with peft_wrapping():
            return get_peft_model(model, config), tokenizer
    except ValueError as err:  # peft's NoMatchingPeftModuleError: no module matched the targets
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if type(m).__name__ == "Linear"})
        raise ValueError(f"lora_target_modules={list(args.lora_target_modules)} with lora_layers="
                         f"{list(args.lora_layers)} match no layer of {path} ({err}): its linear layers are named "
                         f"{linear}.") from err


def encode_pairs(dataset: Any, model: Any, tokenizer: Any, max_length: int) -> Any:
    """Tokenize pairs with the inference path: ``EntailmentHead``'s rendering and window policy (premises of the
    rows are already selected, so the head's own selection is ``"all"`` here)."""
    from ..backbones.nli import EntailmentHead

    head = EntailmentHead(model, tokenizer, max_length=max_length, premise_selection="all", cache_size=0)

    def encode(row: dict[str, Any]) -> dict[str, Any]:
        item = head.encode_pair(list(row["premises"]), row["hypothesis"])
        return {**item, "labels": int(row["label"])}

    keep = set(head.input_keys)
    return dataset.map(encode, remove_columns=[c for c in dataset.column_names if c not in keep])


def claimtrees_oracle_for(chain: Any) -> Any:
    """A ground-truth entailment oracle for ``chain`` when it is a ClaimTrees chain (its ``meta`` holds the
    generator's ``rules``), read with the templates it was written in; ``None`` otherwise (gold-label pairs only)."""
    from ..backbones.oracle import ClaimTreesOracle

    if not chain.meta.get("rules"):
        return None
    return ClaimTreesOracle(templates_of(chain))


def split_mix(mix: MixArguments, data_dir: str | None = None) -> dict[str, list[Any]]:
    """``{"train" | "val" | "test": chains}`` of a mix, split by chain id (or recipe graph) with the mix's own
    fractions and seed. ``data_dir`` holds ``recipe_graphs/`` for a mix with recipe chains (``None`` reads
    ``$ARES_DATA_DIR``)."""
    return split_chains(training_chains(mix, data_dir), {"val": mix.val_fraction, "test": mix.test_fraction},
                        seed=mix.mix_seed)


def split_rows(mix: MixArguments, data_dir: str | None = None) -> dict[str, tuple[list[Any], list[dict[str, Any]]]]:
    """``{"train" | "val" | "test": (chains, pairs)}`` of a mix (:func:`split_mix`: chains split before any pair
    exists), pairs with their premises already selected by ``mix.premise_selection`` and labelled on what it kept.
    What training reads, and what ``ares-rerank calibrate --config`` rebuilds."""
    parts = split_mix(mix, data_dir)
    return {name: (part, build_pairs(part, mix.premise_selection, claimtrees_oracle_for, mix.subsets_per_step,
                                     mix.mix_seed, mix.minimal_pairs, data_dir=data_dir))
            for name, part in parts.items()}


def build_splits(mix: MixArguments, data_dir: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train / val / test pair datasets (split by chain id first) and a summary of their sizes."""
    datasets, summary = {}, {}
    for name, (part, rows) in split_rows(mix, data_dir).items():
        datasets[name] = pairs_dataset(rows)
        summary[name] = {"chains": len(part), "pairs": len(rows), "entailed": sum(r["label"] for r in rows),
                         "chain_ids": sorted(c.id for c in part)}
    return datasets, summary


class HeadTrainer(Trainer):
    """``Trainer`` with the two batch-cost options of :class:`HeadTrainingArguments`, both off by default:
    ``bucket_batches`` (training batches from :class:`~ares_rerank.training.sampling.LengthBucketSampler`) and
    ``length_chunks`` (the training loss of each batch in length-sorted chunks, :func:`chunked_loss`)."""

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        if not self.args.bucket_batches:
            return super()._get_train_sampler(train_dataset)
        from .sampling import LengthBucketSampler

        dataset = train_dataset if train_dataset is not None else self.train_dataset
        lengths = [len(ids) for ids in dataset["input_ids"]]
        return LengthBucketSampler(lengths, self._train_batch_size, self.args.bucket_batches, seed=self.args.seed,
                                   labels=list(dataset["labels"]))

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        if self.args.length_chunks < 2 or return_outputs or not model.training:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        return chunked_loss(model, inputs, self.args.length_chunks)


def chunked_loss(model: Any, inputs: dict[str, Any], chunks: int) -> Any:
    """Mean cross-entropy of one padded batch, computed in ``chunks`` forward passes over length-sorted slices.

    The batch must be right-padded. Each slice drops the trailing padding columns that none of its rows needs, so a
    batch costs fewer padded tokens while its examples, and the loss the optimizer sees (the mean over the whole
    batch), stay those of the unchunked batch; only float summation order and dropout draws differ. Batches stay
    random, unlike length-bucketed sampling.
    """
    import torch
    import torch.nn.functional as F

    labels = inputs["labels"]
    lengths = inputs["attention_mask"].sum(-1)
    total = None
    for part in torch.argsort(lengths).chunk(chunks):
        width = int(lengths[part].max())
        sub = {key: value[part][:, :width] if value.dim() == 2 else value[part]
               for key, value in inputs.items() if key != "labels"}
        logits = model(**sub).logits.float()
        loss = F.cross_entropy(logits, labels[part], reduction="sum")
        total = loss if total is None else total + loss
    return total / labels.numel()


def _accuracy(eval_pred: Any) -> dict[str, float]:
    import numpy as np

    logits, labels = eval_pred
    return {"accuracy": float((np.asarray(logits).argmax(-1) == np.asarray(labels)).mean())}


def train_head(mix: MixArguments, args: HeadTrainingArguments) -> TrainedHead:
    """Train, calibrate and save one head to ``output_dir/head`` (and ``export_dir``); see the module docstring."""
    start = time.time()
    created = not Path(args.output_dir).exists()
    prepare_run_dir(args.output_dir, result="head", overwrite=args.overwrite_output_dir)
    try:
        return _train_head(mix, args, start)
    except BaseException:
        if created and Path(args.output_dir).is_dir() and not any(Path(args.output_dir).iterdir()):
            Path(args.output_dir).rmdir()  # refused input or an early failure leaves no empty run folder behind
        raise


def _train_head(mix: MixArguments, args: HeadTrainingArguments, start: float) -> TrainedHead:
    from transformers import DataCollatorWithPadding, EarlyStoppingCallback, set_seed

    if args.torch_threads > 0:
        import torch

        torch.set_num_threads(args.torch_threads)
    set_seed(args.seed)
    datasets, summary = build_splits(mix, args.data_dir)
    if 0 < args.max_eval_pairs < len(datasets["val"]):
        datasets["val"] = datasets["val"].shuffle(seed=args.seed).select(range(args.max_eval_pairs))
        summary["val"]["pairs_used"] = args.max_eval_pairs
    model, tokenizer = load_base(args)
    if args.length_chunks > 1 and tokenizer.padding_side != "right":
        raise ValueError(f"length_chunks={args.length_chunks} needs a right-padding tokenizer (padding_side is "
                         f"{tokenizer.padding_side!r}): dropping left padding would shift absolute positions. Set "
                         "length_chunks: 0.")
    encoded = {name: encode_pairs(ds, model, tokenizer, args.max_length) for name, ds in datasets.items()}
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "chain_ids"} for k, v in summary.items()}),
          flush=True)
    callbacks: list[Any] = [EarlyStoppingCallback(early_stopping_patience=args.early_stopping_patience)]
    budget = TimeBudgetCallback(args.max_train_seconds) if args.max_train_seconds else None
    if budget:
        callbacks.append(budget)
    if args.stop_at_step:
        callbacks.append(StopAtStepCallback(args.stop_at_step))
    trainer = HeadTrainer(
        model=model, args=args, train_dataset=encoded["train"], eval_dataset=encoded["val"],
        data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=_accuracy, callbacks=callbacks,
    )
    result = trainer.train()
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "splits.json").write_text(json.dumps(summary, indent=2) + "\n")  # every chain id, per split
    best = trainer.state.best_model_checkpoint
    extra = {"training": {"mix": asdict(mix), "seed": args.seed, "full_finetune": args.full_finetune,
                          "init_adapter": args.init_adapter or None, "lora_r": args.lora_r,
                          "lora_alpha": args.lora_alpha, "lora_layers": list(args.lora_layers),
                          "learning_rate": args.learning_rate,
                          "bucket_batches": args.bucket_batches, "length_chunks": args.length_chunks,
                          "steps": result.global_step,
                          "stopped_by_time_budget": bool(budget and budget.stopped_at is not None),
                          "stop_at_step": args.stop_at_step or None,
                          "best_step": int(best.rsplit("-", 1)[-1]) if best else None,
                          "train_seconds": round(time.time() - start, 1),
                          "splits": {k: {kk: vv for kk, vv in v.items() if kk != "chain_ids"}
                                     for k, v in summary.items()}}}
    calibration = calibrate_and_save(trainer, tokenizer, args, mix, encoded, extra)
    print(json.dumps({"temperature": calibration["temperature"], "bias": calibration["bias"], "val": calibration["val"],
                      "test": calibration["test"]}, indent=2), flush=True)
    return TrainedHead(trainer.model, tokenizer, calibration, Path(args.output_dir) / "head")


def parse_args(argv: Sequence[str] | None = None) -> tuple[MixArguments, HeadTrainingArguments]:
    """``[config.yaml] [--field value ...]``: YAML values are defaults, command-line flags override them."""
    from transformers import HfArgumentParser

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser((MixArguments, HeadTrainingArguments), prog="ares-rerank train head")
    if argv and argv[0].endswith((".yaml", ".yml")):
        import yaml

        path = argv.pop(0)
        try:
            config = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise ValueError(f"config {path!r} is not valid YAML ({' '.join(str(err).split())}).") from err
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"config {path!r} cannot be read ({getattr(err, 'strerror', None) or err}): pass a "
                             "training YAML, e.g. training/configs/default_head.yaml.") from err
        if not isinstance(config, dict):
            raise ValueError(f"config {path!r} holds a YAML {type(config).__name__}; expected a mapping of "
                             "argument: value, e.g. 'max_steps: 200'.")
        known = {a.dest for a in parser._actions}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"config keys {unknown} are not arguments of MixArguments / HeadTrainingArguments.")
        parser.set_defaults(**config)
    mix, args = parser.parse_args_into_dataclasses(args=argv)
    return mix, args


def main(argv: Sequence[str] | None = None) -> int:
    mix, args = parse_args(argv)
    train_head(mix, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

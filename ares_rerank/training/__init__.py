"""Train verifiers: a calibrated entailment head for ARES, or a step-tag PRM head.

Data flow: labelled chains (your JSONL via ``chains_file``, or the generated ClaimTrees mix, :mod:`.mix`, whose
state names come from :mod:`.names` and wordings from :mod:`.wordings`) -> split by chain id -> entailment pairs with
the backbone's own premise selection (:mod:`.pairs`) -> ``transformers.Trainer`` (:mod:`.head`: a fresh LoRA adapter,
a saved one continued or widened by :mod:`.adapters`, or full fine-tuning; early stopping, optional length-bucketed
batches from :mod:`.sampling`, a time budget from :mod:`.callbacks`) -> temperature (or Platt) calibration, a
reliability diagram and a collapse check (:mod:`.export`, with :mod:`ares_rerank.calibration`) -> a head folder that
``load_backbone(path)`` loads. :mod:`.adapt` continues a trained head on a user's chains with replay of its own
mix (``ares-rerank adapt``). :mod:`.prm` trains a step-tag PRM on TRL-style ``{prompt, completions, labels}`` rows.

    ares-rerank train head --chains_file chains.jsonl --output_dir runs/my-head --max_steps 200
    ares-rerank calibrate runs/my-head/head --pairs heldout.jsonl

The recipe and configs that reproduce the shipped default head live in the source checkout's ``training/`` folder.
"""

from .adapt import AdaptArguments, AdaptedHead, adapt_head
from .head import (
    HeadTrainer,
    HeadTrainingArguments,
    TrainedHead,
    TrainingCollapsed,
    check_not_collapsed,
    claimtrees_oracle_for,
    parse_args,
    split_rows,
    train_head,
)
from .mix import MixArguments, training_chains
from .pairs import build_pairs, chain_pairs, pairs_dataset, split_chains
from .prm import PRMTrainingArguments, train_prm


__all__ = [
    "AdaptArguments",
    "AdaptedHead",
    "HeadTrainer",
    "HeadTrainingArguments",
    "MixArguments",
    "PRMTrainingArguments",
    "TrainedHead",
    "TrainingCollapsed",
    "adapt_head",
    "build_pairs",
    "chain_pairs",
    "check_not_collapsed",
    "claimtrees_oracle_for",
    "pairs_dataset",
    "parse_args",
    "split_chains",
    "split_rows",
    "train_head",
    "train_prm",
    "training_chains",
]

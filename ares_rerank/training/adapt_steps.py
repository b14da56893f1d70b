"""The training, measuring and saving steps of :mod:`ares_rerank.training.adapt`.

:func:`train_and_measure` continues the head's adapter at its own rank on the mixed stream of pairs, refits the
calibration with the head's method, and measures every check set before and after; :func:`save_adapted` saves the
head with its card and the adaptation record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..chain import Chain


__all__ = ["ares_f1_at_half", "save_adapted", "train_and_measure"]

# The fixed threshold of the reported ARES macro-F1 (a step is flagged when its score is at most this).
THRESHOLD = 0.5


def _training_args(folder: Path, settings: dict[str, Any], args: Any) -> Any:
    from .head import HeadTrainingArguments

    return HeadTrainingArguments(
        output_dir=args.output_dir, base_model=settings["base_model"], init_adapter=str(folder),
        lora_r=settings["lora_r"], lora_alpha=settings["lora_alpha"], lora_dropout=0.0,
        max_length=settings["max_length"], calibration_method=settings["calibration_method"],
        learning_rate=args.learning_rate, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64, warmup_steps=min(10, args.max_steps // 10), weight_decay=0.01,
        lr_scheduler_type="linear", eval_strategy="no", save_strategy="no", load_best_model_at_end=False,
        logging_steps=max(1, args.max_steps // 6), length_chunks=min(4, args.batch_size), seed=args.seed,
        disable_tqdm=not args.progress, report_to="none", dataloader_num_workers=0, dataloader_pin_memory=False,
        max_train_seconds=args.max_train_seconds, overwrite_output_dir=True)


def ares_f1_at_half(chains: list[Chain], backbone: Any) -> float:
    """ARES macro-F1 of ``chains`` (prior 1, auto mode) with a step flagged when its score is at most 0.5."""
    from ..config import AresConfig
    from ..evaluation.protocol import macro_prf
    from ..scoring import score_chains

    scores = score_chains(chains, backbone, method="ares", config=AresConfig(prior=1.0, mode="auto"),
                          show_progress_bar=False)
    labels = [y for c in chains for y in c.labels]
    flagged = [int(x <= THRESHOLD) for s in scores for x in s.step_scores]
    return macro_prf(labels, flagged)[2]


def _recorded_test(settings: dict[str, Any], encoded: dict[str, Any]) -> dict[str, float] | None:
    """The head's own test-split numbers from its record, when they were measured on these very pairs (the same
    count, rebuilt from its recorded mix): measuring them again would cost the CPU minutes and give the same."""
    test = settings["record"].get("test")
    if "head_test" not in encoded or not isinstance(test, dict) or test.get("num_pairs") != len(encoded["head_test"]):
        return None
    if not isinstance(test.get("accuracy_after"), float) or not isinstance(test.get("ece_after"), float):
        return None
    return {"pair accuracy": test["accuracy_after"], "ECE": test["ece_after"]}


def _measure(trainer: Any, tokenizer: Any, settings: dict[str, Any], scale: tuple[float, float],
             encoded: dict[str, Any], heldout: list[Chain], before: bool = False) -> tuple[dict[str, Any], Any]:
    """Every check set at the calibration ``scale`` = (temperature, bias): your held-out pairs and chains, and the
    head's own test pairs (``before``: from its record when that measured the same pairs); and the calibration
    report of the head's test pairs (``None`` when not measured)."""
    from ..backbones.nli import EntailmentHead
    from ..calibration import calibrate

    out: dict[str, dict[str, float]] = {}
    test_report = None
    recorded = _recorded_test(settings, encoded) if before else None
    if recorded is not None:
        out["head_test"] = recorded
    for name in ("heldout", "head_test"):
        if name not in encoded or not len(encoded[name]) or name in out:
            continue
        pred = trainer.predict(encoded[name])
        report = calibrate(pred.predictions, pred.label_ids, temperature=scale[0], bias=scale[1])
        out[name] = {"pair accuracy": float(report.accuracy_after), "ECE": float(report.ece_after)}
        test_report = report if name == "head_test" else test_report
    model = trainer.model.eval()
    head = EntailmentHead(model, tokenizer, temperature=scale[0], bias=scale[1], cache_size=0,
                          premise_selection=settings["premise_selection"], max_length=settings["max_length"])
    out.setdefault("heldout", {})["ARES macro-F1 at 0.5"] = ares_f1_at_half(heldout, head)
    return out, test_report


def train_and_measure(folder: Path, settings: dict[str, Any], args: Any, data: dict[str, Any],
                      heldout: list[Chain]) -> dict[str, Any]:
    """Train the continued adapter on ``data["train"]``, refit the calibration on ``data["val"]`` and measure the
    check sets before and after (see :mod:`ares_rerank.training.adapt`)."""
    from transformers import DataCollatorWithPadding, set_seed

    from ..calibration import calibrate
    from .callbacks import TimeBudgetCallback
    from .head import HeadTrainer, encode_pairs, load_base

    hargs = _training_args(folder, settings, args)
    set_seed(args.seed)
    model, tokenizer = load_base(hargs)
    encoded = {name: encode_pairs(ds, model, tokenizer, settings["max_length"]) for name, ds in data.items()}
    budget = [TimeBudgetCallback(args.max_train_seconds)] if args.max_train_seconds else []
    trainer = HeadTrainer(model=model, args=hargs, train_dataset=encoded["train"],
                          data_collator=DataCollatorWithPadding(tokenizer), callbacks=budget)
    before, _ = _measure(trainer, tokenizer, settings, (settings["temperature"], settings["bias"]), encoded, heldout,
                         before=True)
    result = trainer.train()
    val = trainer.predict(encoded["val"])
    fitted = calibrate(val.predictions, val.label_ids, method=settings["calibration_method"])
    after, test = _measure(trainer, tokenizer, settings, (fitted.temperature, fitted.bias), encoded, heldout)
    sizes = {"heldout": f"{len(heldout)} chains, {len(data['heldout'])} pairs",
             "head_test": f"{len(data['head_test'])} pairs" if "head_test" in data else ""}
    titles = {"heldout": "your held-out chains", "head_test": "the head's own test split"}
    report = {"sets": {titles[k]: {"size": sizes[k], "before": before[k], "after": after[k]} for k in before},
              "steps": result.global_step, "stopped_by_time_budget": bool(budget and budget[0].stopped_at)}
    return {"model": trainer.model, "tokenizer": tokenizer, "fitted": fitted, "test": test, "report": report,
            "base_model": hargs.base_model}


def save_adapted(adapted: dict[str, Any], settings: dict[str, Any], args: Any, adaptation: dict[str, Any],
                 mix: Any) -> dict[str, Any]:
    """Save the adapted head to ``output_dir/head`` (weights, calibration record with ``adaptation``, card)."""
    from dataclasses import asdict

    from .export import save_head

    record = settings["record"]
    training = dict(record.get("training") or {})
    if mix is not None:
        training["replay_mix"] = asdict(mix)  # adapting this head again replays the same generated mix
    calibration = {k: v for k, v in record.items() if k not in ("val", "test", "calibrated_on")}
    calibration.update({
        "temperature": adapted["fitted"].temperature, "bias": adapted["fitted"].bias,
        "premise_selection": settings["premise_selection"], "max_length": settings["max_length"],
        "val": adapted["fitted"].to_dict(), "training": training, "adaptation": adaptation,
        "calibrated_on": "val pairs of the adapted-on chains and of the head's own val split",
        **({"test": adapted["test"].to_dict()} if adapted["test"] is not None else {}),
    })
    save_head(adapted["model"], adapted["tokenizer"], Path(args.output_dir) / "head", calibration,
              adapted["base_model"])
    return calibration

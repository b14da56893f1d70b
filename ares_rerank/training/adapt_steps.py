"""The training, measuring and saving steps of :mod:`ares_rerank.training.adapt`.

:func:`train_and_measure` continues the head's adapter on a plan of batches that mix your pairs with replay pairs,
measures every check set before and after, and (only when asked) refits the calibration; :func:`save_adapted` saves
the head with its card and the adaptation record.

The loss is read where the head is used: on the calibrated entailment log-odds (the head's own temperature and bias),
so your labels are fitted at the scale the head scores at and the calibration of everything else stays valid. Replay
pairs are fitted to the head's own calibrated probabilities from before adapting (``replay_target="head"``: what it
knew, kept as it was; a distillation, which also keeps its confidence on inputs your chains do not resemble), or to
their gold labels. Dropout is off: a few dozen chains are fitted, not regularized by noise. After training, every
trained weight is averaged with its value before (:func:`average_weights`, ``adapted_weight`` of the adapted one).
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Sequence

from ..chain import Chain


__all__ = ["ares_f1_at_half", "average_weights", "batch_plan", "blend_weights", "entailment_log_odds",
           "forgetting_note", "save_adapted", "train_and_measure"]

# The fixed threshold of the reported ARES macro-F1 (a step is flagged when its score is at most this).
THRESHOLD = 0.5
# Rows per forward pass in training: a step's rows are run in length-sorted chunks of this many, so a short row is not
# padded to the longest of its batch (the loss, a sum over the step's rows, is the same).
CHUNK_ROWS = 4


def _training_args(folder: Path, settings: dict[str, Any], args: Any) -> Any:
    """The arguments :func:`~ares_rerank.training.head.load_base` reads: the head's base, adapter and rank (no dropout,
    as the module docstring says); the rest keep their defaults, unread."""
    from .head import HeadTrainingArguments

    return HeadTrainingArguments(output_dir=args.output_dir, base_model=settings["base_model"],
                                 init_adapter=str(folder), lora_r=settings["lora_r"],
                                 lora_alpha=settings["lora_alpha"], lora_dropout=0.0)


def entailment_log_odds(logits: Any, index: int, temperature: float, bias: float) -> Any:
    """Calibrated log-odds of class ``index`` (torch, differentiable): ``log p - log(1 - p)`` of
    :func:`~ares_rerank.calibration.entailment_probs_from_logits` (a single logit is binary log-odds)."""
    import torch

    if logits.shape[-1] == 1:
        return logits[:, 0] / temperature + bias
    scaled = logits / temperature
    others = torch.cat([scaled[:, :index], scaled[:, index + 1:]], dim=1)
    return scaled[:, index] + bias - torch.logsumexp(others, dim=1)


def batch_plan(n_user: int, n_replay: int, steps: int, batch_size: int, replay_share: float,
               seed: int) -> list[tuple[list[int], list[int]]]:
    """Per optimizer step, the indices of its user rows and replay rows: ``round(batch_size * replay_share)`` replay
    rows (none without replay pairs), drawn without repeats while they last; your rows cycled, each seen equally
    often."""
    rng = random.Random(seed)
    per_replay = min(batch_size - 1, round(batch_size * replay_share)) if n_replay else 0

    def cycled(n: int, per_step: int) -> list[list[int]]:
        pool: list[int] = []
        out = []
        for _ in range(steps):
            while len(pool) < per_step:
                pool += rng.sample(range(n), n)
            out.append(pool[:per_step])
            del pool[:per_step]
        return out

    replay = cycled(n_replay, per_replay) if per_replay else [[] for _ in range(steps)]
    return list(zip(cycled(n_user, batch_size - per_replay), replay))


def average_weights(model: Any, initial: dict[str, Any], weight: float) -> None:
    """Move every parameter named in ``initial`` (its value before training) to ``weight * now + (1 - weight) *
    initial``, in place: weight averaging of the adapted and the original head (WiSE-FT)."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in initial:
                param.mul_(weight).add_(initial[name].to(param.device), alpha=1.0 - weight)


def ares_f1_at_half(chains: list[Chain], backbone: Any) -> float:
    """ARES macro-F1 of ``chains`` (prior 1, auto mode) with a step flagged when its score is at most 0.5."""
    from ..estimator.config import AresConfig
    from ..evaluation.protocol import macro_prf
    from ..scoring import score_chains

    scores = score_chains(chains, backbone, method="ares", config=AresConfig(prior=1.0, mode="auto"),
                          show_progress_bar=False)
    labels = [y for c in chains for y in c.labels]
    flagged = [int(x <= THRESHOLD) for s in scores for x in s.step_scores]
    return macro_prf(labels, flagged)[2]


def _recorded_test(settings: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> dict[str, float] | None:
    """The head's own test-split numbers from its record, when they were measured on these very pairs (the same
    count, rebuilt from its recorded mix): measuring them again would cost the CPU minutes and give the same."""
    test = settings["record"].get("test")
    if not rows.get("head_test") or not isinstance(test, dict) or test.get("num_pairs") != len(rows["head_test"]):
        return None
    if not isinstance(test.get("accuracy_after"), float) or not isinstance(test.get("ece_after"), float):
        return None
    return {"pair accuracy": test["accuracy_after"], "ECE": test["ece_after"]}


def _logits(head: Any, rows: Sequence[dict[str, Any]]) -> Any:
    return head.logits([list(r["premises"]) for r in rows], [r["hypothesis"] for r in rows])


def _measure(heads: tuple[Any, Any], settings: dict[str, Any], rows: dict[str, list[dict[str, Any]]],
             heldout: list[Chain], before: bool = False) -> tuple[dict[str, Any], Any]:
    """Every check set at the heads' current calibration: your held-out pairs and chains, and the head's own test
    pairs (``before``: from its record when that measured the same pairs); and the calibration report of the
    head's test pairs (``None`` when not measured). ``heads``: the model read on pairs whose premises are already
    selected, and the same model with the head's premise selection, read on chains."""
    from ..calibration import calibrate

    head, scored = heads
    out: dict[str, dict[str, float]] = {}
    test_report = None
    recorded = _recorded_test(settings, rows) if before else None
    if recorded is not None:
        out["head_test"] = recorded
    for name in ("heldout", "head_test"):
        if not rows.get(name) or name in out:
            continue
        report = calibrate(_logits(head, rows[name]), [r["label"] for r in rows[name]], positive_index=head.label_index,
                           temperature=head.temperature, bias=head.bias)
        out[name] = {"pair accuracy": float(report.accuracy_after), "ECE": float(report.ece_after)}
        test_report = report if name == "head_test" else test_report
    out.setdefault("heldout", {})["ARES macro-F1 at 0.5"] = ares_f1_at_half(heldout, scored)
    return out, test_report


def _train(head: Any, args: Any, user: list[dict[str, Any]], replay: list[dict[str, Any]]) -> dict[str, Any]:
    """The optimizer loop: AdamW, linear warmup and decay, gradient clipping at 1, a progress bar."""
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    plan = batch_plan(len(user), len(replay), args.max_steps, args.batch_size, args.replay_share, args.seed)
    scale = (head.label_index, head.temperature, head.bias)
    model = head.model
    encode = [head.encode_pair(list(r["premises"]), r["hypothesis"]) for r in user]
    used = sorted({i for _, part in plan for i in part})
    replayed, overlong = {}, 0
    for i in used:  # a replayed step longer than the head's window alone cannot be read at it: left out, counted
        try:
            replayed[i] = head.encode_pair(list(replay[i]["premises"]), replay[i]["hypothesis"])
        except ValueError:
            overlong += 1
    if overlong:
        plan = [(mine, [i for i in theirs if i in replayed]) for mine, theirs in plan]
        used = sorted(replayed)
    targets: dict[int, float] = {}
    if args.replay_target == "head" and used:  # what the head said before adapting: one pass over the rows used
        with torch.inference_mode():
            for chunk in head.batch_plan([replayed[i] for i in used]):
                idx = [used[j] for j in chunk]
                odds = entailment_log_odds(model(**head.pad([replayed[i] for i in idx])).logits.float(), *scale)
                targets.update(zip(idx, torch.sigmoid(odds).tolist()))
    else:
        targets = {i: float(replay[i]["label"]) for i in used}
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.learning_rate, weight_decay=0.01)
    warmup = max(1, min(10, args.max_steps // 10))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda k: min((k + 1) / warmup, max(0.0, (args.max_steps - k) / max(1, args.max_steps - warmup))))
    start, losses, stopped = time.monotonic(), [], False
    bar = tqdm(plan, desc="adapting", unit="step", disable=not args.progress)
    for step, (mine, theirs) in enumerate(bar):
        parts = [([encode[i] for i in mine], torch.tensor([float(user[i]["label"]) for i in mine]))]
        if theirs:
            parts.append(([replayed[i] for i in theirs], torch.tensor([targets[i] for i in theirs])))
        total = None
        for items, target in parts:  # padded apart, in length-sorted chunks: replay rows are long and uneven
            order = sorted(range(len(items)), key=lambda i: len(items[i]["input_ids"]))
            for chunk in (order[i:i + CHUNK_ROWS] for i in range(0, len(order), CHUNK_ROWS)):
                odds = entailment_log_odds(model(**head.pad([items[i] for i in chunk])).logits.float(), *scale)
                loss = F.binary_cross_entropy_with_logits(odds, target[chunk].to(odds.device), reduction="sum")
                total = loss if total is None else total + loss
        total = total / args.batch_size
        total.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(total.detach()))
        bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.4f}")
        if args.max_train_seconds and time.monotonic() - start >= args.max_train_seconds:
            stopped = True
            break
    bar.close()
    return {"steps": step + 1, "stopped_by_time_budget": stopped, "replay_rows": len(used),
            "replay_rows_overlong": overlong,
            "final_loss": sum(losses[-10:]) / len(losses[-10:]), "train_seconds": round(time.monotonic() - start, 1)}


def blend_weights(model: Any, initial: dict[str, Any], trained: dict[str, Any], weight: float) -> None:
    """Set every parameter named in ``initial`` to ``weight * trained + (1 - weight) * initial``, in place (the
    averaging of :func:`average_weights`, redone from the trained values for each weight the back-off tries)."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in initial:
                param.copy_(initial[name].to(param.device) * (1.0 - weight) + trained[name].to(param.device) * weight)


def _forgetting_check(model: Any, initial: dict[str, Any], scored: Any, check: list[Chain], before: float,
                      args: Any) -> dict[str, Any]:
    """Measure the check chains after training at ``args.adapted_weight`` and, with ``on_forgetting="back_off"``,
    lower the weight until the drop is within ``args.forgetting_bound`` (:func:`~ares_rerank.training.guard.back_off`);
    the model is left at the weight kept. ``initial``: the trained parameters' values before training."""
    from .guard import back_off

    trained = {name: p.detach().clone() for name, p in model.named_parameters() if name in initial}

    def blend(weight: float) -> None:
        blend_weights(model, initial, trained, weight)

    def measure() -> float:
        return ares_f1_at_half(check, scored)

    if args.on_forgetting == "back_off":
        result = back_off(args.adapted_weight, blend, measure, before, args.forgetting_bound)
    else:
        blend(args.adapted_weight)
        score = measure()
        result = {"adapted_weight": args.adapted_weight, "held": before - score <= args.forgetting_bound,
                  "tries": [[args.adapted_weight, score]], "score": score}
    result.update(before=before, bound=args.forgetting_bound, action=args.on_forgetting,
                  backed_off=result["adapted_weight"] != args.adapted_weight)
    return result


def forgetting_note(check: dict[str, Any]) -> str | None:
    """One line on what a forgetting check did (``None`` when it held at the weight asked for)."""
    if check["held"] and not check["backed_off"]:
        return None
    tried = ", ".join(f"{w:g}: {s:.3f}" for w, s in check["tries"])
    if check["backed_off"] and check["held"]:
        kept = ("the head's own weights (nothing adapted)" if check["adapted_weight"] == 0 else
                f"adapted_weight {check['adapted_weight']:g}")
        return (f"note: the forgetting check (ARES macro-F1 at 0.5 of fresh wordings, {check['before']:.3f} before) "
                f"lost more than {check['bound']:g} at adapted_weight {check['tries'][0][0]:g}; backed off to {kept} "
                f"(tried {tried}). --on_forgetting warn keeps the weights; --forgetting_bound sets the bound.")
    return (f"note: the forgetting check (ARES macro-F1 at 0.5 of fresh wordings) fell from {check['before']:.3f} by "
            f"more than {check['bound']:g} (tried {tried}); the head forgets there. --on_forgetting back_off averages "
            "back toward the head's own weights until it holds.")


def train_and_measure(folder: Path, settings: dict[str, Any], args: Any, rows: dict[str, list[dict[str, Any]]],
                      heldout: list[Chain], check: list[Chain] | None = None) -> dict[str, Any]:
    """Continue the head on ``rows["train"]`` mixed with ``rows["replay"]``, measure the check sets before and
    after (``check``: the forgetting check's chains, see :mod:`~ares_rerank.training.guard`), and refit the
    calibration on ``rows["val"]`` when ``args.recalibrate`` (see :mod:`ares_rerank.training.adapt`)."""
    from transformers import set_seed

    from ..backbones.nli import EntailmentHead
    from ..calibration import calibrate
    from .head import load_base

    hargs = _training_args(folder, settings, args)
    set_seed(args.seed)
    model, tokenizer = load_base(hargs)
    model.eval()  # no dropout (see the module docstring), in training too; gradients flow all the same
    head = EntailmentHead(model, tokenizer, temperature=settings["temperature"], bias=settings["bias"],
                          cache_size=0, premise_selection="all", max_length=settings["max_length"])
    scored = EntailmentHead(model, tokenizer, temperature=settings["temperature"], bias=settings["bias"],
                            cache_size=0, premise_selection=settings["premise_selection"],
                            max_length=settings["max_length"])
    before, _ = _measure((head, scored), settings, rows, heldout, before=True)
    check = check or []
    check_before = ares_f1_at_half(check, scored) if check else None
    # the trained weights' values before training, to average with (and to back off toward)
    averaged = args.adapted_weight < 1.0 or bool(check)
    initial = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad and averaged}
    training = _train(head, args, rows["train"], rows["replay"])
    forgetting = None
    if check:
        forgetting = _forgetting_check(model, initial, scored, check, check_before, args)
    elif averaged:
        average_weights(model, initial, args.adapted_weight)
    fitted = None
    if args.recalibrate:
        fitted = calibrate(_logits(head, rows["val"]), [r["label"] for r in rows["val"]],
                           positive_index=head.label_index, method=settings["calibration_method"])
        for each in (head, scored):
            each.temperature, each.bias = fitted.temperature, fitted.bias
    after, test = _measure((head, scored), settings, rows, heldout)
    sizes = {"heldout": f"{len(heldout)} chains, {len(rows['heldout'])} pairs",
             "head_test": f"{len(rows.get('head_test') or [])} pairs"}
    titles = {"heldout": "your held-out chains", "head_test": "the head's own test split"}
    report = {"sets": {titles[k]: {"size": sizes[k], "before": before[k], "after": after[k]} for k in before},
              **training}
    if forgetting is not None:
        report["sets"]["fresh wordings, never trained on (forgetting check)"] = {
            "size": f"{len(check)} chains", "before": {"ARES macro-F1 at 0.5": forgetting["before"]},
            "after": {"ARES macro-F1 at 0.5": forgetting["score"]}}
        report["forgetting_check"] = forgetting
    return {"model": model, "tokenizer": tokenizer, "fitted": fitted, "scale": (scored.temperature, scored.bias),
            "test": test, "report": report, "base_model": hargs.base_model}


def save_adapted(adapted: dict[str, Any], settings: dict[str, Any], args: Any, adaptation: dict[str, Any],
                 mix: Any) -> dict[str, Any]:
    """Save the adapted head to ``output_dir/head`` (weights, calibration record with ``adaptation``, card)."""
    from dataclasses import asdict

    from ..utils.io import local_names
    from .export import save_head

    record = settings["record"]
    training = dict(record.get("training") or {})
    if mix is not None:
        training["replay_mix"] = asdict(mix)  # adapting this head again replays the same generated mix
    calibration = {k: v for k, v in record.items() if k not in ("test", "adaptation")}
    temperature, bias = adapted["scale"]
    calibration.update({
        "temperature": temperature, "bias": bias,
        "premise_selection": settings["premise_selection"], "max_length": settings["max_length"],
        "training": training, "adaptation": adaptation,
        **({"test": adapted["test"].to_dict()} if adapted["test"] is not None else {}),
    })
    if adapted["fitted"] is not None:
        calibration.update({"val": adapted["fitted"].to_dict(),
                            "calibrated_on": "val pairs of the adapted-on chains and of the head's own val split"})
    calibration = local_names(calibration)  # the head, the chains file, the base: names, never this machine's paths
    save_head(adapted["model"], adapted["tokenizer"], Path(args.output_dir) / "head", calibration,
              adapted["base_model"])
    return calibration


"""The model card (``README.md``) of a saved entailment head, written from its calibration record.

:meth:`~ares_rerank.backbones.nli.EntailmentHead.save_pretrained` writes it: Hub metadata (YAML front matter), the
settings ares-rerank applies, the held-out metrics, the intended use and limits, and how to load the head with
ares-rerank, peft, transformers or sentence-transformers (and what plain loading loses).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


__all__ = ["model_card"]

_SELECTIONS = {
    "all": "every premise",
    "relevant": "the premises that share a distinctive token with the step",
    "relevant-words": "the premises that share a distinctive token with the step (numbers read as quantities)",
}
_METRICS = (("num_pairs", "pairs", "{:d}"), ("accuracy", "accuracy", "{:.3f}"), ("ece_before", "ECE before", "{:.3f}"),
            ("ece_after", "ECE after", "{:.3f}"), ("nll_after", "NLL after", "{:.3f}"),
            ("temperature", "temperature", "{:.3f}"), ("bias", "bias", "{:.3f}"))


def model_card(record: dict[str, Any], *, base_model: str | None, adapter: bool, repo_id: str | None = None,
               lora_r: int | None = None, label: str | None = None, license: str = "apache-2.0") -> str:
    """The ``README.md`` of a saved head: Hub metadata (YAML) and what it is, how it was measured, how to load it.

    Args:
        record: The head's calibration record (``ares_calibration.json``): temperature, label, window, selection,
            and when present ``val`` / ``test`` metrics, ``training`` and ``domain``.
        base_model: The base model's Hub id (``None``: not on the Hub; left out of the metadata).
        adapter: A peft adapter (``library_name: peft``) or a full model (``transformers``).
        repo_id: The Hub id the loading examples name (default: a placeholder).
        lora_r: The adapter's LoRA rank, if known.
        label: The name of the entailment class.
        license: The license of the weights (the base model's terms apply too).

    Returns:
        The card text: YAML front matter, then Markdown.
    """
    from huggingface_hub import ModelCardData

    tags = ["ares-rerank", "entailment", "process-reward"] + (["lora"] if adapter else [])
    data = ModelCardData(library_name="peft" if adapter else "transformers", base_model=base_model,
                         pipeline_tag="text-classification", license=license, tags=tags,
                         **({"base_model_relation": "adapter"} if adapter and base_model else {}))
    name = repo_id or "path/or/hub-id"
    on = f"[`{base_model}`](https://huggingface.co/{base_model})" if base_model else "a local base model"
    kind = f"A LoRA adapter{f' (r={lora_r})' if lora_r else ''}" if adapter else "A sequence classifier"
    sections = [
        f"# {repo_id.rsplit('/', 1)[-1] if repo_id else 'ARES entailment head'}",
        f"{kind} on {on} that scores P(premises entail step): an entailment backbone for ares-rerank "
        "(`pip install ares-rerank`), which turns it into ARES step-level soundness scores of reasoning chains "
        "(reranking best-of-N candidates, filtering datasets, rewards for GRPO).",
        "## Settings applied by ares-rerank\n\n" + _settings_table(record, label)
        + "\n\nThey live in `ares_calibration.json` and are applied when ares-rerank loads this repo.",
        "## Measured\n\n" + _metrics_table(record),
        *([_adaptation(record["adaptation"])] if isinstance(record.get("adaptation"), dict) else []),
        "## Intended use and limits\n\n" + _limits(record),
        "## Load\n\n" + _loading(name, record, base_model, adapter),
    ]
    return f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(sections) + "\n"


def _settings_table(record: dict[str, Any], label: str | None) -> str:
    selection = record.get("premise_selection") or "all"
    kind, _, k = selection.partition(":")
    described = _SELECTIONS.get(kind, "a custom selection")
    if k:
        described = f"at most {k} of {described}, in chain order"
    index = record.get("entailment_label")
    rows = [
        ("temperature", f"{float(record.get('temperature', 1.0)):.4g}",
         "logits are divided by it before the softmax (1 = uncalibrated)"),
    ] + ([("bias", f"{float(record['bias']):.4g}", "added to the entailment logit after the temperature (Platt)")]
         if record.get("bias") else []) + [
        ("premise selection", f"`{selection}`", f"the head reads {described}"),
        ("window", f"{record['max_length']} tokens" if record.get("max_length") else "the model's",
         "premises that do not fit are dropped least relevant first; the step is never cut"),
        ("entailment class", f"{index}" + (f" (`{label}`)" if label else ""),
         "the class whose probability is the score"),
    ]
    lines = ["| setting | value | what it does |", "| --- | --- | --- |"]
    return "\n".join(lines + [f"| {a} | {b} | {c} |" for a, b, c in rows])


def _metrics_table(record: dict[str, Any]) -> str:
    splits = [(name, record[name]) for name in ("val", "test") if isinstance(record.get(name), dict)]
    if not splits:
        return ("No held-out metrics were recorded with this head. Measure accuracy and calibration on pairs from "
                "your own chains (`ares-rerank calibrate`) before trusting its probabilities.")
    keys = [m for m in _METRICS if any(m[0] in split for _, split in splits)]
    lines = ["| split | " + " | ".join(title for _, title, _ in keys) + " |", "| --- |" + " --- |" * len(keys)]
    for name, split in splits:
        cells = [fmt.format(split[key]) if isinstance(split.get(key), (int, float)) else "" for key, _, fmt in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    bins = next((split["n_bins"] for _, split in splits if isinstance(split.get("n_bins"), int)), None)
    note = (f"\n\nECE: expected calibration error of the entailment probability{f' ({bins} bins)' if bins else ''}, "
            "before and after calibration; `val` pairs fitted it, `test` pairs were held out.")
    training = record.get("training")
    if isinstance(training, dict):
        facts = [f"{key.replace('_', ' ')} {training[key]}" for key in ("steps", "best_step", "learning_rate",
                                                                          "lora_r", "seed") if key in training]
        note += "\n\nTraining: " + ", ".join(facts) + "." if facts else ""
    return "\n".join(lines) + note


def _adaptation(adaptation: dict[str, Any]) -> str:
    """The card section of a head adapted by ``ares-rerank adapt``: on what, how, and every check set before and
    after (and any measurements added under ``measured``)."""
    chains = adaptation.get("chains") or {}
    replay = adaptation.get("replay") or {}
    source = Path(str(adaptation.get("chains_file", "?"))).name
    sources = replay.get("sources") or {}  # as many pairs from each source of the mix, unless replay_max_chars cut some
    each = (f"; {max(sources.values())} from each of {', '.join(sources)}" if len(set(sources.values())) == 1 else
            "; by source: " + ", ".join(f"{n} {source}" for source, n in sources.items()) if sources else "")
    weight = (adaptation.get("arguments") or {}).get("adapted_weight", 1.0)
    check = adaptation.get("forgetting_check") or {}
    weight = check.get("adapted_weight", weight)  # the weight a failed forgetting check backed off to, if it did
    text = (f"Adapted from `{adaptation.get('head', '?')}` on {sum(chains.values())} labelled chains of `{source}` "
            f"({chains.get('train', 0)} trained on, {chains.get('val', 0)} for the calibration, "
            f"{chains.get('heldout', 0)} held out) with `ares-rerank adapt`, "
            + (f"replaying {replay.get('pairs', 0)} pairs of {replay.get('chains', 0)} chains of the generated mix the "
               f"head was trained on ({replay.get('share', 0):.0%} of each batch{each})" if replay.get("pairs")
               else "without replay")
            + (f", then averaged with the head's own weights ({weight:.0%} adapted)" if weight < 1 else "")
            + (f" (backed off from {check['tries'][0][0]:.0%}: the forgetting check lost more than {check['bound']:g} "
               "there)" if check.get("backed_off") else "") + ".")
    report = adaptation.get("report") or {}
    rows = [f"| {name} ({entry.get('size', '')}) | {key} | {entry['before'][key]:.3f} | {entry['after'][key]:.3f} |"
            for name, entry in (report.get("sets") or {}).items() for key in entry.get("before", {})
            if key in entry.get("after", {})]
    if rows:
        text += "\n\n| set | measure | before | after |\n| --- | --- | --- | --- |\n" + "\n".join(rows)
    if adaptation.get("wall_seconds") is not None:
        text += (f"\n\nWall time {adaptation['wall_seconds']:.0f} s, CPU time {adaptation.get('cpu_seconds', 0):.0f} s "
                 "(the checks included).")
    if isinstance(adaptation.get("measured"), str) and adaptation["measured"]:
        text += "\n\n" + adaptation["measured"]
    return "## Adapted\n\n" + text


def _limits(record: dict[str, Any]) -> str:
    training = record.get("training") if isinstance(record.get("training"), dict) else {}
    mix = training.get("mix") if isinstance(training.get("mix"), dict) else {}
    domain = record.get("domain")
    if isinstance(domain, str) and domain:
        trained_on = f"Its domain: {domain}."
    elif mix.get("chains_file"):
        trained_on = f"Trained on the labelled chains of `{Path(str(mix['chains_file'])).name}`."
    elif mix:
        trained_on = ("Trained on generated ClaimTrees chains only (rules and facts over made-up names, "
                      f"{len(mix.get('templates') or [])} wordings): it learned their surface forms, not entailment "
                      "in general. Do not expect calibrated scores on math or natural-language chains.")
    else:
        trained_on = "Its training data are not recorded here."
    return (
        "- Intended use: judging whether a step of a reasoning chain follows from the claims before it, as the "
        "backbone of ARES (`ares_rerank.score_chains`, `AresReranker`, `AresReward`), or pair by pair with "
        "`predict`.\n"
        f"- {trained_on}\n"
        "- The calibration was fitted on held-out pairs of the training distribution; on other inputs the "
        "probabilities are neither calibrated nor necessarily meaningful. Check scores on a few labelled chains of "
        "your own first."
    )


def _loading(name: str, record: dict[str, Any], base_model: str | None, adapter: bool) -> str:
    ares = (
        "With ares-rerank (temperature, premise selection and window applied; `revision=`, `token=`, `cache_dir=` "
        "as in `from_pretrained`):\n\n```python\nfrom ares_rerank import load_backbone\n\n"
        f'head = load_backbone("{name}")\n'
        'head.predict([(["All men are mortal.", "Socrates is a man."], "Socrates is mortal.")])  # numpy array\n```'
    )
    base = base_model or "<base model>"
    if adapter:
        plain = (
            "With peft or sentence-transformers (the weights only):\n\n```python\n"
            "from peft import AutoPeftModelForSequenceClassification\n\n"
            f'model = AutoPeftModelForSequenceClassification.from_pretrained("{name}")\n\n'
            "from sentence_transformers import CrossEncoder\n\n"
            f'model = CrossEncoder("{base}", num_labels=2)\nmodel.load_adapter("{name}")\n```'
        )
    else:
        plain = (
            "With transformers or sentence-transformers (the weights only):\n\n```python\n"
            "from transformers import AutoModelForSequenceClassification\n\n"
            f'model = AutoModelForSequenceClassification.from_pretrained("{name}")\n\n'
            "from sentence_transformers import CrossEncoder\n\n"
            f'model = CrossEncoder("{name}")\n```'
        )
    temperature, bias = float(record.get("temperature", 1.0)), float(record.get("bias", 0.0))
    scaled = f"`logits / {temperature:.4g}`" + (f" with {bias:.4g} added to the entailment logit" if bias else "")
    lost = (
        f"What plain loading loses: the calibration (the softmax of {scaled}, not `softmax(logits)`), the premise "
        "selection "
        f"(`{record.get('premise_selection') or 'all'}`: the head was trained and calibrated on selected premises), "
        "and the input convention (premises joined by newlines as the first text of the pair, the step as the "
        "second; premises that do not fit the window dropped least relevant first, never truncated mid-claim)."
    )
    return "\n\n".join([ares, plain, lost])

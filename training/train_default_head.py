"""Train the shipped default head end to end: one command, every stage of the recipe.

    python -m training.train_default_head                              # writes runs/ and ares_rerank/default_head/
    python -m training.train_default_head --runs_dir /tmp/try --export_dir ""    # a dry rerun that ships nothing
    python -m training.train_default_head --last_stage stage4          # the CPU stages only (v4, 84 min on 2 cores)
    python -m training.train_default_head --recipe varied --runs_dir runs/varied  # issue 17's mix; exports nothing

Stages 1-4 train on generated ClaimTrees chains (a CPU does them in 84 minutes): stage 1
(``configs/default_head_stage1.yaml``) trains a fresh LoRA adapter; stage 2 (``configs/default_head.yaml``) continues it
with minimal-pair negatives; stage 3 (``configs/default_head_stage3.yaml``) on 3,000 fresh chains for 2,400 more
steps; stage 4 (``configs/default_head_stage4.yaml``) for 1,600 steps on chains half of which are written in random
wordings (and with multi-word names). Stages 5 and 6 (``configs/default_head_stage5_gpu.yaml``,
``configs/default_head_stage6_gpu.yaml``) need a GPU (about 13.6 s a step on two CPU cores, minutes on one GPU):
stage 5 widens the adapter to rank 64 and trains it on a mix that is 65% CaptainCookRecipes chains of the training
recipe graphs, with the words rule of premise selection and 512-token inputs; stage 6 refines it at half the rate.
Each stage starts from the previous stage's head and is checked for collapse (:func:`check_not_collapsed`) before the
next runs or anything is exported; only the last stage (``--last_stage``) exports, and only
the full recipe exports to the shipped folder by default. On a CUDA machine every stage uses TF32 matrix products,
as stages 5 and 6 of the shipped head did. The stages, their settings and why there are six are in
training/README.md. Prints and writes (``<runs_dir>/recipe.json``) the wall time of each stage and of the whole recipe.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import torch

from ares_rerank.utils.io import prepare_run_dir
from ares_rerank.training import check_not_collapsed, parse_args, train_head


__all__ = ["STAGES", "VARIED_STAGES", "check_not_collapsed", "main"]

CONFIGS = Path(__file__).resolve().parent / "configs"
# (stage, config, folder under --runs_dir); each stage continues the previous stage's head, the last one exports.
STAGES = (("stage1", CONFIGS / "default_head_stage1.yaml", "default_head_stage1"),
          ("stage2", CONFIGS / "default_head.yaml", "default_head"),
          ("stage3", CONFIGS / "default_head_stage3.yaml", "default_head_stage3"),
          ("stage4", CONFIGS / "default_head_stage4.yaml", "default_head_stage4"),
          ("stage5", CONFIGS / "default_head_stage5_gpu.yaml", "default_head_stage5"),
          ("stage6", CONFIGS / "default_head_stage6_gpu.yaml", "default_head_stage6"))
# The varied wordings / names / distractors mix (issue 17): measured, not shipped (training/README.md, run v3).
VARIED_STAGES = (("stage1", CONFIGS / "varied_head_stage1.yaml", "default_head_stage1"),
                 ("stage2", CONFIGS / "varied_head.yaml", "default_head"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.train_default_head", description=__doc__.split("\n")[0])
    parser.add_argument("--runs_dir", default="runs", help="Where the stages write checkpoints, logs and heads.")
    parser.add_argument("--export_dir", default=None,
                        help="Where the final head is written ('' = nowhere). Default: the shipped head for "
                             "--recipe default, nowhere for --recipe varied.")
    parser.add_argument("--recipe", choices=("default", "varied"), default="default",
                        help="default: the shipped head's stages; varied: the varied-mix stages (varied_head*.yaml).")
    parser.add_argument("--last_stage", default=None,
                        help="Stop after this stage (default: the recipe's last; stage4 = the CPU stages of the "
                             "default recipe). A partial recipe exports nowhere unless --export_dir is given.")
    parser.add_argument("--bf16", action="store_true",
                        help="Train every stage under bfloat16 autocast (TrainingArguments.bf16; weights stay "
                             "float32; on a machine without CUDA it trains on the CPU): 70 instead of 84 minutes on "
                             "our 2-core CPU with native bf16, but that run gave a weaker head (training/README.md).")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace the heads and checkpoints an earlier run left in --runs_dir (otherwise such a "
                             "runs_dir is refused before the first stage starts).")
    args = parser.parse_args(argv)
    shipped = str(Path(__file__).resolve().parents[1] / "ares_rerank" / "default_head")
    stages = STAGES if args.recipe == "default" else VARIED_STAGES
    names = [name for name, _, _ in stages]
    if args.last_stage is not None:
        if args.last_stage not in names:
            parser.error(f"--last_stage {args.last_stage!r} is not a stage of --recipe {args.recipe}: choose from "
                         f"{', '.join(names)}.")
        stages = stages[: names.index(args.last_stage) + 1]
    if args.export_dir is None:
        whole = len(stages) == len(names)
        args.export_dir = shipped if args.recipe == "default" and whole else ""

    runs = Path(args.runs_dir)
    for _, _, folder in stages:  # every stage's folder before the first starts, not an hour in
        try:
            prepare_run_dir(runs / folder, result="head", overwrite=args.overwrite, flag="runs_dir",
                            overwrite_flag="--overwrite")
        except ValueError as err:
            parser.error(str(err))
    seconds, start, previous = {}, time.time(), None
    for i, (name, config, folder) in enumerate(stages):
        last = i == len(stages) - 1
        # the recipe's runs_dir and chaining override the stage configs; train_head exports only a head that passed
        # its collapse check
        overrides = ["--output_dir", str(runs / folder), "--export_dir", args.export_dir if last else "",
                     "--overwrite_output_dir", str(args.overwrite).lower()]
        if previous is not None:
            overrides += ["--init_adapter", str(previous)]
        if last:
            overrides += ["--overwrite_default_head", "true"]
        if torch.cuda.is_available():
            overrides += ["--tf32", "true"]
        if args.bf16:  # transformers asks use_cpu for bf16 without a GPU (CPU autocast)
            overrides += ["--bf16", "true"] + ([] if torch.cuda.is_available() else ["--use_cpu", "true"])
        stage_start = time.time()
        mix, head_args = parse_args([str(config), *overrides])
        check_not_collapsed(name, train_head(mix, head_args).calibration)
        seconds[name] = round(time.time() - stage_start, 1)
        previous = runs / folder / "head"
        print(json.dumps({"stage": name, "seconds": seconds[name]}), flush=True)
    record = {"recipe": args.recipe, "bf16": args.bf16, "cuda": torch.cuda.is_available(),
              "stages": {name: str(config) for name, config, _ in stages},
              "seconds": {**seconds, "total": round(time.time() - start, 1)},
              "head": str(previous), "export_dir": args.export_dir}
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "recipe.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Data-parallel scoring of a data set of chains with accelerate: each process scores a shard, results come back in
the original order on every process.

ARES scores do not depend on how the data is split: the sampler of a chain is seeded by ``AresConfig.seed`` and the
chain's own text (:meth:`Chain.fingerprint`), and every backbone is a fixed function of its inputs, so N processes give
exactly the single-process scores (tested with ``accelerate launch --multi_gpu --num_processes 2``, which on a machine
without GPUs starts two CPU processes; ``--cpu`` alone starts one).

From Python (inside a script started with ``accelerate launch``, or plain ``python`` for one process)::

    from .distributed import score_dataset
    scores = score_dataset(dataset, backbone, method="ares")   # list[ChainScores], dataset order, every process

From the shell (one process per GPU; each loads its own copy of a local backbone on its own device)::

    accelerate launch --num_processes 4 -m ares_rerank.distributed \\
        --data chains.jsonl --backbone path/to/prm --kind prm --output scores.jsonl

Rows need ``base_claims`` (list of str) and ``steps`` (list of str), or ``prompt`` and ``completion`` (split with
``--step-separator``); ``labels`` and ``id`` are kept when present.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from .backbones.base import Backbone
from .chain import Chain, ChainScores
from .estimator.config import AresConfig
from .utils.io import atomic_open, check_output_path
from .scoring import METHODS, score_chains


__all__ = ["chains_from_rows", "main", "process_state", "score_dataset", "shard_indices"]


def shard_indices(num_rows: int, num_processes: int, process_index: int) -> list[int]:
    """Rows of one process: every ``num_processes``-th row from ``process_index`` (strided, so long and short
    chains spread evenly when the data is sorted by length)."""
    for name, value in (("num_rows", num_rows), ("num_processes", num_processes), ("process_index", process_index)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"shard_indices({name}={value!r}) must be an int.")
    if num_rows < 0 or num_processes < 1:
        raise ValueError(f"shard_indices(num_rows={num_rows}, num_processes={num_processes}): rows >= 0, processes "
                         ">= 1.")
    if not 0 <= process_index < num_processes:
        raise ValueError(f"process_index={process_index} must lie in [0, num_processes={num_processes}).")
    return list(range(process_index, num_rows, num_processes))


def chains_from_rows(rows: dict[str, list[Any]], step_separator: str | None = "\n\n",
                     prompt_split: str = "none") -> list[Chain]:
    """Chains from a column batch (``dataset[i:j]`` or ``dataset.select(...)[:]``): see the module doc for columns."""
    lengths = {name: len(column) for name, column in rows.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the columns have different lengths {lengths}: one value per row in every column.")
    n = next(iter(lengths.values()), 0)
    if "steps" not in rows and "completion" not in rows:
        raise ValueError(
            f"the data set has columns {sorted(rows)}: it needs 'steps' (and 'base_claims'), or 'completion' (and "
            "'prompt'). Rename columns with dataset.rename_column(old, new)."
        )
    chains = []
    for i in range(n):  # one row at a time through the one reader of rows (Chain.from_record)
        record = {name: column[i] for name, column in rows.items() if column[i] is not None}
        chains.append(Chain.from_record(record, step_separator, prompt_split))
    return chains


def score_dataset(
    dataset: Any,
    backbone: Backbone,
    method: str = "ares",
    config: AresConfig | None = None,
    *,
    batch_size: int = 16,
    step_separator: str | None = "\n\n",
    prompt_split: str = "none",
    progress: bool = True,
) -> list[ChainScores]:
    """Score every chain of ``dataset`` across the processes accelerate started; each process takes a shard.

    Args:
        dataset: A ``datasets.Dataset`` (or anything with ``len`` and ``select(indices)[:]``), one chain per row.
        backbone: This process's backbone (load it on this process's device: ``PartialState().device``).
        method: ``"ares"`` or a baseline name (see :func:`~ares_rerank.score_chains`).
        config: ARES settings; the same on every process.
        batch_size: Chains per :func:`score_chains` call (ARES batches all masks of a step across them).
        step_separator: For rows with ``completion`` instead of ``steps`` (``None`` = sentences).
        prompt_split: How a ``prompt`` becomes base claims: ``"none"``, ``"sentences"`` or ``"lines"``.
        progress: Show a progress bar on the main process (it counts the main process's shard).

    Returns:
        One :class:`ChainScores` per row, in dataset order, on every process.
    """
    if not callable(getattr(dataset, "select", None)):
        raise TypeError(f"score_dataset(dataset=...) is a {type(dataset).__name__}: pass a datasets.Dataset, e.g. "
                        "Dataset.from_list(rows) for a list of row dicts.")
    return [scores for _, _, scores in _score_sharded(dataset, backbone, method, config, batch_size, step_separator,
                                                      prompt_split, progress)]


def _score_sharded(
    dataset: Any, backbone: Backbone, method: str, config: AresConfig | None, batch_size: int,
    step_separator: str | None, prompt_split: str, progress: bool,
) -> list[tuple[int, int, ChainScores]]:
    """``(row, process that scored it, scores)`` for every row, in row order, on every process."""
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} must be a positive integer, e.g. 16.")
    if method not in METHODS:
        raise ValueError(f"method={method!r} is unknown: use one of {list(METHODS)}.")
    state = process_state()
    mine = shard_indices(len(dataset), state.num_processes, state.process_index)
    bar = tqdm(total=len(mine), disable=not (progress and state.is_main_process), unit="chain",
               desc=f"scoring (shard of process 0, {state.num_processes} processes)")
    local: list[tuple[int, int, ChainScores]] = []
    for start in range(0, len(mine), batch_size):
        batch = mine[start : start + batch_size]
        chains = chains_from_rows(dataset.select(batch)[:], step_separator, prompt_split)
        scores = score_chains(chains, backbone, method, config)
        local.extend((i, state.process_index, s) for i, s in zip(batch, scores))
        bar.update(len(batch))
    bar.close()
    gathered = sorted(gather_object(local) if state.num_processes > 1 else local, key=lambda item: item[0])
    if [item[0] for item in gathered] != list(range(len(dataset))):
        raise RuntimeError(f"gathered {len(gathered)} results for {len(dataset)} rows: a process lost its shard.")
    return gathered


def process_state() -> Any:
    """accelerate's ``PartialState`` for this process, on the CPU (gloo) when the machine has no accelerator.

    ``PartialState()`` alone treats processes started by ``accelerate launch --multi_gpu`` on a CPU-only machine as
    unrelated single processes; asking for the CPU state makes them one gloo group. ``accelerate launch --cpu
    --num_processes N`` starts ONE process unless accelerate is set up for MPI (``mpirun``): that case is warned about.
    """
    import torch
    from accelerate import PartialState
    from accelerate.utils import is_npu_available, is_xpu_available, parse_flag_from_env

    accelerator = torch.cuda.is_available() or is_xpu_available() or is_npu_available()
    state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU") or not accelerator)
    asked = "MASTER_PORT" in os.environ and "WORLD_SIZE" not in os.environ  # set by `--num_processes N>1` alone
    if state.num_processes == 1 and asked and parse_flag_from_env("ACCELERATE_USE_CPU"):
        warnings.warn(
            "accelerate launch --cpu --num_processes N started a single process (accelerate runs several CPU "
            "processes only through MPI): this process scores everything. For N CPU processes without MPI use "
            "`accelerate launch --multi_gpu --num_processes N ...` (torchrun; gloo on a CPU-only machine) or "
            "`torchrun --nproc_per_node N -m ares_rerank.distributed ...`.",
            stacklevel=2,
        )
    return state


# -- the command line --------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    from .commands import options

    p = argparse.ArgumentParser(
        prog="python -m ares_rerank.distributed",
        description="Score a data set of chains with ARES (or a baseline) across processes: run it with "
        "`accelerate launch --multi_gpu --num_processes N -m ares_rerank.distributed ...` (on a machine without "
        "GPUs this starts N CPU processes; --cpu would start one).",
    )
    p.add_argument("--data", required=True, help="A .jsonl/.json file, or a folder saved with Dataset.save_to_disk.")
    p.add_argument("--output", required=True, help="JSONL file of per-chain scores, in data order (main process).")
    p.add_argument("--method", default="ares", choices=METHODS)
    options.add_backbone_arguments(p)
    options.add_config_arguments(p)
    p.add_argument("--batch-size", type=int, default=16, help="Chains per scoring call.")
    options.add_chain_text_arguments(p)  # for rows with 'completion' instead of 'steps'
    p.add_argument("--limit", type=int, default=None, help="Score only the first N rows.")
    return p


def _load_data(path: str) -> Any:
    import datasets

    if Path(path).is_dir():
        try:
            return datasets.load_from_disk(path)
        except FileNotFoundError as err:
            raise ValueError(f"--data {path!r} is a folder but not one written by Dataset.save_to_disk: pass that "
                             "folder, or a .jsonl / .json file of chains.") from err
    if not Path(path).is_file():
        raise ValueError(f"--data {path!r} is neither a file nor a folder: pass a .jsonl file or a Dataset folder.")
    return datasets.load_dataset("json", data_files=path, split="train")


def _load(args: argparse.Namespace, device: Any) -> Backbone:
    from .backbones.loading import KINDS, SERVED_KINDS
    from .commands import options

    local = (args.kind in KINDS and args.kind not in SERVED_KINDS) or (
        args.kind is None and Path(args.backbone).is_dir())
    extra = {"device": str(device)} if local and "device" not in options.backbone_options(args) else {}
    return options.backbone_from_args(args, **extra)  # local models: one copy per process, on its own GPU


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m ares_rerank.distributed`` (under ``accelerate launch`` for several processes): bad
    input ends as one line on stderr and exit status 2, never a traceback (``ARES_DEBUG=1`` shows it)."""
    from .cli import run_reporting_errors
    from .utils.http import find_secrets

    args = _parser().parse_args(argv)
    return run_reporting_errors("ares_rerank.distributed", lambda: _run(args), secrets=find_secrets(vars(args)))


def _run(args: argparse.Namespace) -> int:
    from .commands import options

    options.positive(args.limit, "--limit")
    options.positive(args.batch_size, "--batch-size")
    check_output_path(args.output, inputs=[args.data])  # before any work, not after the last chain
    state = process_state()
    with state.main_process_first():  # the first process fills the datasets cache, the others read it
        dataset = _load_data(args.data)
    if args.limit is not None:
        dataset = dataset.select(range(min(args.limit, len(dataset))))
    config = options.config_from_args(args)
    threshold = options.rerank_config_from_args(args).threshold
    scored = _score_sharded(dataset, _load(args, state.device), args.method, config, args.batch_size,
                            options.step_separator(args.step_separator), args.prompt_split, progress=True)
    if state.is_main_process:
        out = Path(args.output)
        with atomic_open(out) as f:
            for i, owner, s in scored:
                f.write(json.dumps({"index": i, "process": owner, **s.to_dict()}) + "\n")
        flagged = sum(sum(s.flags(threshold)) for _, _, s in scored)
        print(f"scored {len(scored)} chains on {state.num_processes} process(es); {flagged} steps flagged at "
              f"threshold {threshold}; wrote {out}")
    state.wait_for_everyone()
    state.destroy_process_group()  # a gloo group left to interpreter exit can abort a process after its work is done
    return 0


if __name__ == "__main__":
    sys.exit(main())

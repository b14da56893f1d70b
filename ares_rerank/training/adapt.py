"""Adapt a trained entailment head to your own labelled chains, without forgetting what it knew.

    ares-rerank adapt default --chains_file mine.jsonl --output_dir runs/my-head
    ares-rerank adapt runs/other/head --chains_file mine.jsonl --output_dir runs/my-head --max_steps 300

From Python: ``adapt_head("default", "mine.jsonl", "runs/my-head")`` (keywords: the fields of
:class:`AdaptArguments`).

What it does: the head's LoRA rank, scale, premise selection, window and calibration come from the head
(``adapter_config.json`` and ``ares_calibration.json``); nothing has to be repeated. Your chains are split by chain into
train and held-out; their pairs are built with the head's own premise selection. Every step's batch mixes them with
**replay** pairs (``replay_share`` of the batch): pairs of the generated mix the head was trained on, rebuilt from the
mix recorded in its calibration file (never stored; the shipped head's ClaimTrees and recipe chains), from its training
split only, as many from each source of the mix (recipe graphs, fixed and random wordings), fitted to what the head
itself said about them before adapting (a distillation: it keeps what it knew, its confidence included). The loss
reads the head's calibrated log-odds, so the calibration stays valid and is not refitted unless asked
(``recalibrate``). After training, the weights are averaged with the head's own (``adapted_weight`` of the adapted
ones: WiSE-FT), which keeps more of what it did on wordings neither your chains nor the replay show. Replay guards
only the wordings of the head's mix, and adapting to one new wording cost a second unseen one 0.08 macro-F1 (issue
51), so two sets of chains in wordings drawn fresh for the run (:mod:`.guard`: half random, half composed, none of
the mix's) join it: ``guard_chains`` are replayed and distilled like the mix, ``check_chains`` are never trained on
and are the **forgetting check**: their ARES macro-F1 at 0.5 before and after is in the table, and when it falls by
more than ``forgetting_bound`` the averaging weight backs off (``adapted_weight`` x 0.7, 0.5, 0.35, 0.2, then the
head's own weights) until it holds; a note, the report and the card name the weight kept. The head is saved
to ``output_dir/head`` with a card that says what it was adapted on. Before and after, it measures your held-out
chains (pair accuracy, ARES macro-F1 at the threshold 0.5) and the held-out pairs of every split on the head's card
(accuracy, ECE), and prints the table.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

from ..chain import Chain
from ..utils.io import prepare_run_dir, write_atomic
from .mix import MixArguments, chain_source
from .pairs import build_pairs, split_chains


__all__ = ["AdaptArguments", "AdaptedHead", "adapt_head", "format_report", "head_settings", "main", "replay_parts",
           "resolve_head"]


@dataclass
class AdaptArguments:
    """What ``ares-rerank adapt`` takes; the defaults suit a few dozen chains on a CPU (60 steps of 16 pairs, half
    of them replayed)."""

    chains_file: str = field(default="", metadata={
        "help": "Your labelled chains (JSONL: {base_claims, steps, labels: 1 = unsound per step} or {prompt, "
                "completion, labels}); at least 5."})
    output_dir: str = field(default="", metadata={"help": "Where the adapted head (head/) and report.json go."})
    max_steps: int = field(default=60, metadata={"help": "Optimizer steps."})
    learning_rate: float = field(default=2e-4, metadata={"help": "Peak learning rate (linear warmup and decay)."})
    batch_size: int = field(default=16, metadata={"help": "Pairs per step, replay pairs included."})
    replay_share: float = field(default=0.5, metadata={
        "help": "Share of each batch drawn from the head's own training mix, rebuilt from its record (0 = none: the "
                "head forgets what your chains do not show)."})
    replay_target: str = field(default="head", metadata={
        "help": "What replay pairs are fitted to: 'head' (the head's own calibrated probabilities from before "
                "adapting: it keeps what it knew, confidence included) or 'labels' (their gold labels).",
        "choices": ["head", "labels"]})
    adapted_weight: float = field(default=0.7, metadata={
        "help": "Weight averaging after training (WiSE-FT): every trained weight becomes adapted_weight x its adapted "
                "value + (1 - adapted_weight) x the head's own. 1 = the weights as trained; lower keeps more of what "
                "the head did on wordings neither your chains nor the replay show, at some cost on yours."})
    replay_chains: int = field(default=100, metadata={
        "help": "Chains of the head's training split to replay from, drawn evenly from the sources of its mix (recipe "
                "graphs, fixed / composed / random wordings), with as many pairs replayed from each source."})
    replay_max_chars: int = field(default=0, metadata={
        "help": "Replay only pairs of at most this many characters (premises and step; 0 = no limit), applied after "
                "the even draw by source, so a source of long pairs replays fewer without cutting the others. A "
                "limit makes steps cheaper but leaves out the long pairs (the shipped head's recipe chains, up to "
                "512 tokens), and what is not replayed drifts: at 800 the held-out recipes lost 0.04 at the threshold "
                "0.5 (measured with the earlier draw by pairs)."})
    guard_chains: int = field(default=40, metadata={
        "help": "Chains in wordings drawn fresh for this run (half random, half composed; none of the head's mix) "
                "replayed beside the mix and fitted to what the head said about them before adapting, so that it "
                "keeps its behaviour on wordings neither your chains nor its mix show (0 = none)."})
    check_chains: int = field(default=48, metadata={
        "help": "Chains in other fresh wordings, never trained on, for the forgetting check: their ARES macro-F1 at "
                "0.5 before and after is in the table (0 = no check). 48: on 24 the check's own noise backed off a "
                "head that had not forgotten (issue 51's seed-0 sweep)."})
    forgetting_bound: float = field(default=0.02, metadata={
        "help": "The largest drop of the forgetting check's macro-F1 that holds; past it, adapt backs off (see "
                "--on_forgetting)."})
    on_forgetting: str = field(default="back_off", metadata={
        "help": "What a failed forgetting check does: 'back_off' (average closer to the head's own weights, "
                "adapted_weight x 0.7, 0.5, 0.35, 0.2, 0, until it holds; the report names the weight kept) or "
                "'warn' (keep the weights and say so).", "choices": ["back_off", "warn"]})
    recalibrate: bool = field(default=False, metadata={
        "help": "Refit the calibration (the head's method) on the val pairs of your chains and of the head's own "
                "mix. Off by default: training reads the head's own calibration, which then stays valid for what "
                "the head knew."})
    heldout_fraction: float = field(default=0.2, metadata={
        "help": "Share of your chains held out for the before / after check (never trained on)."})
    val_fraction: float = field(default=0.1, metadata={
        "help": "Share of your chains whose pairs, with the head's own val pairs, refit the calibration (with "
                "--recalibrate; otherwise they are trained on)."})
    seed: int = field(default=0, metadata={"help": "Seed of the splits, the replay draw and training."})
    torch_threads: int = field(default=0, metadata={"help": "torch intra-op threads (0 = torch's default)."})
    max_train_seconds: float = field(default=0.0, metadata={
        "help": "Stop training after this many seconds (0 = no limit); the head is calibrated and saved as it is."})
    data_dir: str | None = field(default=None, metadata={
        "help": "The folder holding recipe_graphs/, for replaying a head whose mix had recipe chains (the shipped "
                "head's): the 24 CaptainCook4D graphs of the ARES authors' release (github.com/fallcat/ares, "
                "data/recipe_graphs, MIT). Default: $ARES_DATA_DIR. Without them, a head that ships a replay pack "
                "(the shipped head: replay_pairs.jsonl.gz, 100 chains per source) replays from the pack."})
    revision: str | None = field(default=None, metadata={"help": "Revision of a hub head (branch, tag, commit)."})
    cache_dir: str | None = field(default=None, metadata={"help": "Hub cache folder for a hub head."})
    progress: bool = field(default=True, metadata={"help": "Show the training progress bar."})
    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Replace an adapted head an earlier run left in output_dir."})

    def __post_init__(self) -> None:
        if not self.chains_file:
            raise ValueError("chains_file is required: pass --chains_file mine.jsonl (labelled chains, one per line).")
        if not self.output_dir:
            raise ValueError("output_dir is required: pass --output_dir runs/my-head (the head goes to head/ there).")
        for name, low in (("max_steps", 1), ("batch_size", 1), ("replay_chains", 1), ("replay_max_chars", 0),
                          ("guard_chains", 0), ("check_chains", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name}={value!r} must be an integer >= {low}.")
        if not math.isfinite(self.learning_rate) or self.learning_rate <= 0:
            raise ValueError(f"learning_rate={self.learning_rate} must be a finite number > 0, e.g. 2e-4.")
        if not math.isfinite(self.forgetting_bound) or not 0.0 <= self.forgetting_bound < 1.0:
            raise ValueError(f"forgetting_bound={self.forgetting_bound} must lie in [0, 1), e.g. 0.02 (macro-F1).")
        if self.on_forgetting not in ("back_off", "warn"):
            raise ValueError(f"on_forgetting={self.on_forgetting!r} must be 'back_off' (average back toward the "
                             "head's own weights until the check holds) or 'warn'.")
        if self.replay_target not in ("head", "labels"):
            raise ValueError(f"replay_target={self.replay_target!r} must be 'head' (the head's own probabilities) or "
                             "'labels' (gold labels).")
        if not 0.0 < self.adapted_weight <= 1.0:
            raise ValueError(f"adapted_weight={self.adapted_weight} must lie in (0, 1]: 1 keeps the weights as "
                             "trained, 0.7 moves them 30% of the way back to the head's own.")
        if not 0.0 <= self.replay_share < 1.0:
            raise ValueError(f"replay_share={self.replay_share} must lie in [0, 1): 0.5 replays half of each batch, "
                             "0 none.")
        for name in ("heldout_fraction", "val_fraction"):
            if not 0.0 < getattr(self, name) < 0.5:
                raise ValueError(f"{name}={getattr(self, name)} must lie in (0, 0.5), e.g. 0.2.")
        if not math.isfinite(self.max_train_seconds) or self.max_train_seconds < 0:
            raise ValueError(f"max_train_seconds={self.max_train_seconds} must be a finite number >= 0 (0 = none).")
        if self.torch_threads < 0:
            raise ValueError(f"torch_threads={self.torch_threads} must be >= 0 (0 = torch's default).")


@dataclass
class AdaptedHead:
    """What :func:`adapt_head` returns: the saved head's folder, its calibration record and the before / after
    report (also in ``output_dir/report.json``)."""

    folder: Path
    calibration: dict[str, Any]
    report: dict[str, Any]


def resolve_head(head: str, revision: str | None = None, cache_dir: str | None = None) -> Path:
    """The local folder of ``head``: ``"default"`` (the shipped head), a head folder, or a hub id (its snapshot)."""
    from ..backbones.loading import DEFAULT_HEAD_DIR

    if head == "default":
        return DEFAULT_HEAD_DIR
    if Path(head).is_dir():
        return Path(head)
    if Path(head).exists() or head.count("/") != 1:
        raise ValueError(f"HEAD={head!r} is neither 'default', a head folder nor a hub id (owner/name): pass the "
                         "folder `ares-rerank train head` wrote (<output_dir>/head) or a hub id.")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(head, revision=revision, cache_dir=cache_dir))
    except Exception as err:  # noqa: BLE001 -- offline, unknown repo, gated: all say the same to the user
        raise ValueError(f"HEAD={head!r} is no local folder and did not download as a hub id ({type(err).__name__}: "
                         f"{' '.join(str(err).split())[:200]}): check the id, or go online once "
                         "(HF_HUB_OFFLINE=1 reads only the local cache).") from err


def head_settings(folder: Path, head: str) -> dict[str, Any]:
    """What adapting ``folder`` keeps from the head: rank, scale, dropout, base, premise selection, window, the
    calibration method and the record itself."""
    from ..backbones.hub import read_adapter_config
    from ..calibration import read_calibration

    if not (folder / "adapter_config.json").is_file():
        raise ValueError(f"HEAD={head!r} is a full model, not a LoRA adapter head: adapt continues an adapter. Train "
                         "it on your chains with `ares-rerank train head --base_model <it>` instead.")
    adapter = read_adapter_config(folder / "adapter_config.json")
    record = read_calibration(folder)
    method = (record.get("val") or {}).get("method") or ("platt" if record.get("bias") else "temperature")
    return {"lora_r": int(adapter.get("r", 8)), "lora_alpha": int(adapter.get("lora_alpha", 16)),
            "base_model": adapter.get("base_model_name_or_path") or record.get("base_model"),
            "premise_selection": record.get("premise_selection") or "all",
            "max_length": int(record.get("max_length") or 512), "calibration_method": method,
            "temperature": float(record.get("temperature", 1.0)), "bias": float(record.get("bias", 0.0)),
            "record": record}


def replay_mix(record: dict[str, Any]) -> MixArguments | None:
    """The generated mix the head was trained on (an adapted head keeps its original's), else ``None``."""
    training = record.get("training") if isinstance(record.get("training"), dict) else {}
    mix = training.get("replay_mix") or training.get("mix")
    if not isinstance(mix, dict) or mix.get("chains_file"):
        return None
    known = {f.name for f in fields(MixArguments)}
    return MixArguments(**{k: v for k, v in mix.items() if k in known})


def _user_splits(args: AdaptArguments) -> dict[str, list[Chain]]:
    from ..chain import read_chains

    chains = read_chains(args.chains_file)
    unlabelled = [c.id for c in chains if c.labels is None]
    if unlabelled or len(chains) < 5:
        raise ValueError(f"chains_file={args.chains_file!r}: needs at least 5 chains (train, val, held-out), each with "
                         f"'labels' (one per step, 1 = unsound); {len(chains)} chains, unlabelled: {unlabelled[:5]}.")
    fractions = {"val": args.val_fraction} if args.recalibrate else {}
    parts = split_chains(chains, {**fractions, "heldout": args.heldout_fraction}, seed=args.seed)
    return {"train": parts["train"], "val": parts.get("val", []), "heldout": parts["heldout"]}


def _user_oracle(chain: Chain) -> Any:
    """A ClaimTrees chain of a known wording gets its rule oracle; any other chain its gold labels only."""
    from .head import claimtrees_oracle_for

    try:
        return claimtrees_oracle_for(chain)
    except ValueError:  # meta names a wording of its own: gold labels only
        return None


def replay_parts(mix: MixArguments | None, args: AdaptArguments, folder: Path | None = None) -> dict[str, Any]:
    """Pairs of the head's own mix: ``train`` (from ``replay_chains`` chains of its training split, drawn evenly
    from each source of the mix, and as many pairs kept from each source), and its ``test`` split (and ``val``, with
    ``recalibrate``) as the card reports them; ``chains``: the replayed chains' ids; ``sources``: replayed pairs per
    source; ``pack``: whether they came from the head's replay pack (all empty without a recorded mix or with
    ``replay_share=0``).

    The mix is rebuilt from ``args.data_dir`` when its recipe graphs are there. Without them, a head ``folder`` that
    ships a replay pack of this mix (:mod:`~ares_rerank.training.replay_pack`, the shipped head's) gives the same
    pairs for a pool of 100 chains per source, and the chains are drawn from that pool instead of the whole split.

    Sources are even because what a head knows is not spread like its pairs: a recipe chain yields about six times
    the pairs of a ClaimTrees chain, so a draw by pairs replayed the shipped head's recipes 88% of the time and its
    ClaimTrees wordings 12% (and a second unseen wording lost up to 0.21 ARES macro-F1 at the threshold 0.5)."""
    from .head import claimtrees_oracle_for, split_mix
    from .replay_pack import read_replay_pack

    if mix is None or args.replay_share == 0:
        return {"train": [], "val": [], "test": [], "chains": [], "sources": {}, "pack": False}
    pack = None
    try:
        parts = split_mix(mix, args.data_dir)
    except FileNotFoundError:  # no recipe graphs here: the head's own pack, if it ships one for this mix
        pack = read_replay_pack(folder, mix) if folder is not None else None
        if pack is None:
            raise
        parts = {"train": [], "val": [], "test": []}
    rng = random.Random(args.seed)
    by_source: dict[str, list[Any]] = {}
    for chain in parts["train"]:
        by_source.setdefault(chain_source(chain), []).append(chain)
    if pack is not None:
        by_source = {source: list(ids) for source, ids in pack.pool.items()}
        largest = max(len(ids) for ids in by_source.values()) * len(by_source)
        if args.replay_chains > largest:
            raise FileNotFoundError(f"replay_chains={args.replay_chains} is more than the head's replay pack holds "
                                    f"({largest} chains) and the recipe graphs to rebuild its mix are not here.")
    quota = {source: args.replay_chains // len(by_source) + (i < args.replay_chains % len(by_source))
             for i, source in enumerate(sorted(by_source))}
    parts["train"] = [c for source in sorted(by_source)
                      for c in rng.sample(by_source[source], min(quota[source], len(by_source[source])))]
    if pack is not None:
        chain_ids = list(parts["train"])
        pairs = {"train": pack.train_pairs(chain_ids), "val": [dict(r) for r in pack.splits["val"]],
                 "test": [dict(r) for r in pack.splits["test"]]}
    else:
        chain_ids = [c.id for c in parts["train"]]
        if not args.recalibrate:
            parts["val"] = []
        pairs = {name: build_pairs(part, mix.premise_selection, claimtrees_oracle_for, mix.subsets_per_step,
                                   mix.mix_seed, mix.minimal_pairs, data_dir=args.data_dir)
                 for name, part in parts.items()}
    if not args.recalibrate:  # the val split only refits the calibration
        pairs["val"] = []
    source_of = {(c if pack is not None else c.id): source for source, chains in by_source.items() for c in chains}
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in pairs["train"]:
        rows.setdefault(source_of[row["chain_id"]], []).append(row)
    keep = min((len(r) for r in rows.values()), default=0)
    chosen = {source: rng.sample(rows[source], keep) for source in sorted(rows)}
    if args.replay_max_chars:  # after the balance: a source of long pairs gives fewer, and takes none from the others
        limit = args.replay_max_chars
        chosen = {source: [r for r in picked if len("\n".join(r["premises"])) + len(r["hypothesis"]) <= limit]
                  for source, picked in chosen.items()}
    pairs["train"] = [row for picked in chosen.values() for row in picked]
    return {**pairs, "chains": chain_ids, "sources": {source: len(picked) for source, picked in chosen.items()},
            "pack": pack is not None}


def _carry_pack(folder: Path, target: Path, mix: MixArguments | None) -> None:
    """Copy the head's replay pack to the adapted head, which replays the same mix when it is adapted again."""
    from ..utils.io import atomic_open
    from .replay_pack import PACK_NAME, read_replay_pack

    if mix is None or read_replay_pack(folder, mix) is None:
        return
    with atomic_open(target / PACK_NAME, "wb") as handle:
        handle.write((folder / PACK_NAME).read_bytes())


def _guard(mix: MixArguments | None, settings: dict[str, Any], args: AdaptArguments,
           replay: dict[str, Any]) -> tuple[list[Chain], int]:
    """Add the guard pairs (:mod:`.guard`: chains in wordings drawn for this run) to ``replay`` as sources of their
    own, as many pairs from each as from each source of the mix; return the forgetting check's chains and how many
    guard chains were drawn. The wordings of the replayed chains are left out of both (a random wording of the mix
    could recur only by a 1-in-2^31 draw)."""
    from .guard import fresh_wording_chains, guard_pairs

    used = sorted({cid.split("-")[2] for cid in replay["chains"] if cid.startswith("mix-") and cid.count("-") >= 3})
    check = fresh_wording_chains(mix, args.check_chains, args.seed, "check", used)
    if args.replay_share == 0 or not args.guard_chains:
        return check, 0
    chains = fresh_wording_chains(mix, args.guard_chains, args.seed, "guard", used)
    selection = mix.premise_selection if mix is not None else settings["premise_selection"]
    per_source = max(replay["sources"].values()) if replay["sources"] else None
    for source, picked in guard_pairs(chains, mix, selection, args.seed, per_source).items():
        replay["train"] += picked
        replay["sources"][source] = len(picked)
    return check, len(chains)


def adapt_head(head: str | Path = "default", chains_file: str | Path | None = None,
               output_dir: str | Path | None = None, **kwargs: Any) -> AdaptedHead:
    """Continue ``head`` on the labelled chains of ``chains_file`` and save it to ``output_dir/head``.

    Args:
        head: ``"default"`` (the shipped head), a head folder, or a hub id of a LoRA head.
        chains_file: Your labelled chains (JSONL).
        output_dir: Where ``head/`` (the adapted head, with its card) and ``report.json`` go.
        **kwargs: Other fields of :class:`AdaptArguments` (``max_steps``, ``replay_share``, ...).

    Returns:
        An :class:`AdaptedHead`; the report is also printed as a table.
    """
    args = AdaptArguments(chains_file=str(chains_file or ""), output_dir=str(output_dir or ""), **kwargs)
    return run_adaptation(str(head), args)


def run_adaptation(head: str, args: AdaptArguments) -> AdaptedHead:
    """:func:`adapt_head` on parsed arguments (what the command calls)."""
    from .adapt_steps import forgetting_note, train_and_measure

    start, cpu = time.time(), time.process_time()
    folder = resolve_head(head, args.revision, args.cache_dir)
    settings = head_settings(folder, head)
    user = _user_splits(args)  # before the run folder: bad input leaves nothing behind
    labels = {y for part in user.values() for chain in part for y in chain.labels}
    if len(labels) < 2:
        print(f"note: every step of chains_file={str(args.chains_file)!r} is labelled "
              f"{'unsound (1)' if labels == {1} else 'sound (0)'}: the head learns nothing about telling them apart "
              "from your chains, and your held-out ARES macro-F1 counts a class with no example as 0.",
              file=sys.stderr, flush=True)
    mix = replay_mix(settings["record"])
    try:
        replay = replay_parts(mix, args, folder)
    except FileNotFoundError as err:  # the recipe graphs a recipe-trained head's replay is rebuilt from
        raise ValueError(
            f"{head!r} was trained on recipe chains, and adapting replays them so that the head keeps them: {err} "
            "The graphs are the ARES authors' release (github.com/fallcat/ares, data/recipe_graphs, MIT); pass "
            "--data_dir to the folder that holds recipe_graphs/. Or --replay_share 0 to replay nothing (the head "
            "then forgets what your chains do not show).") from err
    prepare_run_dir(args.output_dir, result="head", overwrite=args.overwrite_output_dir)
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    selection = settings["premise_selection"]
    pairs = {name: build_pairs(part, selection, _user_oracle, seed=args.seed) for name, part in user.items()}
    if replay["pack"]:
        from .replay_pack import SOURCE_NOTE

        print(f"note: no recipe graphs here (--data_dir / $ARES_DATA_DIR), so the replay comes from the replay pack "
              f"of {head!r}: {len(replay['chains'])} chains drawn from its pool of 100 per source ({SOURCE_NOTE}).",
              file=sys.stderr, flush=True)
    if mix is None and args.replay_share:
        print(f"note: {head!r} records no generated training mix, so none of its training pairs are replayed (only "
              "the fresh-wording guard, --guard_chains, is).", file=sys.stderr, flush=True)
    check, guarded = _guard(mix, settings, args, replay)  # before the summary: its replay_pairs count the guard's
    print(json.dumps({"head": head, "chains": {k: len(v) for k, v in user.items()},
                      "pairs": {k: len(v) for k, v in pairs.items()}, "replay_pairs": len(replay["train"]),
                      "lora_r": settings["lora_r"], "premise_selection": selection,
                      "max_length": settings["max_length"], "calibration": settings["calibration_method"]}),
          flush=True)
    rows = {"train": pairs["train"], "replay": replay["train"], "val": pairs["val"] + replay["val"],
            "heldout": pairs["heldout"], "head_test": replay["test"]}
    adapted = train_and_measure(folder, settings, args, rows, user["heldout"], check)
    note = forgetting_note(adapted["report"]["forgetting_check"]) if "forgetting_check" in adapted["report"] else None
    if note:
        print(note, file=sys.stderr, flush=True)
    adaptation = {"head": head, "chains_file": str(args.chains_file), "chains": {k: len(v) for k, v in user.items()},
                  "pairs": {k: len(v) for k, v in pairs.items()}, "replay": {
                      "share": args.replay_share if replay["train"] else 0.0, "pairs": len(replay["train"]),
                      "chains": len(replay["chains"]), "sources": replay["sources"],
                      "mix": asdict(mix) if mix else None, "guard_chains": guarded, "from_pack": replay["pack"]},
                  "arguments": {k: v for k, v in asdict(args).items()
                                if k not in ("chains_file", "output_dir", "data_dir", "cache_dir")},  # no local folders
                  "forgetting_check": adapted["report"].get("forgetting_check"),
                  "report": adapted["report"], "wall_seconds": round(time.time() - start, 1),
                  "cpu_seconds": round(time.process_time() - cpu, 1)}
    from .adapt_steps import save_adapted

    calibration = save_adapted(adapted, settings, args, adaptation, mix)
    _carry_pack(folder, Path(args.output_dir) / "head", mix)
    report = {**adapted["report"], "wall_seconds": adaptation["wall_seconds"],
              "cpu_seconds": adaptation["cpu_seconds"]}
    write_atomic(Path(args.output_dir) / "report.json", json.dumps(report, indent=2) + "\n")
    print(format_report(report), flush=True)
    return AdaptedHead(Path(args.output_dir) / "head", calibration, report)


def format_report(report: dict[str, Any]) -> str:
    """The before / after table of a report (one row per measured set)."""
    lines = ["| set | measure | before | after |", "| --- | --- | --- | --- |"]
    for name, entry in report["sets"].items():
        for key in entry["before"]:
            before, after = entry["before"][key], entry["after"][key]
            lines.append(f"| {name} ({entry['size']}) | {key} | {before:.3f} | {after:.3f} |")
    return "\n".join(lines) + f"\n\nwall {report['wall_seconds']:.0f} s, CPU {report['cpu_seconds']:.0f} s"


def parse_args(argv: Sequence[str]) -> tuple[str, AdaptArguments]:
    """``HEAD --field value ...`` -> the head and :class:`AdaptArguments` (``HfArgumentParser``)."""
    from transformers import HfArgumentParser

    argv = list(argv)
    if not argv or argv[0].startswith("-"):
        raise ValueError("adapt needs the head first: ares-rerank adapt HEAD --chains_file mine.jsonl --output_dir "
                         "runs/my-head (HEAD: default, a head folder or a hub id).")
    (args,) = HfArgumentParser(AdaptArguments, prog=f"ares-rerank adapt {argv[0]}").parse_args_into_dataclasses(
        args=argv[1:])
    return argv[0], args


def main(argv: Sequence[str] | None = None) -> int:
    head, args = parse_args(sys.argv[1:] if argv is None else argv)
    run_adaptation(head, args)
    return 0

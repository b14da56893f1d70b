"""Rebuild the shipped head's replay pack (``ares_rerank/default_head/replay_pairs.jsonl.gz``).

    python -m training.build_replay_pack --data_dir ../shared/data

It needs the recipe graphs (``--data_dir``: the folder holding ``recipe_graphs/``, default ``$ARES_DATA_DIR``) and
reads the mix recorded in the head's ``ares_calibration.json``; see :mod:`ares_rerank.training.replay_pack`.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from ares_rerank.backbones.loading import DEFAULT_HEAD_DIR
from ares_rerank.training.adapt import head_settings, replay_mix
from ares_rerank.training.replay_pack import build_replay_pack


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", default=None, help="The folder holding recipe_graphs/ (default $ARES_DATA_DIR).")
    parser.add_argument("--pool_per_source", type=int, default=100, help="Training chains kept per source.")
    args = parser.parse_args(argv)
    mix = replay_mix(head_settings(DEFAULT_HEAD_DIR, "default")["record"])
    path = build_replay_pack(DEFAULT_HEAD_DIR, mix, args.data_dir, args.pool_per_source)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

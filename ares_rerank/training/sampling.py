"""Length-bucketed training batches in random order, stratified by label: less padding, no length schedule.

On a CPU the cost of a step is the padded batch (16 x its longest pair). Pairs range from 16 to ~190 tokens, so a
random batch of 16 is padded to ~127 tokens for a mean of ~70: almost half the work is padding.

Pair length is correlated with the label here (longer premise sets are more often entailed: 21% entailed among the
shortest fifth of pairs, 61% among the longest), so grouping by raw length also groups by label, and both ways we
tried failed: transformers' ``LengthGroupedSampler`` (``train_sampling_strategy="group_by_length"``) walks each
mega-batch from its longest batch to its shortest, a label schedule with which a LoRA head's loss oscillated with the
mega-batch period and collapsed to the majority class (val accuracy stuck at 0.65 for 750 steps); length-sorted
buckets with shuffled batches avoid the schedule but still give batches of 20-60% positives, and the head learned
much more slowly (val loss 0.66 at step 400 against 0.28 with random batches). :class:`LengthBucketSampler` with
``labels`` sorts each random bucket by the length quantile *within each label*: every batch holds the bucket's label
mix and pairs of similar length rank, and the batches are shuffled. That still learned worse per step than random
batches (the default head's two stages in 34 minutes, but held-out pair accuracy 0.831 against 0.922 for the v1
head): batches stay homogeneous in pair kind and wording. So the training recipe does not use it by default
(``bucket_batches: 0``); it keeps random batches and drops their padding with ``length_chunks`` instead
(``chunked_loss`` in train_head.py). The measurements are in training/README.md ("Training time").
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler

from ..utils.checks import check_positive_int


__all__ = ["LengthBucketSampler", "padding_ratio"]


class LengthBucketSampler(Sampler[int]):
    """Indices such that consecutive groups of ``batch_size`` have similar lengths, in random batch order.

    Each pass: shuffle all indices; cut them into buckets of ``bucket_batches * batch_size``; sort each bucket by length
    (with ``labels``: by the length quantile within each label) and cut it into batches; shuffle the batches (the
    single short batch, if the size does not divide, goes last so that every other batch stays aligned with the
    ``DataLoader``'s ``batch_size``). Every index appears exactly once
    per pass; each pass draws a new order from ``seed`` and the pass number.

    Args:
        lengths: Token length of every example.
        batch_size: The ``DataLoader``'s batch size (the batches this sampler lays out).
        bucket_batches: Batches per sorted bucket; larger buckets pad less and skew batch composition more.
        seed: Seed of the shuffles.
        labels: Optional class of every example; batches then keep the bucket's label mix.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, bucket_batches: int = 16, seed: int = 0,
                 labels: Sequence[int] | None = None) -> None:
        check_positive_int(batch_size, "LengthBucketSampler(batch_size")
        check_positive_int(bucket_batches, "LengthBucketSampler(bucket_batches", 16)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1 or len(self.lengths) == 0:
            raise ValueError("LengthBucketSampler(lengths=...) must be a non-empty list of token counts.")
        self.labels = None if labels is None else np.asarray(labels)
        if self.labels is not None and self.labels.shape != self.lengths.shape:
            raise ValueError(f"LengthBucketSampler got {len(self.labels)} labels for {len(self.lengths)} lengths: "
                             "pass one label per example (or labels=None).")
        self.batch_size, self.bucket_batches, self.seed = batch_size, bucket_batches, seed
        self.passes = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def batches(self, rng: np.random.Generator) -> list[np.ndarray]:
        """One pass laid out as batches (the short one, if any, last)."""
        order = rng.permutation(len(self.lengths))
        bucket = self.batch_size * self.bucket_batches
        batches = []
        for start in range(0, len(order), bucket):
            chunk = order[start:start + bucket]
            chunk = chunk[np.argsort(self._sort_keys(chunk), kind="stable")]
            batches += [chunk[i:i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        short = [b for b in batches if len(b) < self.batch_size]
        full = [b for b in batches if len(b) == self.batch_size]
        return [full[i] for i in rng.permutation(len(full))] + short

    def _sort_keys(self, chunk: np.ndarray) -> np.ndarray:
        """Length, or with labels the length quantile within the example's label (so labels interleave evenly)."""
        lengths = self.lengths[chunk]
        if self.labels is None:
            return lengths.astype(float)
        keys = np.empty(len(chunk))
        for label in np.unique(self.labels[chunk]):
            where = np.flatnonzero(self.labels[chunk] == label)
            ranks = np.empty(len(where))
            ranks[np.argsort(lengths[where], kind="stable")] = np.arange(len(where))
            keys[where] = (ranks + 0.5) / len(where)
        return keys

    def __iter__(self) -> Iterator[int]:
        rng = np.random.default_rng([self.seed, self.passes])
        self.passes += 1
        for batch in self.batches(rng):
            yield from batch.tolist()


def padding_ratio(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Padded tokens / real tokens of a batch layout (1.0 = no padding)."""
    lengths = np.asarray(lengths)
    padded = sum(len(b) * lengths[np.asarray(b)].max() for b in batches)
    return float(padded / lengths[np.concatenate([np.asarray(b) for b in batches])].sum())

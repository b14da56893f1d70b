"""The search's settings as a dataclass, the one home of their names, defaults and help: ``ares-rerank search``
generates its search flags from the fields (``beam_width`` -> ``--beam-width``, as ``HfArgumentParser`` does for
TRL's configs; :func:`~ares_rerank.commands.options.add_dataclass_arguments`), and a Python user runs the same search
with :meth:`SearchConfig.search`.

Example:
    >>> from ares_rerank import AresReranker, ClaimTreesOracle
    >>> from ares_rerank.search import step_generator
    >>> policy = lambda prompt, steps, rng: None if steps else "I have A, I use rule (A -> B) to derive B, now I have B"
    >>> config = SearchConfig(approach="dvts", n=2, beam_width=2)
    >>> reranker = AresReranker(ClaimTreesOracle(), prompt_split="lines")
    >>> prompt = "Rule: A -> B (meaning that if I have A, I can derive B)\\nI have A"
    >>> config.search(step_generator(policy), [prompt], reranker)[0].method
    'dvts'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..utils.checks import check_positive_int, is_int
from .beams import beam_search, dvts
from .common import SearchResult
from .generators import StepGenerator
from .rejection import REJECTIONS, stepwise_best_of_n


__all__ = ["APPROACHES", "SearchConfig"]

#: ``approach`` choices, as search-and-learn names its approaches.
APPROACHES = ("best-of-n", "beam-search", "dvts")
#: The approaches that keep the best partial solutions by score (and take a lookahead).
_BEAMS = ("beam-search", "dvts")


@dataclass
class SearchConfig:
    """Which search runs and how wide and deep it goes (``ares-rerank search``'s search flags).

    Errors name the flag (``--n``, ``--beam-width``), which is the field's name with dashes.
    """

    approach: str = field(default="beam-search", metadata={
        "choices": list(APPROACHES),
        "help": "best-of-n: n candidates written to their end (stopped early with --rejection); beam-search: "
                "search-and-learn's beam search; dvts: its diverse verifier tree search."})
    n: int = field(default=8, metadata={
        "help": "Candidates per problem (beam: partial solutions per iteration)."})
    beam_width: int = field(default=4, metadata={
        "help": "beam / dvts: expansions per kept beam (m); n // m beams or subtrees."})
    num_iterations: int = field(default=40, metadata={
        "help": "Steps per candidate at most (beam / dvts: iterations); a candidate still running then is returned "
                "cut."})
    lookahead: int = field(default=0, metadata={
        "help": "beam / dvts: greedy rollout steps before a candidate is scored."})
    filter_duplicates: bool = field(default=False, metadata={
        "help": "beam: drop beams whose steps repeat another's before keeping the best."})
    sort_completed: bool = field(default=False, metadata={
        "help": "beam: return the n best completed candidates, not the first n to complete."})
    rejection: str | None = field(default=None, metadata={
        "choices": list(REJECTIONS),
        "help": "best-of-n: 'hard' stops a candidate at its first step with tau <= --threshold; 'soft' too, but "
                "keeps the --keep best of each problem; 'none' (the default) writes all to the end."})
    keep: int = field(default=1, metadata={"help": "--rejection soft: candidates each problem keeps."})
    generation_seed: int = field(default=0, metadata={
        "help": "Seeds MODEL's sampling; batch k of problems takes this plus the index of its first problem "
                "(--seed seeds ARES's trajectory sampler)."})

    def __post_init__(self) -> None:
        if self.approach not in APPROACHES:
            raise ValueError(f"--approach {self.approach!r} is not one of {list(APPROACHES)}.")
        if self.rejection not in (None, *REJECTIONS):
            raise ValueError(f"--rejection {self.rejection!r} is not one of {list(REJECTIONS)}.")
        for name in ("n", "beam_width", "num_iterations", "keep"):
            check_positive_int(getattr(self, name), f"--{name.replace('_', '-')}")
        if not is_int(self.lookahead) or self.lookahead < 0:
            raise ValueError(f"--lookahead={self.lookahead} must be 0 (no rollout) or more.")
        if not is_int(self.generation_seed) or self.generation_seed < 0:
            raise ValueError(f"--generation-seed={self.generation_seed} must be 0 or more.")
        beam = self.approach in _BEAMS
        if self.rejection not in (None, "none") and beam:
            raise ValueError(f"--rejection {self.rejection} applies to --approach best-of-n; beam search and DVTS "
                             "keep the best candidates by score instead: drop --rejection, or use --approach "
                             "best-of-n.")
        if self.keep != 1 and self.rejection != "soft":
            raise ValueError(f"--keep={self.keep} applies to --rejection soft: add it, or drop --keep.")
        for flag, given, only in (("--lookahead", self.lookahead, _BEAMS),
                                  ("--filter-duplicates", self.filter_duplicates, ("beam-search",)),
                                  ("--sort-completed", self.sort_completed, ("beam-search",))):
            if given and self.approach not in only:
                raise ValueError(f"{flag} applies to --approach {' or '.join(only)}, not {self.approach}: drop it.")
        if beam and self.beam_width > self.n:
            raise ValueError(f"--beam-width={self.beam_width} must be at most --n={self.n} (n // beam-width beams "
                             "are kept): lower --beam-width or raise --n.")
        if self.approach == "dvts" and self.n % self.beam_width:
            raise ValueError(f"--approach dvts: --n={self.n} must be a multiple of --beam-width={self.beam_width} "
                             f"(n // m subtrees of m expansions), e.g. --n "
                             f"{self.n - self.n % self.beam_width or self.beam_width}.")

    @property
    def horizon(self) -> int:
        """The most steps a candidate's chain reaches: ``num_iterations``, plus the lookahead's rollout for beam
        search and DVTS (what ARES's ``max_steps`` and the model's window must hold)."""
        return self.num_iterations + (self.lookahead if self.approach in _BEAMS else 0)

    def check_max_steps(self, max_steps: int | None) -> None:
        """A ValueError naming the flags when :attr:`horizon` exceeds ARES's ``max_steps`` (``AresConfig``)."""
        if max_steps is not None and self.horizon > max_steps:
            beam = self.approach in _BEAMS
            raise ValueError(f"--num-iterations={self.num_iterations}"
                             f"{f' + --lookahead={self.lookahead}' if beam else ''} = {self.horizon} steps exceeds "
                             f"--max-steps={max_steps} (the most steps ARES scores in a chain): lower them, or raise "
                             "--max-steps.")

    def search(self, generator: StepGenerator, prompts: Sequence[Any], reranker: Any,
               seed: int | None = None) -> list[SearchResult]:
        """Run :attr:`approach` with these settings: :func:`~ares_rerank.search.stepwise_best_of_n`,
        :func:`~ares_rerank.search.beam_search` or :func:`~ares_rerank.search.dvts`.

        Args:
            generator: A :class:`~ares_rerank.search.generators.StepGenerator`.
            prompts: Strings or conversations.
            reranker: An :class:`~ares_rerank.rerank.AresReranker` (backbone, ARES settings, aggregate, selection).
            seed: Seeds the generator (default: :attr:`generation_seed`; the CLI passes it plus the index of each
                batch's first problem).

        Returns:
            One :class:`~ares_rerank.search.common.SearchResult` per prompt.
        """
        seed = self.generation_seed if seed is None else seed
        common = {"num_iterations": self.num_iterations, "seed": seed}
        if self.approach == "best-of-n":
            return stepwise_best_of_n(generator, prompts, reranker, self.n, rejection=self.rejection or "none",
                                      keep=self.keep, **common)
        if self.approach == "dvts":
            return dvts(generator, prompts, reranker, self.n, beam_width=self.beam_width, lookahead=self.lookahead,
                        **common)
        return beam_search(generator, prompts, reranker, self.n, beam_width=self.beam_width,
                           lookahead=self.lookahead, filter_duplicates=self.filter_duplicates,
                           sort_completed=self.sort_completed, **common)

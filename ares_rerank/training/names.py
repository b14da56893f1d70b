"""State names for the training mix: styles of names a chain's states get, and renaming a generated chain.

ClaimTrees chains come out of the generator with the paper's 2-character names; the mix renames each chain's states
in one style (:data:`NAME_STYLES`) so that a head learns entailment, not a spelling. Three-character names are never
drawn: they are a held-out generalization set.
"""

from __future__ import annotations

import random
import re
import string
from typing import Sequence

from ..chain import Chain


__all__ = ["CODE_WIDTHS", "MULTI_WORD_PATTERN", "NAME_STYLES", "NAME_WORDS", "name_capacity", "random_names",
           "rename_states"]

NAME_STYLES = ("letter", "pair", "quad", "code", "word", "lower", "multi")
# Code names of these widths; 3 characters is held out.
CODE_WIDTHS = (2, 4, 5, 6, 7, 8, 10, 12)
# A name of two or three capitalized words ("Silver Harbor"): the oracle's name pattern for chains with such names.
MULTI_WORD_PATTERN = r"[A-Za-z0-9_]+(?: [A-Z][A-Za-z0-9_]*)*"
# Capitalized nouns of 4-7 letters that appear in no template and are not stop words of premise selection.
NAME_WORDS = tuple(
    "Apple Amber Anchor Arrow Badge Basket Beacon Berry Blade Bottle Branch Brick Bridge Bucket Button Cable Camel "
    "Candle Canvas Carpet Castle Cedar Chain Chalk Cherry Chest Cloud Clover Coffee Comet Copper Coral Cotton Crane "
    "Crown Crystal Dagger Daisy Desert Dragon Eagle Ember Falcon Feather Fiber Flame Forest Fossil Garden Ginger "
    "Glove Granite Harbor Hammer Helmet Honey Island Ivory Jacket Jasmine Jewel Kettle Ladder Lantern Lemon Lilac "
    "Magnet Mango Marble Meadow Mirror Nickel Noodle Oasis Olive Orchid Paddle Parrot Pebble Pepper Pillow Planet "
    "Pocket Quartz Rabbit Raven Ribbon River Rocket Saddle Salmon Shadow Silver Spider Spruce Stone Sugar Summit "
    "Tablet Tiger Timber Tulip Turtle Velvet Violet Walnut Willow Window Winter Wizard Yacht Zebra Zephyr".split()
)
# First words of multi-word names (never a noun of NAME_WORDS, so two names never share a word).
_ADJECTIVES = tuple(
    "Red Blue Green Black White Golden Hidden Silent Northern Southern Eastern Western Little Great Ancient Frozen "
    "Bright Quiet Wild Lucky Rusty Sunny Misty Sleepy Brave Gentle Hollow Lonely Royal Secret".split()
)
_LETTERS = tuple(c for c in string.ascii_uppercase if c not in "AI")  # "A" and "I" read as English words
_CHARS = string.ascii_uppercase + string.digits


def name_capacity(style: str) -> int:
    """How many distinct names ``style`` has (codes: practically unbounded, 10,000)."""
    capacity = {"letter": len(_LETTERS), "word": len(NAME_WORDS), "lower": len(NAME_WORDS), "multi": len(_ADJECTIVES)}
    return capacity.get(style, 10_000)


def _code(width: int, rng: random.Random) -> str:
    return rng.choice(string.ascii_uppercase) + "".join(rng.choice(_CHARS) for _ in range(width - 1))


def _multi_word(rng: random.Random) -> str:
    return f"{rng.choice(_ADJECTIVES)} {' '.join(rng.sample(NAME_WORDS, rng.choice((1, 1, 2))))}"


def random_names(count: int, style: str, rng: random.Random) -> list[str]:
    """``count`` distinct state names of one style that share no word (never 3 characters long: held out).

    Styles: ``letter`` (one letter), ``pair`` / ``quad`` (2 / 4 characters), ``code`` (4-12 characters, one width per
    chain), ``word`` (a capitalized noun), ``lower`` (a lower-case noun) and ``multi`` (two or three capitalized
    words). One style per chain: premise selection reads symbols (codes, letters) or words, not both in one step.
    """
    if style not in NAME_STYLES:
        raise ValueError(f"style={style!r} is not a name style: use one of {NAME_STYLES}.")
    if count > name_capacity(style):
        raise ValueError(f"style={style!r} has only {name_capacity(style)} names, {count} requested: use a longer "
                         "style.")
    if style in ("letter", "word", "lower"):
        names = rng.sample(_LETTERS if style == "letter" else NAME_WORDS, count)
        return [n.lower() for n in names] if style == "lower" else names
    width = {"pair": 2, "quad": 4}.get(style) or rng.choice(CODE_WIDTHS[1:])
    out: list[str] = []
    used: set[str] = set()
    while len(out) < count:
        name = _multi_word(rng) if style == "multi" else _code(width, rng)
        words = set(name.lower().split())
        if not words & used:
            out.append(name)
            used |= words
    return out


def rename_states(chain: Chain, names: Sequence[str], suffix: str = "") -> Chain:
    """The same chain with its state names replaced (``chain.meta["names"][i]`` -> ``names[i]``).

    Names are replaced as whole tokens (not inside longer alphanumeric words), so template words are untouched.
    Labels, shape and metadata are kept; the id gets ``suffix``.
    """
    old = list(chain.meta["names"])
    if len(names) != len(old) or len(set(names)) != len(names):
        raise ValueError(
            f"rename_states needs {len(old)} distinct names, got {len(names)} ({len(set(names))} distinct)."
        )
    mapping = dict(zip(old, names))
    alternatives = "|".join(map(re.escape, sorted(old, key=len, reverse=True)))
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + alternatives + r")(?![A-Za-z0-9_])")

    def swap(text: str) -> str:
        return pattern.sub(lambda m: mapping[m.group(1)], text)

    meta = dict(chain.meta)
    meta["names"] = list(names)
    for key in ("states",):
        meta[key] = [mapping[s] for s in meta[key]]
    meta["rules"] = [(mapping[p], mapping[q]) for p, q in meta["rules"]]
    return Chain([swap(c) for c in chain.base_claims], [swap(s) for s in chain.steps], labels=chain.labels,
                 id=(chain.id or "chain") + suffix, meta=meta)

"""What a Hugging Face tokenizer and model accept: the input window, special-token markers, chat templates.

The HF backbones (:mod:`~ares_rerank.backbones.hf` and the NLI, PRM and judge backbones built on it) render claims
into token ids with these helpers: :func:`model_window` is the longest input a model takes (never past its learned
position table, :func:`position_limit`); :data:`MARKER` stands for a special token in rendered text and
:func:`encode_with_markers` puts the real token there, never merged into its neighbours; :func:`single_token_id`
checks a step tag or label word is one token; :func:`clean_claim` keeps a claim from faking a tag;
:func:`special_prefix` and :func:`wants_chat_template` say what the tokenizer adds around a text.
"""

from __future__ import annotations

import re
from typing import Any, Sequence


__all__ = [
    "MARKER",
    "clean_claim",
    "encode_with_markers",
    "model_window",
    "position_limit",
    "single_token_id",
    "special_prefix",
    "wants_chat_template",
]

# Claims may not contain this private-use character: rendering uses it to mark where special tokens go.
MARKER = "\ue000"


def encode_with_markers(tokenizer: Any, text: str, marker_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """Tokenize ``text`` in which :data:`MARKER` stands for special tokens; return ids and the markers' positions.

    The pieces between markers are tokenized separately (no special tokens added) and ``marker_ids[j]`` is placed
    at marker j, so a tag is always exactly the looked-up token, never merged into its neighbours.
    """
    pieces = text.split(MARKER)
    if len(pieces) - 1 != len(marker_ids):
        raise ValueError(f"rendered text has {len(pieces) - 1} markers for {len(marker_ids)} marker ids.")
    ids: list[int] = []
    positions: list[int] = []
    for j, piece in enumerate(pieces):
        if piece:
            ids.extend(tokenizer.encode(piece, add_special_tokens=False, verbose=False))
        if j < len(marker_ids):
            positions.append(len(ids))
            ids.append(int(marker_ids[j]))
    return ids, positions


def single_token_id(tokenizer: Any, text: str, parameter: str) -> int:
    """The id of ``text`` if the tokenizer encodes it as exactly one token; else a ValueError naming ``parameter``."""
    ids = tokenizer.encode(text, add_special_tokens=False, verbose=False)
    if len(ids) != 1:
        pieces = tokenizer.convert_ids_to_tokens(ids)
        raise ValueError(
            f"{parameter}={text!r} is not a single token of this tokenizer (it encodes to {pieces!r}): pass a string "
            "the tokenizer has as one token, or add it with tokenizer.add_special_tokens(...) and resize the model."
        )
    return int(ids[0])


def model_window(model: Any, tokenizer: Any, max_length: int | None) -> int:
    """The longest input the model takes: ``max_length`` if given, else the smaller of the tokenizer's and config's.

    Raises:
        ValueError: ``max_length`` is not an integer >= 8, or exceeds the model's learned position table (see
            :func:`position_limit`): such inputs would crash inside the model's embeddings.
    """
    table = position_limit(model)
    if max_length is not None:
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 8:
            raise ValueError(f"max_length={max_length!r} must be an integer >= 8 (tokens), or None for the model's.")
        if table is not None and max_length > table:
            config = getattr(model, "config", None)
            raise ValueError(
                f"max_length={max_length} is longer than this model's position table: it embeds at most {table} "
                f"positions (config.max_position_embeddings={getattr(config, 'max_position_embeddings', None)}, "
                f"less the positions it reserves). Use max_length <= {table}, or None for the model's window."
            )
        return max_length
    limits = [getattr(tokenizer, "model_max_length", None)]
    config = getattr(model, "config", None)
    limits.append(getattr(config, "max_position_embeddings", None))
    limits.append(table)
    limits = [int(x) for x in limits if isinstance(x, int) and 0 < x < 1_000_000]
    return min(limits) if limits else 2048


# Names of learned absolute position tables: BERT / RoBERTa / DistilBERT ..., GPT-2, BART / OPT.
_POSITION_TABLES = ("position_embeddings", "wpe", "embed_positions")


def position_limit(model: Any) -> int | None:
    """How many positions the model's learned absolute position table embeds, or ``None`` without one (rotary or
    relative positions, or not a torch module).

    Some tables reserve their first rows: RoBERTa-style models start positions after the padding index
    (``max_position_embeddings`` 514 holds 512 tokens), BART-style ones keep an ``offset``.
    """
    import torch

    named = getattr(model, "named_modules", None)
    if not callable(named):
        return None
    for name, module in named():
        if isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in _POSITION_TABLES:
            offset = getattr(module, "offset", None)
            if not isinstance(offset, int):
                offset = 0 if module.padding_idx is None else module.padding_idx + 1
            return int(module.num_embeddings) - offset
    return None


def special_prefix(tokenizer: Any) -> list[int]:
    """The ids the tokenizer puts before a single text on its own (e.g. Llama's BOS; none for Qwen or GPT-2)."""
    plain = tokenizer.encode("a", add_special_tokens=False, verbose=False)
    full = tokenizer.encode("a")
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start]
    return []


def wants_chat_template(tokenizer: Any, use_chat_template: bool | None) -> bool:
    """Whether to render with the tokenizer's chat template: ``None`` = when it has one, ``False`` = never.

    Raises:
        ValueError: ``use_chat_template=True`` but the tokenizer (or ``None``) has no chat template.
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if use_chat_template and not has_template:
        raise ValueError("use_chat_template=True but the tokenizer has no chat_template: pass use_chat_template=None.")
    return has_template and use_chat_template is not False


def clean_claim(text: str, forbidden: Sequence[str]) -> str:
    """Replace each forbidden string (a step tag, the marker) in a claim with a space, so it cannot fake a tag.

    Only whole occurrences: a tag that starts or ends with a letter or digit is replaced where no letter or digit
    joins it there (Math-Shepherd's tag "ки" inside the Russian word "Такие" is part of the word, not a tag).
    """
    for bad in forbidden:
        if bad:
            before = r"(?<!\w)" if re.match(r"\w", bad[0]) else ""
            after = r"(?!\w)" if re.match(r"\w", bad[-1]) else ""
            text = re.sub(before + re.escape(bad) + after, " ", text)
    return text

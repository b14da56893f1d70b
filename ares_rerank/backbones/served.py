"""What the served backbones share beyond the HTTP client (:mod:`ares_rerank.utils.http`, importable from here): checked
numbers from an answer, the served model's card and window, scoring in bounded requests, a bounded thread map.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

from ..utils import http
from ..utils.http import JsonClient, ServerResponseError


__all__ = [
    "answer_choices",
    "finite_number",
    "map_bounded",
    "model_card",
    "score_in_requests",
    "served_model_and_window",
]


def __getattr__(name: str) -> Any:
    """The HTTP client's names, moved to :mod:`ares_rerank.utils.http`, still import from here (``from
    ares_rerank.backbones.served import JsonClient``, as the served backbones and older code do): looked up there,
    so the list is written once, in that module's ``__all__``."""
    if name in http.__all__:
        return getattr(http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


T = TypeVar("T")
R = TypeVar("R")


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite JSON number (int or float, not a bool), else ``None``.

    The one check every number from a server passes before a backbone uses it: NaN, +-inf, ``1e400`` (read as inf),
    an integer too large for a float, strings and ``true`` are all ``None``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def answer_choices(answer: Any, count: int, url: str, asked: str, hint: str) -> list[dict[str, Any]]:
    """The ``count`` choices of an OpenAI-style answer (``/v1/completions``, ``/v1/chat/completions``), in index order.

    Raises:
        ServerResponseError: Another number of choices, or one that is not an object; the message names ``url``,
            what was ``asked`` (``"2 prompts"``, ``"n=4"``) and the ``hint``.
    """
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or len(choices) != count or not all(isinstance(c, dict) for c in choices):
        got = len(choices) if isinstance(choices, list) else "no"
        raise ServerResponseError(f"{url} answered {got} choices for {asked} ({str(answer)[:200]}): {hint}", url)
    if all(isinstance(c.get("index"), int) for c in choices):
        choices = sorted(choices, key=lambda c: c["index"])
    return choices


def model_card(client: JsonClient, model: str | None, hint: str) -> dict[str, Any]:
    """The ``/v1/models`` entry (a dict with a string ``"id"``) for ``model``, or the first listed.

    Raises:
        ServerResponseError: The listing has no usable entry; the message ends with ``hint`` (what to pass instead).
    """
    url = client.root + "/v1/models"
    listing = client.get("/v1/models")
    cards = listing.get("data") if isinstance(listing, dict) else None
    cards = [c for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"]] if isinstance(
        cards, list) else []
    if not cards:
        raise ServerResponseError(f"{url} lists no model ({str(listing)[:200]}): {hint}", url)
    return next((c for c in cards if c["id"] == model), cards[0])


def served_model_and_window(client: JsonClient, model: str | None, max_length: int,
                            window_given: bool) -> tuple[str, int]:
    """On a served backbone's first use: the model name (``model``, else the first ``/v1/models`` lists) and the
    window (``max_length`` as given, else the smaller of the tokenizer's and the server's ``max_model_len``)."""
    if model is not None and window_given:
        return model, max_length
    card = model_card(client, model, "pass model= and max_length=.")
    limit = card.get("max_model_len")
    if not window_given and isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        max_length = min(max_length, limit)
    return model or card["id"], max_length


def score_in_requests(score_batch: Callable[[list[Any]], list[Any]], items: Sequence[dict[str, Any]],
                      batch_size: int, concurrency: int, stats: Any) -> list[Any]:
    """A served backbone's ``score_encoded``: ``items`` in length-sorted batches of ``batch_size``, one request each
    (``score_batch``), ``concurrency`` in flight; counted in ``stats`` (a ``ScoringStats``).

    Returns:
        One value per item, in order.
    """
    order = sorted(range(len(items)), key=lambda i: len(items[i]["input_ids"]))
    batches = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
    values = map_bounded(lambda idx: score_batch([items[i] for i in idx]), batches, concurrency)
    out: list[Any] = [None] * len(items)
    for idx, batch_values in zip(batches, values):
        for i, value in zip(idx, batch_values):
            out[i] = value
    stats.forward_passes += len(batches)
    stats.pairs_computed += len(items)
    return out


def map_bounded(fn: Callable[[T], R], items: Sequence[T], concurrency: int) -> list[R]:
    """``[fn(x) for x in items]`` with at most ``concurrency`` calls in flight; results in input order.

    The first exception is raised (after the calls already running finish; queued ones are cancelled).
    """
    if len(items) <= 1 or concurrency == 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items))) as pool:
        futures = [pool.submit(fn, x) for x in items]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise

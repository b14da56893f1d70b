"""OpenRLHF's remote reward protocol, as ``ares-rerank serve`` (:mod:`ares_rerank.rewards.server`) speaks it.

OpenRLHF 0.11 (``--reward.remote_url http://host:port/get_reward``; a comma-separated list shards across servers)
POSTs ``{"query": [...], "prompts": [...], "labels": [...]}`` from each rollout: the query is the whole decoded
sequence, prompt then response (``tokenizer.decode(prompt + response ids, skip_special_tokens=False)``), and the
prompt is the text it was built from (``apply_chat_template(..., add_generation_prompt=True)``). It reads back
``rewards`` (one float per query, for the advantages), ``scores`` (one float per query, for dynamic filtering) and
``extra_logs`` (a dict of lists aligned to the queries, each turned into a float tensor and logged). The answer built
here::

    {"rewards": [0.93, 0.0], "scores": [0.93, 0.0],
     "extra_logs": {"ares_scored": [1.0, 0.0], "ares_num_steps": [3.0, 0.0], "ares_first_error": [-1.0, -1.0],
                    "ares_flagged_frac": [0.0, 0.0], "ares_evaluations": [3.0, 0.0]},
     "step_scores": [[0.99, 0.97, 0.93], []], "step_ends": [[12, 40, 71], []]}

- the response scored is what follows the prompt in the query (:func:`split_query`), without the end-of-sequence
  markers at its end (:data:`DEFAULT_END_MARKERS`: ``<|im_end|>``, ``<|eot_id|>``, ``<｜end▁of▁sentence｜>``, ...
  that the decoded query keeps), scored against the whole prompt;
- a query that does not start with its prompt is matched by the prompt's longest ending that it starts with
  (:func:`split_query`): OpenRLHF cuts a prompt longer than ``max_len - max_new_tokens`` tokens to its last tokens
  and decodes the query from those, while it still sends the whole prompt;
- ``rewards`` equal ``AresReward(reranker, unscorable_value=...)(prompts, responses)``: the aggregated ARES score in
  [0, 1], and ``unscorable_value`` for a response that cannot be scored (empty or blank, text that cannot be encoded,
  a backbone error on it); ``ares_scored`` says which;
- ``step_scores`` (tau per step) and ``step_ends`` (the character offset in the response where each step ends) are
  extra fields for dense rewards (:class:`ares_rerank.verl.AresDenseRewardManager`); OpenRLHF ignores them.

A body that breaks the protocol is a :class:`RequestError` (400 / 413) naming the field, the value and the fix; a
query that shares no ending with its prompt is the only text a 400 is given for (where the response starts cannot
be known).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from .stats import completion_logs, reward_values, step_ends
from ..chat_templates import LAYOUTS


__all__ = [
    "DEFAULT_END_MARKERS",
    "REWARD_PATH",
    "RequestError",
    "RewardRequest",
    "parse_reward_request",
    "reward_answer",
    "split_query",
]

#: End-of-sequence markers a decoded query keeps (``skip_special_tokens=False``), removed from a response's end: the
#: turn ends of the known chat layouts (:data:`~ares_rerank.chat_templates.LAYOUTS`: ChatML / Qwen / Phi-4, Llama 3,
#: DeepSeek-R1 / V3's ``<｜end▁of▁sentence｜>``, Mistral / Llama 2, Gemma, Phi-3), and Llama 4's, gpt-oss's and
#: Command-R's.
DEFAULT_END_MARKERS = tuple(dict.fromkeys([*(end for layout in LAYOUTS.values() for end in layout.ends),
                                           "<|eot|>", "<|return|>", "<|END_OF_TURN_TOKEN|>"]))
REWARD_PATH = "/get_reward"


class RequestError(Exception):
    """A request the server refuses: the HTTP ``status``, the message for ``{"error": ...}``, extra headers, and a
    short ``reason`` that names the kind of refusal in the server's log (lines are rate-limited per reason)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.reason = reason or f"HTTP {status}"


@dataclass
class RewardRequest:
    """A parsed ``/get_reward`` body: one prompt and one response per query, and the queries that did not start with
    their prompt (``realigned``: ``(index, matched, prompt_chars)``, the prompt characters matched, white space not
    counted, and the prompt's own count; see :func:`split_query`)."""

    prompts: list[str]
    responses: list[str]
    realigned: list[tuple[int, int, int]] = field(default_factory=list)


def _text_list(payload: dict[str, Any], key: str, hint: str) -> list[str]:
    if key not in payload or payload[key] is None:
        raise RequestError(400, f"'{key}' is missing: {hint}", reason=f"'{key}' missing")
    value = payload[key]
    if isinstance(value, str):
        raise RequestError(400, f"'{key}' is a string: send a list with one entry per completion (wrap a single "
                                f"one in a list). {hint}", reason=f"'{key}' not a list")
    if not isinstance(value, list):
        raise RequestError(400, f"'{key}' is a JSON {_json_type(value)}: send a list of strings. {hint}",
                           reason=f"'{key}' not a list")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise RequestError(400, f"'{key}[{i}]' is a JSON {_json_type(item)}, not a string: send text.",
                               reason=f"'{key}' entry not a string")
    return value


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


_VISIBLE = re.compile(r"\S+")
_REPLACEMENT = "\ufffd"  # what a decoder writes for a token cut inside a multi-byte UTF-8 character
_ANCHOR = 16  # characters of the query looked up in the prompt, to find the candidate endings quickly


def _visible(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` without white space, and for each run of visible characters its offset there and in ``text``."""
    runs = [(m.start(), m.group()) for m in _VISIBLE.finditer(text)]
    offsets, starts, at = [], [], 0
    for start, run in runs:
        offsets.append(at)
        starts.append(start)
        at += len(run)
    return "".join(run for _, run in runs), offsets, starts


def _longest_ending(prompt: str, query: str) -> int:
    """The length of the longest ending of ``prompt`` that ``query`` starts with (0 when none)."""
    query = query[: len(prompt)]  # an ending is at most the whole prompt
    anchor = query[:_ANCHOR]
    if not anchor:
        return 0
    # endings at least as long as the anchor start where the anchor occurs in the prompt; the leftmost one the query
    # continues is the longest. Checking them is fast on real text; on text that repeats itself (the anchor found
    # everywhere, each check failing late) it would grow with the square of the length, so past a budget of
    # characters compared the linear automaton below answers instead.
    budget = 4 * len(prompt) + 4096
    at = prompt.find(anchor)
    while at >= 0:
        size = len(prompt) - at
        if query.startswith(prompt[at:]):
            return size
        budget -= size
        if budget < 0:
            return _overlap(prompt, query)
        at = prompt.find(anchor, at + 1)
    for size in range(min(len(anchor) - 1, len(prompt)), 0, -1):  # the shorter endings, longest first
        if prompt.endswith(query[:size]):
            return size
    return 0


def _overlap(prompt: str, query: str) -> int:
    """:func:`_longest_ending` in linear time: ``prompt`` run through the Knuth-Morris-Pratt automaton of ``query``;
    the final state is the longest prefix of ``query`` that ends ``prompt``."""
    fail, k = [0] * len(query), 0
    for i in range(1, len(query)):
        while k and query[i] != query[k]:
            k = fail[k - 1]
        if query[i] == query[k]:
            k += 1
        fail[i] = k
    k = 0
    for char in prompt:
        while k and (k == len(query) or char != query[k]):
            k = fail[k - 1]
        if k < len(query) and char == query[k]:
            k += 1
    return k


def split_query(query: str, prompt: str) -> tuple[str, int | None] | None:
    """The response in ``query`` (the text after its prompt), and how the prompt was found.

    A query that starts with its prompt gives ``(query[len(prompt):], None)``. Otherwise the prompt's longest ending
    that the query starts with is matched, compared without white space (a decoder may drop a leading space or clean
    up spaces before punctuation) and after any U+FFFD characters at the query's start (what a token cut inside a
    multi-byte character decodes to): that is where OpenRLHF's left-truncated prompt ends. The response is what follows
    the match (after the prompt's trailing white space, where the query has it there), and the second value is the
    number of prompt characters matched (white space not counted). ``None`` when no ending of the prompt matches: then
    where the response starts cannot be known.

    Examples:
        >>> split_query("Q: 2+2?\nA: 4", "Q: 2+2?\n")
        ('A: 4', None)
        >>> split_query("2+2?\nA: 4", "Q: 2+2?\n")  # the prompt's first tokens were cut
        ('A: 4', 4)
    """
    if query.startswith(prompt):
        return query[len(prompt):], None
    prompt_visible = _visible(prompt)[0]
    query_visible, offsets, starts = _visible(query)
    skipped = len(query_visible) - len(query_visible.lstrip(_REPLACEMENT))
    if not prompt_visible:  # a blank prompt: the whole query is the response
        return query, 0
    matched = _longest_ending(prompt_visible, query_visible[skipped:])
    if matched == 0:
        return None
    last = skipped + matched - 1  # the last matched character, in query_visible
    run = bisect.bisect_right(offsets, last) - 1
    end = starts[run] + (last - offsets[run]) + 1
    trailing = prompt[len(prompt.rstrip()):]
    if trailing and query.startswith(trailing, end):
        end += len(trailing)
    return query[end:], matched


def _mismatch(i: int, query: str, prompt: str) -> RequestError:
    return RequestError(400, f"query[{i}] ({len(query)} characters, starting {query[:40]!r}) does not start with "
                             f"prompts[{i}] ({len(prompt)} characters, ending {prompt[-40:]!r}) nor with any ending of "
                             "it, even compared without white space: each query must be its prompt (or, when the "
                             "trainer cut the prompt, the prompt's last part) followed by the response; send the "
                             "prompt the query was built from.",
                        reason="query shares nothing with its prompt")


def parse_reward_request(payload: Any, max_items: int) -> RewardRequest:
    """The prompts and responses of an OpenRLHF ``/get_reward`` body (:class:`RewardRequest`; each response split
    from its query by :func:`split_query`), or a :class:`RequestError` (400 / 413) naming the field, the value and
    the fix. ``labels`` is optional and unused (ARES needs no reference answer), but when given it must have one
    entry per query."""
    if not isinstance(payload, dict):
        raise RequestError(400, f"the body is a JSON {_json_type(payload)}, not an object: send "
                                '{"query": [...], "prompts": [...], "labels": [...]} (OpenRLHF\'s remote reward '
                                "protocol).", reason="body not an object")
    queries = _text_list(payload, "query", "each query is a prompt followed by its response.")
    if len(queries) > max_items:
        raise RequestError(413, f"'query' has {len(queries)} entries, more than max_items={max_items} "
                                "(--max-items): split the batch into smaller requests, or raise --max-items.",
                           reason="too many queries")
    prompts = _text_list(payload, "prompts", "send the prompt each query starts with (one per query); the "
                                             "response scored is what follows it.")
    if len(prompts) != len(queries):
        raise RequestError(400, f"'prompts' has {len(prompts)} entries for {len(queries)} queries: send one "
                                "prompt per query (repeat a prompt for each of its samples).",
                           reason="prompts and queries differ in number")
    labels = payload.get("labels")
    if labels is not None and (not isinstance(labels, list) or len(labels) != len(queries)):
        size = f"{len(labels)} entries" if isinstance(labels, list) else f"a JSON {_json_type(labels)}"
        raise RequestError(400, f"'labels' is {size} for {len(queries)} queries: send one label per query, or "
                                "leave 'labels' out (ARES does not use them).", reason="labels and queries differ")
    request = RewardRequest(prompts, [])
    for i, (query, prompt) in enumerate(zip(queries, prompts)):
        split = split_query(query, prompt)
        if split is None:
            raise _mismatch(i, query, prompt)
        response, matched = split
        request.responses.append(response)
        if matched is not None:
            request.realigned.append((i, matched, len("".join(prompt.split()))))
    return request


def reward_answer(records: Sequence[dict[str, Any]], responses: Sequence[str], threshold: float,
                  unscorable_value: float) -> dict[str, Any]:
    """The ``/get_reward`` answer for scored records (see the module docstring)."""
    rewards = reward_values(records, unscorable_value)
    scored = [r["score"] is not None for r in records]
    return {
        "rewards": rewards,
        "scores": list(rewards),
        "extra_logs": completion_logs(records, threshold),
        "step_scores": [list(r["step_scores"]) if ok else [] for r, ok in zip(records, scored)],
        "step_ends": [step_ends(text, r["steps"]) if ok else [] for r, text, ok in zip(records, responses, scored)],
    }

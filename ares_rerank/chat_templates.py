"""Text that a policy's chat template wrote, read back as the messages' contents.

RL trainers hand a reward the prompt and the response as *rendered text*: OpenRLHF builds prompts with
``tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)`` and decodes each query with
``skip_special_tokens=False``; verl's prompt tokens hold the template too; a TRL dataset may have been templated
by hand. ARES judges each step against the base claims of the *question*, so role headers (``<|im_start|>user``),
end markers (``<|im_end|>``, ``<|eot_id|>``, ``<｜end▁of▁sentence｜>``) and begin-of-sequence markers must not
become part of a claim: glued to the last line of a question, ``<|im_end|>`` is enough to change a reward.

A :class:`ChatLayout` says how one template family writes a turn (the header that opens a user / assistant turn,
what ends it, what starts a sequence). :func:`prompt_text` reads the user messages' contents out of a rendered
prompt and :func:`response_text` the assistant's text out of a rendered response (cut at the first end marker,
``<think>`` tags removed: the reasoning comes first, as :func:`~ares_rerank.chain.message_text` puts a message's
``reasoning_content``). Text with no header of the layout is left as it is, bar start and end markers.

Layouts are known for the common families (:data:`LAYOUTS`: ChatML, Phi-4, Llama 3, DeepSeek-R1 / V3, Mistral,
Gemma, Phi-3) and read from any tokenizer by :func:`layout_from_tokenizer`, which renders a probe conversation with
the tokenizer's own chat template and takes the layout from where the probe's contents land.
:func:`resolve_layout` turns the ``chat_layout`` setting of :class:`~ares_rerank.rerank.AresReranker` into one:
``"auto"`` (the default) picks, per text, the first known layout whose headers it contains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence


__all__ = [
    "LAYOUTS",
    "ChatLayout",
    "detect_layout",
    "layout_from_tokenizer",
    "parse_messages",
    "prompt_text",
    "resolve_layout",
    "response_text",
    "strip_end_markers",
]

THINK_TAGS = ("<think>", "</think>")


@dataclass(frozen=True)
class ChatLayout:
    """How one chat template family writes a conversation as text.

    Args:
        name: The layout's name (``"chatml"``, ...; ``"tokenizer:<name_or_path>"`` when read from a tokenizer).
        headers: Role -> the text that opens a turn of that role (``{"user": "<|im_start|>user", ...}``); matched
            with the white space around it. A ``"user"`` header is required.
        ends: Texts that end a turn or the sequence (``<|im_end|>``, the EOS token); a turn's content stops at the
            first of them.
        starts: Begin-of-sequence texts removed where a text starts with them (``<|begin_of_text|>``).
    """

    name: str
    headers: dict[str, str]
    ends: tuple[str, ...] = ()
    starts: tuple[str, ...] = ()
    _header_re: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        headers = {role: h.strip() for role, h in self.headers.items() if isinstance(h, str) and h.strip()}
        if "user" not in headers:
            raise ValueError(f"ChatLayout(name={self.name!r}) has no 'user' header (headers={self.headers!r}): "
                             "give the text that opens a user turn, e.g. '<|im_start|>user'.")
        object.__setattr__(self, "headers", headers)
        object.__setattr__(self, "ends", tuple(dict.fromkeys(e.strip() for e in self.ends if e and e.strip())))
        object.__setattr__(self, "starts", tuple(dict.fromkeys(s.strip() for s in self.starts if s and s.strip())))
        ordered = sorted(headers.values(), key=len, reverse=True)  # the longest header wins where one holds another
        object.__setattr__(self, "_header_re", re.compile("|".join(re.escape(h) for h in ordered)))

    def role_of(self, header: str) -> str:
        return next(role for role, h in self.headers.items() if h == header)

    def finds_header(self, text: str) -> bool:
        return self._header_re.search(text) is not None

    def header_matches(self, text: str) -> list[re.Match[str]]:
        return list(self._header_re.finditer(text))


def _layout(name: str, user: str, assistant: str, ends: Sequence[str], starts: Sequence[str] = (),
            **other: str) -> ChatLayout:
    return ChatLayout(name, {"user": user, "assistant": assistant, **other}, tuple(ends), tuple(starts))


#: The known layouts, in the order ``"auto"`` tries them (a layout whose headers hold another's comes first).
LAYOUTS: dict[str, ChatLayout] = {layout.name: layout for layout in (
    # Phi-4: ChatML with <|im_sep|> after the role; before ChatML, whose header it contains
    _layout("phi4", "<|im_start|>user<|im_sep|>", "<|im_start|>assistant<|im_sep|>", ("<|im_end|>", "<|endoftext|>"),
            system="<|im_start|>system<|im_sep|>", tool="<|im_start|>tool<|im_sep|>"),
    # ChatML: Qwen2 / 2.5 / 3, SmolLM, OpenHermes, ...
    _layout("chatml", "<|im_start|>user", "<|im_start|>assistant", ("<|im_end|>", "<|endoftext|>"),
            system="<|im_start|>system", tool="<|im_start|>tool"),
    _layout("llama3", "<|start_header_id|>user<|end_header_id|>", "<|start_header_id|>assistant<|end_header_id|>",
            ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"), ("<|begin_of_text|>",),
            system="<|start_header_id|>system<|end_header_id|>", ipython="<|start_header_id|>ipython<|end_header_id|>",
            tool="<|start_header_id|>tool<|end_header_id|>"),
    # DeepSeek-R1 / V3: the system prompt stands before the first header, a user turn has no end marker
    _layout("deepseek", "<｜User｜>", "<｜Assistant｜>", ("<｜end▁of▁sentence｜>",), ("<｜begin▁of▁sentence｜>",),
            tool="<｜tool▁outputs▁begin｜>"),
    # Mistral: [INST] ... [/INST] answer</s>; the assistant turn opens at [/INST]
    _layout("mistral", "[INST]", "[/INST]", ("</s>", "[/SYSTEM_PROMPT]"), ("<s>",), system="[SYSTEM_PROMPT]"),
    _layout("gemma", "<start_of_turn>user", "<start_of_turn>model", ("<end_of_turn>", "<eos>"), ("<bos>",),
            system="<start_of_turn>system"),
    _layout("phi3", "<|user|>", "<|assistant|>", ("<|end|>", "<|endoftext|>"), system="<|system|>"),
)}
_KNOWN_ENDS = tuple(dict.fromkeys(e for layout in LAYOUTS.values() for e in layout.ends))
_KNOWN_STARTS = tuple(dict.fromkeys(s for layout in LAYOUTS.values() for s in layout.starts))


def detect_layout(text: str) -> ChatLayout | None:
    """The first known layout (:data:`LAYOUTS` order) whose headers ``text`` contains; ``None`` for plain text."""
    return next((layout for layout in LAYOUTS.values() if layout.finds_header(text)), None)


def _strip_starts(text: str, starts: Sequence[str]) -> str:
    text = text.lstrip()
    while True:
        start = next((s for s in starts if text.startswith(s)), None)
        if start is None:
            return text
        text = text[len(start):].lstrip()


def _cut_at_end(text: str, ends: Sequence[str]) -> str:
    at = min((i for i in (text.find(e) for e in ends if e) if i >= 0), default=len(text))
    return text[:at]


def strip_end_markers(text: str, markers: Sequence[str]) -> str:
    """``text`` without the ``markers`` (and the white space around them) at its end, removed repeatedly (a decoded
    sequence may end ``<|im_end|>\\n<|endoftext|><|endoftext|>``); unchanged when it ends with none."""
    markers = [m for m in markers if m]
    end = len(text)
    while True:
        # indices, not copies: a text of millions of markers (a hostile response) is one pass, not one copy each
        trimmed = _rstripped_end(text, end)
        marker = next((m for m in markers if text.endswith(m, 0, trimmed)), None)
        if marker is None:
            return text[:end]
        end = trimmed - len(marker)


def _rstripped_end(text: str, end: int, window: int = 4096) -> int:
    """Where ``text[:end].rstrip()`` ends, copying at most a window at a time."""
    while end > 0:
        start = max(0, end - window)
        kept = len(text[start:end].rstrip())
        if kept:
            return start + kept
        end = start
    return 0


def parse_messages(text: str, layout: ChatLayout, lead_role: str = "system") -> list[dict[str, str]] | None:
    """The ``{"role", "content"}`` messages of rendered ``text``; ``None`` when it holds no header of ``layout``.

    Each header opens a turn whose content runs to the next header, cut at the first end marker; text before the
    first header (begin-of-sequence markers removed) is a ``lead_role`` message (DeepSeek writes its system prompt
    there; a response continues the assistant turn its prompt opened). Contents are stripped; empty turns (the
    generation prompt's open assistant turn) are left out.
    """
    matches = layout.header_matches(text)
    if not matches:
        return None
    ends = layout.ends
    messages = []
    lead = _cut_at_end(_strip_starts(text[: matches[0].start()], layout.starts), ends).strip()
    if lead:
        messages.append({"role": lead_role, "content": lead})
    for match, following in zip(matches, matches[1:] + [None]):
        body = text[match.end(): following.start() if following is not None else len(text)]
        content = _cut_at_end(body, ends).strip()
        if content:
            messages.append({"role": layout.role_of(match.group()), "content": content})
    return messages


def _join(messages: Sequence[dict[str, str]], roles: Sequence[str]) -> str:
    return "\n\n".join(m["content"] for m in messages if m["role"] in roles)


def prompt_text(text: str, layout: ChatLayout | None = None, roles: Sequence[str] = ("user",)) -> str:
    """The prompt a rendered ``text`` holds: the contents of its ``roles`` messages, joined by a blank line.

    Args:
        text: A prompt, rendered by a chat template or plain.
        layout: The template's layout; ``None``: detected (:func:`detect_layout`).
        roles: The roles that form the prompt (``AresReranker(prompt_roles=...)``).

    Returns:
        The messages' contents; for text with no header of the layout, ``text`` without the begin-of-sequence
        markers at its start and the end markers at its end.
    """
    layout = layout if layout is not None else detect_layout(text)
    messages = parse_messages(text, layout) if layout is not None else None
    if messages is None:
        starts, ends = (layout.starts, layout.ends) if layout is not None else (_KNOWN_STARTS, _KNOWN_ENDS)
        return strip_end_markers(_strip_starts(text, starts), ends).strip()
    return _join(messages, roles)


def response_text(text: str, layout: ChatLayout | None = None, roles: Sequence[str] = ("assistant",),
                  extra_ends: Sequence[str] = ()) -> str:
    """The response a rendered ``text`` holds: the assistant's text without its end markers, ``<think>`` tags
    removed (the reasoning, then the answer, a blank line between). In a text with headers of the layout (a
    response that opened turns of its own) each turn is cut at its first end marker and the ``roles`` turns are
    kept; a plain response loses the end markers (and padding) at its end.

    Args:
        text: A response (what follows the prompt in a decoded query), rendered or plain.
        layout: The template's layout; ``None``: every known layout's end markers, and headers detected.
        roles: The roles that form the response (``AresReranker(completion_roles=...)``).
        extra_ends: More end markers (a tokenizer's EOS and pad tokens, a server's ``--end-markers``).
    """
    found = layout if layout is not None else detect_layout(text)
    ends = tuple(extra_ends) + (found.ends if found is not None else ()) + (() if layout is not None else _KNOWN_ENDS)
    if found is not None and found.finds_header(text):
        messages = parse_messages(text, _with_ends(found, ends), lead_role="assistant") or []
        text = _join(messages, roles)
    else:
        text = strip_end_markers(_strip_starts(text, found.starts if found is not None else _KNOWN_STARTS), ends)
    opened, closed = THINK_TAGS
    if closed in text:
        reasoning, _, answer = text.partition(closed)
        text = reasoning.replace(opened, "").strip() + "\n\n" + answer.strip()
    return text.replace(opened, "").strip()


def _with_ends(layout: ChatLayout, ends: Sequence[str]) -> ChatLayout:
    if set(ends) <= set(layout.ends):
        return layout
    return ChatLayout(layout.name, layout.headers, tuple(ends), layout.starts)


# -- layouts read from a tokenizer --------------------------------------------------------------------------------
_PROBE = ("ARESPROBEUSERA", "ARESPROBEASSISTANTA", "ARESPROBEUSERB")


def _render(tokenizer: Any, messages: list[dict[str, str]], generation: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)


def _special_texts(tokenizer: Any, names: Sequence[str]) -> list[str]:
    out = []
    for name in names:
        value = getattr(tokenizer, name, None)
        if isinstance(value, str) and value.strip():
            out.append(value)
    return out


def _special_tokens(tokenizer: Any) -> list[str]:
    """The tokenizer's special and added tokens' texts."""
    texts = list(getattr(tokenizer, "all_special_tokens", ()) or ())
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    texts += [getattr(token, "content", str(token)) for token in added.values()]
    return [t for t in dict.fromkeys(texts) if isinstance(t, str) and t.strip()]


def _split_gap(gap: str, tail: str, specials: Sequence[str]) -> tuple[str, str]:
    """(the turn's end, the next turn's header) in the text ``gap`` between one message's content and the next's.

    The end is the special token ``gap`` starts with (``<|im_end|>``, ``<|eot_id|>``); with none, the part ``gap``
    shares with ``tail``, the text the template writes after the same message when nothing follows it."""
    stripped = gap.strip()
    first = max((t for t in specials if stripped.startswith(t)), key=len, default=None)
    if first is None:
        shared = 0
        while shared < min(len(gap), len(tail)) and gap[shared] == tail[shared]:
            shared += 1
        end, header = gap[:shared], gap[shared:]
    else:
        at = gap.index(first) + len(first)
        end, header = gap[:at], gap[at:]
    return end.strip(), header.strip()


def layout_from_tokenizer(tokenizer: Any) -> ChatLayout:
    """The layout of ``tokenizer``'s chat template, read from where a probe conversation's contents land.

    The probe (user, assistant, user; with the generation prompt) is rendered with the tokenizer's own template.
    The text between the assistant's content and the second user's is the assistant turn's end (the special token
    it starts with) and then the user header; between the first user's content and the assistant's, the user
    turn's end and the assistant header (where nothing follows the end, as DeepSeek's ``<｜Assistant｜>`` and
    Mistral's ``[/INST]``, that token opens the assistant turn and a user turn has no end of its own). The ends are
    the turn ends plus the tokenizer's EOS and pad tokens; the start is its BOS token.

    Raises:
        ValueError: The tokenizer has no chat template, or its template does not write the probe's contents as
            they were given (then pass ``chat_layout=`` one of :data:`LAYOUTS` instead).
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"tokenizer={getattr(tokenizer, 'name_or_path', type(tokenizer).__name__)!r} has no chat "
                         f"template to read a layout from: pass chat_layout= one of {list(LAYOUTS)}, or 'none'.")
    user_a, assistant_a, user_b = _PROBE
    name = f"tokenizer:{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__}"
    try:
        alone = _render(tokenizer, [{"role": "user", "content": user_a}], False)
        answered = _render(tokenizer, [{"role": "user", "content": user_a},
                                       {"role": "assistant", "content": assistant_a}], False)
        full = _render(tokenizer, [{"role": "user", "content": user_a}, {"role": "assistant", "content": assistant_a},
                                   {"role": "user", "content": user_b}], True)
    except Exception as err:  # noqa: BLE001 -- a template's own error (jinja's, or raise_exception) explains itself
        raise ValueError(f"{name}'s chat template cannot render a user / assistant / user probe ({type(err).__name__}:"
                         f" {err}): pass chat_layout= one of {list(LAYOUTS)}.") from None
    if any(full.count(p) != 1 for p in _PROBE) or alone.count(user_a) != 1 or answered.count(assistant_a) != 1:
        raise ValueError(f"{name}'s chat template does not write message contents as given: pass chat_layout= one "
                         f"of {list(LAYOUTS)}.")
    specials = _special_tokens(tokenizer)
    user_tail = alone[alone.index(user_a) + len(user_a):]
    assistant_tail = answered[answered.index(assistant_a) + len(assistant_a):]
    before_assistant = full[full.index(user_a) + len(user_a): full.index(assistant_a)]
    between_user = full[full.index(assistant_a) + len(assistant_a): full.index(user_b)]
    user_end, assistant_header = _split_gap(before_assistant, user_tail, specials)
    assistant_end, user_header = _split_gap(between_user, assistant_tail, specials)
    if not assistant_header:  # the user turn's end opens the assistant turn ([/INST], <｜Assistant｜>)
        assistant_header, user_end = user_end, ""
    if not user_header:
        raise ValueError(f"{name}'s chat template writes no text before a user message: pass chat_layout= one of "
                         f"{list(LAYOUTS)}.")
    ends = [e for e in (user_end, assistant_end) if e] + _special_texts(tokenizer, ("eos_token", "pad_token"))
    ends = [e for e in ends if e.strip() and e.strip() not in (user_header.strip(), assistant_header.strip())]
    return ChatLayout(name, {"user": user_header, "assistant": assistant_header}, tuple(ends),
                      tuple(_special_texts(tokenizer, ("bos_token",))))


def resolve_layout(chat_layout: Any = "auto", tokenizer: Any = None, where: str = "chat_layout") -> ChatLayout | str:
    """The layout a ``chat_layout`` / ``tokenizer`` setting means: ``"auto"`` (detect per text), ``"none"`` (text
    read as it is), or a :class:`ChatLayout` (a known name, one given, or the tokenizer's).

    Args:
        chat_layout: ``"auto"``, ``"none"``, a name of :data:`LAYOUTS` or a :class:`ChatLayout`.
        tokenizer: A tokenizer whose chat template and special tokens give the layout (with ``chat_layout``
            ``"auto"``); a string is loaded with ``AutoTokenizer.from_pretrained``.
        where: The setting's name in error messages.
    """
    if isinstance(chat_layout, ChatLayout):
        if tokenizer is not None:
            raise ValueError(f"{where}={chat_layout.name!r} and tokenizer= are both given: pass one.")
        return chat_layout
    choices = ["auto", "none", *LAYOUTS]
    if not isinstance(chat_layout, str) or chat_layout not in choices:
        raise ValueError(f"{where}={chat_layout!r} is not a chat layout: use one of {choices}, or pass tokenizer= "
                         "(the policy's tokenizer, whose chat template gives the layout).")
    if tokenizer is None:
        return LAYOUTS.get(chat_layout, chat_layout)
    if chat_layout != "auto":
        raise ValueError(f"{where}={chat_layout!r} and tokenizer= are both given: pass one (the tokenizer's chat "
                         "template gives the layout).")
    if isinstance(tokenizer, str):
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        except (OSError, ValueError) as err:
            raise ValueError(f"tokenizer={tokenizer!r} cannot be loaded ({type(err).__name__}: {str(err)[:200]}): "
                             "give the policy's folder or hub id (cached when offline), or --chat-layout.") from None
    if not hasattr(tokenizer, "apply_chat_template"):
        raise TypeError(f"tokenizer= must be a Hugging Face tokenizer (or its folder / hub id), got "
                        f"{type(tokenizer).__name__}.")
    return layout_from_tokenizer(tokenizer)

"""Entailment head: a sequence classifier (NLI cross-encoder) as an ARES backbone.

Rendering (ARES_SPEC section 3): premise = the included claims in their original order joined by newlines (no index
labels), hypothesis = the step, encoded as the tokenizer's sentence pair. Score = softmax probability of the
entailment class after dividing the logits by the calibrated temperature (a 1-logit head: sigmoid).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from .hf import HFBackbone, softmax_pick
from .hub import load_model_and_tokenizer
from .selection import PremiseSelector


__all__ = ["EntailmentHead", "entailment_index"]

_ENTAIL_NAMES = {"entailment", "entailed", "entails", "entail"}
_POSITIVE_NAMES = {"positive", "yes", "true", "correct", "label_1", "1"}  # accepted for 2-way heads only


def entailment_index(
    id2label: dict[Any, str] | None, num_labels: int, entailment_label: str | int | None = None
) -> int:
    """The class index of "entailed" in a classification head.

    Args:
        id2label: The config's ``id2label``.
        num_labels: The head's number of outputs (1 = a single logit read through a sigmoid).
        entailment_label: A label name (case-insensitive) or a class index; ``None`` finds ``entailment`` (or, for a
            2-way head, a positive class such as ``positive`` / ``LABEL_1``).

    Raises:
        ValueError: The label cannot be found; the message lists the head's labels and how to name one.
    """
    labels = {int(k): str(v) for k, v in (id2label or {}).items()}
    if num_labels == 1:
        return 0
    if isinstance(entailment_label, int) and not isinstance(entailment_label, bool):
        if not 0 <= entailment_label < num_labels:
            raise ValueError(
                f"entailment_label={entailment_label} is outside this {num_labels}-way head (0..{num_labels - 1})."
            )
        return entailment_label
    if entailment_label is not None:
        found = [i for i, name in labels.items() if name.lower() == str(entailment_label).lower()]
        if not found:
            raise ValueError(
                f"entailment_label={entailment_label!r} is not a label of this head ({labels}): name one of them or "
                "pass its index."
            )
        return found[0]
    names = _ENTAIL_NAMES | (_POSITIVE_NAMES if num_labels == 2 else set())
    found = [i for i, name in labels.items() if name.lower() in names]
    if len(found) == 1:
        return found[0]
    raise ValueError(
        f"cannot tell which class means 'entailed' in this {num_labels}-way head (id2label={labels}): pass "
        "entailment_label=<label name or index>, e.g. entailment_label='entailment' or entailment_label=1."
    )


def _selection_spec(selector: Any) -> str | None:
    """The string that :func:`~ares_rerank.backbones.selection.get_selector` turns back into ``selector``."""
    name = getattr(selector, "name", None)
    if name == "all":
        return "all"
    if name == "relevant":
        top_k = getattr(selector, "top_k", None)
        return "relevant" if top_k is None else f"relevant:{top_k}"
    return None  # a budgeted or custom selector: pass it again when loading


class EntailmentHead(HFBackbone):
    """An ``AutoModelForSequenceClassification`` (2-way, 3-way or 1-logit) scoring ``P(premises entail hypothesis)``.

    Args:
        model: A loaded sequence classifier in eval mode.
        tokenizer: Its tokenizer (sentence-pair encoding).
        entailment_label: Which class is "entailed" (name or index); ``None``: found from ``config.id2label``.
        temperature: Logits are divided by it before the softmax (from calibration; 1.0 = raw).
        **kwargs: Passed to :class:`~ares_rerank.backbones.hf.HFBackbone` (``batch_size``, ``max_length``,
            ``premise_selection``, ``cache_size``).

    Example:
        >>> head = EntailmentHead.from_pretrained("path/to/nli-model")  # doctest: +SKIP
        >>> premises = [["All men are mortal.", "Socrates is a man."]]
        >>> head.entailment_probs(premises, ["Socrates is mortal."])  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        entailment_label: str | int | None = None,
        temperature: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, tokenizer, **kwargs)
        config = model.config
        self.label_index = entailment_index(getattr(config, "id2label", None), int(config.num_labels), entailment_label)
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not (
            math.isfinite(temperature) and temperature > 0
        ):
            raise ValueError(
                f"temperature={temperature!r} must be a finite positive number (1.0 = uncalibrated; an infinite one "
                "makes every probability 0.5)."
            )
        self.temperature = float(temperature)
        # the sentence-pair encoding's keys this tokenizer produces (BERT: token_type_ids too; RoBERTa: none)
        self.input_keys = [k for k in ("input_ids", "token_type_ids") if k in tokenizer.model_input_names]

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        *,
        entailment_label: str | int | None = None,
        adapter: str | Path | None = None,
        base_model: str | Path | None = None,
        temperature: float | None = None,
        device: Any = "auto",
        dtype: Any = "auto",
        trust_remote_code: bool = False,
        batch_size: int = 16,
        max_length: int | None = None,
        premise_selection: str | PremiseSelector | None = None,
        cache_size: int = 100_000,
        overlong_steps: str = "error",
        model_kwargs: dict[str, Any] | None = None,
    ) -> EntailmentHead:
        """Load a sequence classifier (optionally with a peft adapter) and its calibration.

        ``name_or_path`` is a local folder or hub id, or a peft adapter folder (base from ``base_model`` or the
        adapter's config). The temperature is ``temperature`` if given, else ``ares_calibration.json`` beside the
        adapter or the weights (``{"temperature": T, "entailment_label": ...}``), else 1.0. ``premise_selection`` and
        ``max_length`` left at ``None`` come from the same file when it names them (a head trained on selected
        premises must see selected premises), else ``"all"`` and the model's window. A bare encoder (e.g.
        all-MiniLM-L6-v2) gets a new, randomly initialised 2-way head: fine-tune it before trusting its scores.
        """
        model, tokenizer, calibration = load_model_and_tokenizer(
            name_or_path, "AutoModelForSequenceClassification", device=device, dtype=dtype, adapter=adapter,
            base_model=base_model, trust_remote_code=trust_remote_code, model_kwargs=model_kwargs,
        )
        head = cls(
            model,
            tokenizer,
            entailment_label=entailment_label if entailment_label is not None else calibration.get("entailment_label"),
            temperature=temperature if temperature is not None else float(calibration.get("temperature", 1.0)),
            batch_size=batch_size,
            max_length=max_length if max_length is not None else calibration.get("max_length"),
            premise_selection=premise_selection or calibration.get("premise_selection", "all"),
            cache_size=cache_size,
            overlong_steps=overlong_steps,
        )
        head.source = str(adapter or name_or_path)
        return head

    def save_pretrained(self, folder: str | Path, save_tokenizer: bool = True) -> Path:
        """Save model (or adapter), tokenizer and ``ares_calibration.json`` so :meth:`from_pretrained` restores all.

        The calibration file records the temperature, the entailment label, the window and (when it is a named
        one) the premise selection; keys already in the file (e.g. training metadata) are kept.
        """
        from ..calibration import write_calibration

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if hasattr(self.model, "peft_config"):
            # An adapter never resizes the vocabulary here; "auto" would look the base model up on the Hub.
            self.model.save_pretrained(folder, save_embedding_layers=False)
        else:
            self.model.save_pretrained(folder)
        if save_tokenizer:
            self.tokenizer.save_pretrained(folder)
        calibration = {"temperature": self.temperature, "entailment_label": self.label_index,
                       "max_length": self.max_length}
        spec = _selection_spec(self.selector)
        if spec is not None:
            calibration["premise_selection"] = spec
        write_calibration(folder, calibration)
        return folder

    def push_to_hub(self, repo_id: str, *, private: bool = True, token: str | None = None,
                    commit_message: str = "Upload ARES entailment head") -> str:
        """Save the head (weights or adapter, tokenizer, ``ares_calibration.json``) and upload it to the Hub.

        Needs network access and a token with write rights (``huggingface-cli login`` or ``token=``).

        Returns:
            The URL of the commit.
        """
        import tempfile

        from huggingface_hub import HfApi

        api = HfApi(token=token)
        api.create_repo(repo_id, private=private, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            self.save_pretrained(tmp)
            info = api.upload_folder(repo_id=repo_id, folder_path=tmp, commit_message=commit_message)
        return str(getattr(info, "commit_url", info))

    def logits(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> Any:
        """Raw logits (before the temperature), shape ``(n, num_labels)`` as numpy, for calibration.

        Same premise selection, rendering and window policy as :meth:`entailment_probs`; no cache.
        """
        import numpy as np
        import torch

        if len(premises) != len(hypotheses):
            raise ValueError(f"logits got {len(premises)} premise lists for {len(hypotheses)} hypotheses.")
        items = [self.encode_pair(claims, hypothesis) for claims, hypothesis in zip(premises, hypotheses)]
        order = sorted(range(len(items)), key=lambda i: len(items[i]["input_ids"]))
        out = np.zeros((len(items), int(self.model.config.num_labels)), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                out[chunk] = self.model(**self.pad([items[i] for i in chunk])).logits.float().cpu().numpy()
        return out

    def _render(self, claims: list[str], roles: tuple | None, hypothesis: str, kept: list[int]) -> dict[str, Any]:
        premise = "\n".join(claims[i] for i in kept)
        encoded = self.tokenizer(premise, hypothesis, truncation=False, verbose=False)  # the window policy fits it
        return {key: encoded[key] for key in self.input_keys if key in encoded}

    def _score_batch(self, items: list[dict[str, Any]]) -> list[float]:
        logits = self.model(**self.pad(items)).logits  # (batch, num_labels)
        return softmax_pick(logits, self.label_index, self.temperature)

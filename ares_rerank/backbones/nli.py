"""Entailment head: a sequence classifier (NLI cross-encoder) as an ARES backbone.

Rendering (ARES_SPEC section 3): premise = the included claims in their original order joined by newlines (no index
labels), hypothesis = the step, encoded as the tokenizer's sentence pair. Score = softmax probability of the
entailment class after dividing the logits by the calibrated temperature (a 1-logit head: sigmoid).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Sequence

from ..utils.io import local_names, staging_folder
from .card import model_card
from .hf import HFBackbone, softmax_pick
from ..calibration import CALIBRATION_FILE, check_scale
from .hub import DEFAULT_HEAD_DIR, hub_model_id, load_model_and_tokenizer
from .selection import PremiseSelector


__all__ = ["EntailmentHead", "entailment_index", "model_card"]

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
    if name in ("relevant", "relevant-words"):
        top_k = getattr(selector, "top_k", None)
        return name if top_k is None else f"{name}:{top_k}"
    return None  # a budgeted or custom selector: pass it again when loading


class EntailmentHead(HFBackbone):
    """An ``AutoModelForSequenceClassification`` (2-way, 3-way or 1-logit) scoring ``P(premises entail hypothesis)``.

    Args:
        model: A loaded sequence classifier in eval mode.
        tokenizer: Its tokenizer (sentence-pair encoding).
        entailment_label: Which class is "entailed" (name or index); ``None``: found from ``config.id2label``.
        temperature: Logits are divided by it before the softmax (from calibration; 1.0 = raw).
        bias: Added to the entailment class's scaled logit (a Platt calibration; 0.0 = none).
        calibration: The ``ares_calibration.json`` record the head comes with (metrics, training provenance): kept,
            under the head's current temperature, label, window and selection, by :meth:`save_pretrained`.
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
        calibration: dict[str, Any] | None = None,
        bias: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if calibration is not None and not isinstance(calibration, dict):
            raise TypeError(
                f"calibration={type(calibration).__name__} must be a dict (an ares_calibration.json record) or None."
            )
        #: The calibration record the head was loaded with (metrics, training provenance); save_pretrained keeps it.
        self.calibration = dict(calibration or {})
        config = model.config
        self.label_index = entailment_index(getattr(config, "id2label", None), int(config.num_labels), entailment_label)
        self.temperature, self.bias = check_scale(temperature, bias)
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
        bias: float | None = None,
        device: Any = "auto",
        dtype: Any = "auto",
        trust_remote_code: bool = False,
        batch_size: int = 16,
        max_length: int | None = None,
        premise_selection: str | PremiseSelector | None = None,
        cache_size: int = 100_000,
        overlong_steps: str = "error",
        window: str = "relevant",
        prefix_cache: bool | None = None,
        model_kwargs: dict[str, Any] | None = None,
        revision: str | None = None,
        token: str | bool | None = None,
        cache_dir: str | Path | None = None,
        local_files_only: bool = False,
    ) -> EntailmentHead:
        """Load a sequence classifier (optionally with a peft adapter) and its calibration.

        ``name_or_path`` is a local folder or hub id, or a peft adapter folder (base from ``base_model`` or the
        adapter's config). The temperature is ``temperature`` if given, else ``ares_calibration.json`` beside the
        adapter or the weights (``{"temperature": T, "entailment_label": ...}``), else 1.0; the entailment ``bias``
        likewise (0.0 unless a Platt calibration recorded one; giving ``temperature`` alone resets it to 0.0).
        ``premise_selection`` and ``max_length`` left at ``None`` come from the same file when it names them (a head
        trained on selected premises must see selected premises), else ``"all"`` and the model's window. A bare
        encoder (e.g. all-MiniLM-L6-v2) gets a new, randomly initialised 2-way head: fine-tune it before trusting its
        scores.

        From a hub id the calibration file is fetched with the weights, from the same commit, with the same
        ``revision``, ``token``, ``cache_dir`` and ``local_files_only`` (passed to every download, as in
        transformers); a repo without the file loads uncalibrated. Keys of the file beyond those four (metrics,
        training record) are kept in :attr:`calibration` and written again by :meth:`save_pretrained`. The other
        keywords are :class:`~ares_rerank.backbones.hf.HFBackbone`'s (``prefix_cache`` stays off for an encoder).
        """
        model, tokenizer, calibration = load_model_and_tokenizer(
            name_or_path, "AutoModelForSequenceClassification", device=device, dtype=dtype, adapter=adapter,
            base_model=base_model, trust_remote_code=trust_remote_code, model_kwargs=model_kwargs,
            revision=revision, token=token, cache_dir=cache_dir, local_files_only=local_files_only,
        )
        given = {"entailment_label": entailment_label, "max_length": max_length, "premise_selection": premise_selection}
        from_file = [key for key, value in given.items() if value is None and key in calibration]
        try:
            head = cls(
                model,
                tokenizer,
                entailment_label=entailment_label if entailment_label is not None else calibration.get(
                    "entailment_label"),
                temperature=temperature if temperature is not None else float(calibration.get("temperature", 1.0)),
                bias=bias if bias is not None else 0.0 if temperature is not None else float(
                    calibration.get("bias", 0.0)),
                batch_size=batch_size,
                max_length=max_length if max_length is not None else calibration.get("max_length"),
                premise_selection=premise_selection if premise_selection is not None else calibration.get(
                    "premise_selection", "all"),
                cache_size=cache_size,
                overlong_steps=overlong_steps,
                window=window,
                prefix_cache=prefix_cache,
                calibration=calibration,
            )
        except ValueError as err:  # a value the user never passed: name the file it came from
            keys = [key for key in from_file if f"{key}=" in str(err)]
            if not keys:
                raise
            raise ValueError(f"{CALIBRATION_FILE} of {str(adapter or name_or_path)!r}: {err} Fix {keys[0]!r} in that "
                             f"file, or pass {keys[0]}= to override it.") from err
        head.source = str(adapter or name_or_path)
        return head

    def save_pretrained(self, folder: str | Path, save_tokenizer: bool = True, *, base_model: str | None = None,
                        repo_id: str | None = None) -> Path:
        """Save model (or adapter), tokenizer, ``ares_calibration.json`` and a model card (``README.md``), so
        :meth:`from_pretrained` restores the head and the Hub shows what it is.

        The calibration file records the temperature, the entailment label, the window and (when it is a named one)
        the premise selection, over the record the head was loaded with (:attr:`calibration`: metrics and training
        provenance are kept); a calibration file already in ``folder`` is replaced, not merged (another head's
        metrics or selection would describe this one). A custom premise selector is not saved (a warning says so).
        ``README.md`` is written from that record (:func:`model_card`), replacing any card in ``folder`` (peft
        writes a placeholder).

        Args:
            folder: Created if needed.
            save_tokenizer: Also save the tokenizer (an adapter on a base whose tokenizer fits may leave it out).
            base_model: The Hub id of the base model, for the card and an adapter's ``base_model_name_or_path``
                (default: what the adapter or the calibration record names; the packaged encoder is recorded as
                ``sentence-transformers/all-MiniLM-L6-v2``).
            repo_id: The Hub id the card's loading examples name (:meth:`push_to_hub` passes its own).

        Returns:
            ``folder`` as a Path.
        """
        folder = Path(folder)
        if folder.resolve() == DEFAULT_HEAD_DIR.resolve():  # e.g. save_pretrained(head.source) on the default head
            raise ValueError(f"save_pretrained({str(folder)!r}) would overwrite the shipped default head inside the "
                             "installed package: save to a folder of your own (then load_backbone('that/folder')).")
        if (folder / CALIBRATION_FILE).is_symlink():
            raise ValueError(f"{folder / CALIBRATION_FILE} is a symlink: save_pretrained never writes through or "
                             "replaces a link. Save to another folder (or remove the link).")
        folder.mkdir(parents=True, exist_ok=True)
        # Everything is written beside the folder first and moved in at the end: an interrupted save leaves the
        # folder as it was, never new weights beside an earlier head's calibration.
        staging = staging_folder(folder, "saving")  # a killed save's staging folder is removed first
        try:
            self._save_into(staging, save_tokenizer, base_model, repo_id, folder)
            _move_into(staging, folder, adapter=hasattr(self.model, "peft_config"))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return folder

    def _save_into(self, folder: Path, save_tokenizer: bool, base_model: str | None, repo_id: str | None,
                   target: Path) -> None:
        """Write the model (or adapter), tokenizer, calibration and card into ``folder``, the staging folder of a
        save to ``target``."""
        from ..calibration import write_calibration

        adapter = hasattr(self.model, "peft_config")
        if adapter:
            # An adapter never resizes the vocabulary here; "auto" would look the base model up on the Hub.
            self.model.save_pretrained(folder, save_embedding_layers=False)
            base_model = _record_adapter_base(folder, base_model)
        else:
            self.model.save_pretrained(folder)
            base_model = base_model or hub_model_id(self.calibration.get("base_model"))
        if save_tokenizer:
            self.tokenizer.save_pretrained(folder)
        record = {**self.calibration, "temperature": self.temperature, "bias": self.bias,
                  "entailment_label": self.label_index,
                  "max_length": self.max_length}
        record.pop("premise_selection", None)
        spec = _selection_spec(self.selector)
        if spec is not None:
            record["premise_selection"] = spec
        elif self.selector is not None:
            warnings.warn(f"save_pretrained({str(target)!r}): the head's premise selector {self.selector!r} is not a "
                          "named rule and is not saved; pass premise_selection= again when loading the saved head.",
                          stacklevel=3)
        if base_model is not None:
            record["base_model"] = base_model
        if repo_id is not None:  # for the Hub: a folder's name says what it was, not whose machine it was on
            record = local_names(record)
            if adapter:
                _publish_adapter_base(folder)
        write_calibration(folder, record, replace=True)  # this head's record, not a merge with another head's
        config = getattr(self.model, "config", None)
        labels = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
        lora_r = _lora_rank(self.model) if adapter else None
        card = model_card(record, base_model=base_model, adapter=adapter, repo_id=repo_id, lora_r=lora_r,
                          label=labels.get(self.label_index))
        (folder / "README.md").write_text(card, encoding="utf-8")

    def push_to_hub(self, repo_id: str, *, commit_message: str | None = None, commit_description: str | None = None,
                    private: bool | None = None, token: str | bool | None = None, revision: str | None = None,
                    create_pr: bool = False, base_model: str | None = None) -> str:
        """Save the head (weights or adapter, tokenizer, ``ares_calibration.json``, model card) and upload it.

        Defaults as transformers' ``push_to_hub``: the repo is created if needed (``private=None``: the Hub's
        default visibility, public unless your organization says otherwise), a ``revision`` branch is created if
        needed, ``create_pr=True`` opens a pull request instead of committing. Needs network access and a token with
        write rights (``hf auth login`` or ``token=``).

        Args:
            repo_id: ``"owner/name"`` (or ``"name"`` under your account).
            commit_message: Default ``"Upload ARES entailment head"``.
            commit_description: The commit's longer description.
            private: ``True`` / ``False`` for a new repo; ``None`` leaves it to the Hub (an existing repo is unchanged).
            token: Hub token (default: the saved login).
            revision: The branch to push to (default: main).
            create_pr: Open a pull request instead of committing.
            base_model: See :meth:`save_pretrained`.

        Returns:
            The URL of the commit (or pull request).
        """
        import tempfile

        from huggingface_hub import HfApi

        api = HfApi(token=token)
        repo_id = getattr(api.create_repo(repo_id, private=private, exist_ok=True), "repo_id", repo_id)
        if revision is not None and not revision.startswith("refs/pr"):
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            self.save_pretrained(tmp, base_model=base_model, repo_id=repo_id)
            info = api.upload_folder(repo_id=repo_id, folder_path=tmp,
                                     commit_message=commit_message or "Upload ARES entailment head",
                                     commit_description=commit_description, revision=revision, create_pr=create_pr)
        return str(getattr(info, "pr_url", None) or getattr(info, "commit_url", info))

    def logits(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> Any:
        """Raw logits (before the temperature), shape ``(n, num_labels)`` as numpy, for calibration.

        Same premise selection, rendering and window policy as :meth:`entailment_probs`; no cache.
        """
        import numpy as np
        import torch

        if len(premises) != len(hypotheses):
            raise ValueError(f"logits got {len(premises)} premise lists for {len(hypotheses)} hypotheses.")
        items = [self.encode_pair(claims, hypothesis) for claims, hypothesis in zip(premises, hypotheses)]
        out = np.zeros((len(items), int(self.model.config.num_labels)), dtype=np.float64)
        with torch.inference_mode():
            for chunk in self.batch_plan(items):
                out[chunk] = self.model(**self.pad([items[i] for i in chunk])).logits.float().cpu().numpy()
        return out

    def _render(self, claims: list[str], roles: tuple | None, hypothesis: str, kept: list[int]) -> dict[str, Any]:
        premise = "\n".join(claims[i] for i in kept)
        encoded = self.tokenizer(premise, hypothesis, truncation=False, verbose=False)  # the window policy fits it
        return {key: encoded[key] for key in self.input_keys if key in encoded}

    def _score_batch(self, items: list[dict[str, Any]]) -> list[float]:
        logits = self.model(**self.pad(items)).logits  # (batch, num_labels)
        return softmax_pick(logits, self.label_index, self.temperature, self.bias)


def _move_into(staging: Path, folder: Path, *, adapter: bool) -> None:
    """Move a saved head from ``staging`` into ``folder``: the old calibration goes first and the new one comes last,
    so a crash in between leaves an uncalibrated head (visible: temperature 1), never a mismatched one; a full save
    removes an earlier adapter's files (they would be loaded instead)."""
    (folder / CALIBRATION_FILE).unlink(missing_ok=True)
    if not adapter:
        for stale in ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"):
            (folder / stale).unlink(missing_ok=True)
    for path in sorted(staging.iterdir()):
        if path.name == CALIBRATION_FILE:
            continue
        target = folder / path.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(path, target)
    os.replace(staging / CALIBRATION_FILE, folder / CALIBRATION_FILE)


def _record_adapter_base(folder: Path, base_model: str | None) -> str | None:
    """Write the base's Hub id into a saved adapter's ``adapter_config.json`` (``base_model``, else the Hub id of what
    peft recorded: the packaged encoder's folder or name becomes ``sentence-transformers/all-MiniLM-L6-v2``), so
    plain peft finds the base; return it (``None``: a local base with no known Hub id, left as peft wrote it)."""
    path = folder / "adapter_config.json"
    config = json.loads(path.read_text())
    recorded = config.get("base_model_name_or_path")
    base = base_model or hub_model_id(recorded)
    if base is not None and base != recorded:
        config["base_model_name_or_path"] = base
        path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return base


def _publish_adapter_base(folder: Path) -> None:
    """A local base folder in a saved adapter's ``adapter_config.json`` reduced to its name, for the Hub (peft
    records the path it loaded the base from)."""
    path = folder / "adapter_config.json"
    config = json.loads(path.read_text())
    recorded = config.get("base_model_name_or_path")
    if isinstance(recorded, str) and local_names(recorded) != recorded:
        config["base_model_name_or_path"] = local_names(recorded)
        path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _lora_rank(model: Any) -> int | None:
    config = next(iter(getattr(model, "peft_config", {}).values()), None)
    return getattr(config, "r", None)

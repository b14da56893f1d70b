"""Command-line options shared by the commands, each defined once.

- ARES estimator options are generated from :class:`~ares_rerank.estimator.AresConfig`'s fields and their help text
  (:func:`add_config_arguments`, :func:`config_from_args`), so ``score``, ``rank``, ``eval`` and
  ``python -m ares_rerank.distributed`` accept the same flags with the same defaults.
- Backbone options (:func:`add_backbone_arguments`, :func:`backbone_from_args`): ``--backbone``, ``--kind`` and
  ``--backbone-options`` (a JSON object of :func:`~ares_rerank.load_backbone` keyword arguments, e.g.
  ``'{"trust_remote_code": true}'``).
- Input / output and step splitting (:func:`add_io_arguments`, :func:`add_chain_text_arguments`,
  :func:`step_separator`): one escaping rule for ``--step-separator`` everywhere.

About 510 lines: every flag two commands share is defined here once, so the vocabulary cannot drift.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..chain import parse_separator
from ..utils.io import check_input_file

__all__ = [
    "CHAT_TEMPLATE_CHOICES",
    "ENGINES",
    "add_backbone_arguments",
    "add_chain_text_arguments",
    "add_chat_layout_arguments",
    "add_config_arguments",
    "add_dataclass_arguments",
    "add_generator_arguments",
    "add_io_arguments",
    "add_output_arguments",
    "add_prompt_key_argument",
    "add_rerank_arguments",
    "add_run_arguments",
    "backbone_from_args",
    "backbone_options",
    "chat_layout_options",
    "check_generator_arguments",
    "config_from_args",
    "dataclass_from_args",
    "input_path",
    "keep_partial_on_failure",
    "open_results",
    "positive",
    "rerank_config_from_args",
    "resume_results",
    "step_generator_from_args",
    "step_separator",
    "window_notice",
]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _argparse_type(annotation: Any) -> tuple[Any, dict[str, Any]]:
    """``(type, extra add_argument kwargs)`` for a dataclass field annotation (Optional and list[...] unwrapped)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = args[0]
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0], {"nargs": "+"}
    return annotation, {}


def add_config_arguments(parser: argparse.ArgumentParser, exclude: Sequence[str] = ()) -> None:
    """One flag per :class:`AresConfig` field (``max_masks`` -> ``--max-masks``), with the field's help and default.

    Args:
        parser: The parser (the options go in an "ARES estimator" group).
        exclude: Field names this command does not take (e.g. ``threshold`` where it has no meaning).

    ``--threshold`` is :class:`~ares_rerank.rerank.config.RerankConfig`'s (``AresConfig(threshold=)`` is deprecated),
    added here with the estimator's flags, where every command has always taken it.
    """
    from ..estimator.config import AresConfig

    add_dataclass_arguments(parser, AresConfig, "ARES estimator (AresConfig fields)", (*exclude, "threshold"))
    if "threshold" not in exclude:
        add_rerank_arguments(parser, ("threshold",))


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, cls: type, title: str, exclude: Sequence[str] = ()
) -> None:
    """One flag per field of the dataclass ``cls`` (``max_batch`` -> ``--max-batch``), in a group named ``title``,
    with the field's ``metadata["help"]`` and default; its other metadata (``choices``, ``nargs``) goes to argparse;
    a ``bool`` field that defaults to ``False`` is a switch. :func:`dataclass_from_args` builds the instance back."""
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(cls):
        if field.name in exclude:
            continue
        kind, extra = _argparse_type(hints[field.name])
        extra.update({k: v for k, v in field.metadata.items() if k != "help"})
        default = field.default
        if default is dataclasses.MISSING:
            default = None if field.default_factory is dataclasses.MISSING else field.default_factory()
        text = field.metadata.get("help", "").replace("%", "%%")  # argparse %-formats help ("25% fewer" broke it)
        if kind is bool and default is False:  # a switch (--filter-duplicates), not a flag that takes a value
            group.add_argument(_flag(field.name), dest=field.name, action="store_true", help=text, **extra)
            continue
        group.add_argument(_flag(field.name), dest=field.name, type=kind, default=default,
                           help=f"{text} (default: {default})", **extra)


def config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`AresConfig` of parsed options (fields a command did not add keep their defaults; ``--threshold``
    is RerankConfig's, not passed to the deprecated ``AresConfig.threshold``)."""
    from ..estimator.config import AresConfig

    return dataclass_from_args(AresConfig, argparse.Namespace(**{k: v for k, v in vars(args).items()
                                                                 if k != "threshold"}))


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    """The dataclass ``cls`` built from parsed options (:func:`add_dataclass_arguments`); fields without a flag keep
    their defaults, and ``__post_init__`` checks the values."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)})


def add_backbone_arguments(parser: argparse.ArgumentParser) -> None:
    """``--backbone``, ``--kind`` and ``--backbone-options``: what :func:`backbone_from_args` loads; one default
    for every command (score, rank, search, eval, serve: the shipped head)."""
    group = parser.add_argument_group("backbone")
    group.add_argument("--backbone", default="default",
                       help="'default' (the shipped head), a model folder or hub id, a server URL (with --kind), "
                            "'claimtrees-oracle', or 'package.module:attr' (default: default).")
    from ..backbones.loading import KINDS

    group.add_argument("--kind", default=None, choices=KINDS,
                       help="Backbone kind for load_backbone; detected from a model folder's config when left out.")
    group.add_argument("--backbone-options", default=None, metavar="JSON",
                       help='A JSON object of load_backbone keyword arguments, e.g. \'{"trust_remote_code": true}\' '
                            'or \'{"overlong_steps": "truncate"}\'.')
    from ..backbones.devices import DTYPES

    group.add_argument("--dtype", default=None, choices=DTYPES,
                       help="Weights and compute dtype of a local model (load_backbone's dtype). Default auto: "
                            "bfloat16 on a GPU that has it, float32 on a CPU; bfloat16 is about 1.7x faster on a CPU "
                            "with native bf16 (avx512_bf16 / amx_bf16), see docs/SCALING.md.")


def backbone_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--backbone-options`` as a dict (empty when not given), with ``--dtype`` in it when given."""
    options = _json_options(args.backbone_options)
    dtype = getattr(args, "dtype", None)
    if dtype is not None:
        if "dtype" in options and options["dtype"] != dtype:
            raise ValueError(f"--dtype={dtype} and --backbone-options dtype={options['dtype']!r} disagree: give one.")
        options["dtype"] = dtype
    return options


def _json_options(raw: str | None, flag: str = "--backbone-options") -> dict[str, Any]:
    if not raw:
        return {}
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as err:  # not echoed: text that is not JSON cannot be told apart from an api_key
        raise ValueError(f"{flag} is not JSON ({err.msg} at character {err.pos} of {len(raw)}); e.g. "
                         "'{\"trust_remote_code\": true}'.") from None
    if not isinstance(options, dict):  # not echoed either: a list or a string may be the bare key
        raise ValueError(f"{flag} must be a JSON object, not a JSON {_JSON_TYPES.get(type(options), 'value')}: e.g. "
                         "'{\"trust_remote_code\": true}'.")
    return options


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def backbone_from_args(args: argparse.Namespace, **extra: Any) -> Any:
    """Load ``--backbone`` with ``--kind`` and ``--backbone-options`` (plus ``extra`` keyword arguments)."""
    from ..backbones.loading import load_backbone

    given = backbone_options(args)
    try:
        return load_backbone(args.backbone, kind=args.kind, **{**given, **extra})
    except TypeError as err:
        if "unexpected keyword argument" not in str(err) or not given:
            raise
        from ..utils.http import redact

        raise ValueError(f"--backbone {redact(args.backbone)} does not take the load options {sorted(given)} "
                         f"({redact(str(err))}): drop "
                         "them from --backbone-options / --dtype (they apply to model backbones).") from err


def add_io_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """The input JSONL file (positional or ``--input``; ``-`` = standard input) and ``--output``."""
    parser.add_argument("input_file", nargs="?", type=Path, default=None, metavar="INPUT",
                        help=f"JSONL file of {what} ('-' for standard input); or give --input.")
    parser.add_argument("--input", type=Path, default=None, help="The same as the positional INPUT.")
    add_output_arguments(parser)


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--output``, ``--no-resume`` and ``--overwrite``: where :func:`open_results` writes (``add_io_arguments``
    adds them with the input; ``search`` reads its input from ``--problems``)."""
    parser.add_argument("--output", type=Path, default=None,
                        help="Write JSONL results here (default, or '-': standard output). Checked before any work "
                             "(an existing file only with --overwrite); results go batch by batch to .<name>.partial "
                             "beside it and replace the file only when complete, so a stopped run leaves the old file "
                             "intact and a rerun resumes. A stream (/dev/stdout, a FIFO) is written through.")
    parser.add_argument("--no-resume", action="store_true",
                        help="Discard the partial results of an earlier stopped run instead of continuing them.")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace an --output file that already exists (refused otherwise, before any work).")


def input_path(args: argparse.Namespace) -> Path:
    """The one input path of :func:`add_io_arguments` (positional or ``--input``, not both)."""
    if args.input_file is not None and args.input is not None and args.input_file != args.input:
        raise ValueError(f"two inputs given (INPUT={str(args.input_file)!r} and --input={str(args.input)!r}): "
                         "give one.")
    path = args.input if args.input is not None else args.input_file
    if path is None:
        raise ValueError("no input: give a JSONL file (positional INPUT or --input), or '-' for standard input.")
    check_input_file(path)  # before --output's folder is created or the backbone loads
    return path


def add_rerank_arguments(parser: Any, fields: Sequence[str]) -> None:
    """The flags of the :class:`~ares_rerank.rerank.config.RerankConfig` ``fields`` (``prompt_split`` ->
    ``--prompt-split``), with the field's help, default and choices: every reranker flag is defined there, once.
    ``parser`` may be an argument group."""
    from ..rerank.config import RerankConfig

    hints = typing.get_type_hints(RerankConfig)
    by_name = {f.name: f for f in dataclasses.fields(RerankConfig)}
    for name in fields:
        field = by_name[name]
        kind, extra = _argparse_type(hints[name])
        extra.update({k: v for k, v in field.metadata.items() if k != "help"})
        shown = field.default if field.default is not None else "none"
        text = field.metadata.get("help", "").replace("%", "%%")
        parser.add_argument(_flag(name), dest=name, type=kind, default=field.default,
                            help=f"{text} (default: {shown})", **extra)


def rerank_config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~ares_rerank.rerank.config.RerankConfig` of parsed options (fields a command did not add keep
    their defaults), checked."""
    from ..rerank.config import RerankConfig

    return dataclass_from_args(RerankConfig, args)


def add_chain_text_arguments(parser: argparse.ArgumentParser) -> None:
    """How completion text becomes steps and prompt text becomes base claims (``--step-separator``,
    ``--prompt-split``)."""
    add_rerank_arguments(parser, ("step_separator", "prompt_split"))


def add_chat_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """``--chat-layout`` / ``--tokenizer``: how prompts and completions that a chat template rendered are read back
    (:mod:`ares_rerank.chat_templates`; ``AresReranker(chat_layout=..., tokenizer=...)``)."""
    add_rerank_arguments(parser, ("chat_layout", "tokenizer"))


def chat_layout_options(args: argparse.Namespace) -> dict[str, Any]:
    """``AresReranker``'s ``chat_layout`` / ``tokenizer`` keywords from :func:`add_chat_layout_arguments`' flags,
    checked (and the tokenizer loaded) before the backbone loads."""
    from ..chat_templates import resolve_layout

    rerank_config_from_args(args)  # --chat-layout and --tokenizer together are refused there
    return {"chat_layout": resolve_layout(args.chat_layout, args.tokenizer, "--chat-layout")}


def step_separator(text: str) -> str | None:
    """The separator ``--step-separator`` means (:func:`~ares_rerank.chain.parse_separator`)."""
    return parse_separator(text)


def add_run_arguments(parser: argparse.ArgumentParser, batch_size: int, unit: str) -> None:
    """``--batch-size`` and ``--no-progress``."""
    parser.add_argument("--batch-size", type=int, default=batch_size,
                        help=f"{unit} per estimator call (default: {batch_size}).")
    parser.add_argument("--no-progress", action="store_true", help="No progress bar.")


def positive(value: Any, flag: str) -> None:
    """Raise a one-line error unless ``value`` is None or a positive integer."""
    if value is not None and (not isinstance(value, int) or value < 1):
        raise ValueError(f"{flag}={value} must be a positive integer.")


# Options that do not change a single result: a run resumed with other values continues the same results.
_NOT_RESULT_SETTINGS = {"output", "no_resume", "overwrite", "no_progress", "batch_size", "input", "input_file",
                        "command", "problems"}


class _StreamOutput:
    """Results streamed to standard output, or to an ``--output`` that is a stream (``/dev/stdout``, a FIFO): written
    through as they come, nothing to resume, no partial file beside it."""

    count = 0

    def __init__(self, path: str | None = None) -> None:
        from ..utils.io import open_stream

        self.handle = sys.stdout if path is None else open_stream(path)  # a FIFO only once it has a reader
        self.owned = path is not None  # standard output is not ours to close (even while it is redirected)

    def resume(self, keys: Sequence[str]) -> int:
        return 0

    def append(self, records: Sequence[Any], keys: Sequence[str] = ()) -> None:
        self.handle.writelines(json.dumps(record) + "\n" for record in records)
        self.handle.flush()

    def finish(self) -> None:
        self.close()

    def close(self) -> None:
        if self.owned and not self.handle.closed:
            self.handle.close()


def open_results(args: argparse.Namespace, source: Path, sampling: Sequence[str] = ()) -> Any:
    """Where a command's JSONL results go: ``--output`` (checked now, before any work; resumable, see
    :class:`~ares_rerank.utils.io.ResumableOutput`, locked against a second run on the same file; a stream is written
    through) or standard output. Once the inputs are read, :func:`resume_results` says how many are done.
    ``sampling`` names options otherwise left out of the settings a resume must match that change this command's
    results (``search``: ``batch_size``, which seeds each batch)."""
    from ..utils.io import ResumableOutput, check_output_path, file_signature, is_stream

    if args.output is None or str(args.output) == "-":  # '-' is standard output, as an input of '-' is stdin
        return _StreamOutput()
    if is_stream(args.output):
        return _StreamOutput(args.output)
    check_output_path(args.output, inputs=[source])
    if Path(args.output).exists() and not args.overwrite:
        raise ValueError(f"--output {str(args.output)!r} already exists: pass --overwrite to replace it, or name "
                         "another file.")
    settings = {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_RESULT_SETTINGS or k in sampling}
    settings.update(command=args.command, input=file_signature(source))
    return ResumableOutput(args.output, settings, resume=not args.no_resume and str(source) != "-")


def window_notice(backbone: Any) -> str | None:
    """What the backbone's input window left out of what it scored (``backbone.stats``), as one line for stderr, or
    ``None`` when it read everything: the certificate bounds the estimate for the inputs the backbone read, so a
    window that dropped premises must be said, not hidden behind "exact, bound 0"."""
    stats = getattr(backbone, "stats", None)
    windowed, dropped = getattr(stats, "pairs_windowed", 0), getattr(stats, "premises_dropped", 0)
    truncated = getattr(stats, "hypotheses_truncated", 0)
    if not windowed and not truncated:
        return None
    parts = [f"dropped {dropped} premises (least relevant first) from {windowed} inputs"] if windowed else []
    parts += [f"cut {truncated} steps to their first tokens"] if truncated else []
    return (f"note: the backbone's input window {' and '.join(parts)}: those scores judge what it read. A premise "
            "selection (--backbone-options '{\"premise_selection\": \"relevant:6\"}') keeps the claims that share "
            "names with each step within the window; a model with a longer window reads more.")


def resume_results(results: Any, keys: Sequence[str]) -> int:
    """How many inputs (of ``keys``, one :func:`~ares_rerank.utils.io.record_key` each) an earlier stopped run already
    answered; lines of its partial file that answer no input in order (a duplicated line, one for another input) are
    cut away, and a note on stderr says how many."""
    done = results.resume(keys)
    if getattr(results, "dropped", 0):
        print(f"note: dropped {results.dropped} lines of {str(results.partial)!r} that do not answer the next inputs "
              f"in order (torn, duplicated or for other inputs); {done} results are kept and the rest is redone.",
              file=sys.stderr)
    return done


@contextlib.contextmanager
def keep_partial_on_failure(results: Any) -> Iterator[None]:
    """Say where the partial results of a stopped run are (they stay for a rerun to resume); release the results'
    lock however the block ends."""
    try:
        yield
    except BaseException:
        if getattr(results, "count", 0) and hasattr(results, "partial"):
            print(f"ares-rerank: {results.count} results so far are kept in {results.partial}; rerun the same command "
                  "to resume (--no-resume starts over).", file=sys.stderr)
        raise
    finally:
        results.close()


def add_aggregate_argument(parser: Any) -> None:
    """``--aggregate``: how step scores become one score per chain (``rank``, ``serve``, ``search``, ``eval --task
    bon``)."""
    add_rerank_arguments(parser, ("aggregate",))


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--selection`` and ``--answer-fn``: answer-aware best-of-N (``rank``, ``search``)."""
    add_rerank_arguments(parser, ("selection", "answer_fn"))


def add_answer_fn_argument(parser: Any) -> None:
    """``--answer-fn``: how final answers are read and compared (``eval --task bon``)."""
    add_rerank_arguments(parser, ("answer_fn",))


def answer_fn_from_args(value: str) -> Any:
    """``--answer-fn``: a built-in name, or ``module:function`` imported (a ValueError naming the flag otherwise)."""
    from ..rerank.answers import answer_fn_from_spec

    return answer_fn_from_spec(value)


def add_prompt_key_argument(parser: argparse.ArgumentParser) -> None:
    """``--prompt-key``: the record key that holds each prompt (``rank``, ``search``)."""
    parser.add_argument("--prompt-key", default="prompt",
                        help="The key of each input record that holds its prompt: a string or a list of messages "
                             "(default: prompt).")


#: ``--engine`` choices: what generates the steps of ``search``.
ENGINES = ("transformers", "vllm")
#: ``--chat-template`` choice -> the ``use_chat_template`` of :func:`~ares_rerank.search.step_generator`.
CHAT_TEMPLATE_CHOICES = {"auto": None, "always": True, "never": False}


def add_generator_arguments(parser: argparse.ArgumentParser) -> None:
    """How the policy model (``args.model``) writes steps (``search``); :func:`check_generator_arguments` checks
    them before any work, :func:`step_generator_from_args` loads the model."""
    from ..backbones.devices import DTYPES

    group = parser.add_argument_group("generation (MODEL writes the steps)")
    group.add_argument("--engine", default="transformers", choices=ENGINES,
                       help="transformers: model.generate, each row stopped at the step separator; vllm: one "
                            "llm.generate per wave of steps (pip install vllm; a GPU). Default: transformers.")
    group.add_argument("--max-step-tokens", type=int, default=256,
                       help="New tokens per step at most; a step that reaches it ends its solution (default: 256).")
    group.add_argument("--temperature", type=float, default=None,
                       help="Sampling temperature, > 0 (default: the model's generation config).")
    group.add_argument("--top-p", type=float, default=None,
                       help="Nucleus sampling, in (0, 1] (default: the model's generation config).")
    group.add_argument("--chat-template", default="auto", choices=list(CHAT_TEMPLATE_CHOICES),
                       help="auto: prompts given as lists of messages are rendered with the tokenizer's chat "
                            "template and string prompts are continued as they are; always: a string prompt becomes "
                            "one user message too; never: string prompts only. Default: auto.")
    group.add_argument("--model-dtype", default="auto", choices=DTYPES,
                       help="Weights and compute dtype of MODEL (auto: bfloat16 on a GPU that has it, else float32).")
    group.add_argument("--model-options", default=None, metavar="JSON",
                       help="A JSON object of loading options for MODEL: keyword arguments of "
                            "ares_rerank.backbones.hub.load_model_and_tokenizer with --engine transformers (e.g. "
                            '\'{"trust_remote_code": true, "device": "cuda:1"}\'), of vllm.LLM with --engine vllm '
                            '(e.g. \'{"gpu_memory_utilization": 0.5}\').')
    group.add_argument("--generation-batch-size", type=int, default=16,
                       help="--engine transformers: contexts per model.generate call, each with its continuations "
                            "(default: 16); vLLM schedules the whole wave itself.")


def check_generator_arguments(args: argparse.Namespace) -> None:
    """A one-line ValueError naming the flag for a value :func:`add_generator_arguments`'s flags cannot take (before
    the model loads)."""
    positive(args.max_step_tokens, "--max-step-tokens")
    positive(args.generation_batch_size, "--generation-batch-size")
    if args.temperature is not None and not args.temperature > 0:  # also NaN
        raise ValueError(f"--temperature={args.temperature} must be > 0: the search samples its continuations (a "
                         "temperature of 0 would make them all the same); leave it out for the model's default.")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise ValueError(f"--top-p={args.top_p} must be in (0, 1]; leave it out for the model's default.")
    _json_options(args.model_options, "--model-options")


def step_generator_from_args(args: argparse.Namespace, separator: str) -> Any:
    """The :class:`~ares_rerank.search.StepGenerator` of ``args.model`` with :func:`add_generator_arguments`' flags:
    a transformers causal LM (loaded with :func:`~ares_rerank.backbones.hub.load_model_and_tokenizer`) or a
    ``vllm.LLM``; its steps end at ``separator``."""
    from ..search import step_generator

    check_generator_arguments(args)
    options = _json_options(args.model_options, "--model-options")
    sampling = {k: v for k, v in (("temperature", args.temperature), ("top_p", args.top_p)) if v is not None}
    common = {"separator": separator, "max_step_tokens": args.max_step_tokens,
              "use_chat_template": CHAT_TEMPLATE_CHOICES[args.chat_template], **sampling}
    if args.engine == "vllm":
        try:
            import vllm
        except ImportError as err:
            raise ValueError("--engine vllm needs the package 'vllm' (pip install vllm; it runs on a GPU), which is "
                             "not installed here: install it, or use --engine transformers.") from err
        try:
            llm = vllm.LLM(model=str(args.model), dtype=args.model_dtype, **options)
        except TypeError as err:
            raise ValueError(f"--model-options {sorted(options)}: vllm.LLM does not take them ({err}).") from err
        return step_generator(llm, **common)
    from ..backbones.hub import load_model_and_tokenizer, named_load_errors

    try:
        with named_load_errors("MODEL", str(args.model)):
            model, tokenizer, _ = load_model_and_tokenizer(args.model, "AutoModelForCausalLM", dtype=args.model_dtype,
                                                           calibrated=False, **options)
    except TypeError as err:
        if "unexpected keyword argument" not in str(err) or not options:
            raise
        raise ValueError(f"--model-options {sorted(options)}: load_model_and_tokenizer does not take them ({err}); "
                         "give trust_remote_code, device, revision, adapter, model_kwargs, ...") from err
    if not callable(getattr(model, "generate", None)):
        raise ValueError(f"MODEL {str(args.model)!r} loaded as {type(model).__name__}, which cannot generate: give a "
                         "causal language model (a folder or hub id).")
    return step_generator(model, tokenizer, batch_size=args.generation_batch_size, **common)

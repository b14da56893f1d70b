"""Benchmarks, one module each, every one with a metadata docstring and ``load_task(...) -> TaskData``.

| name | module | what |
| --- | --- | --- |
| ``claimtrees`` | :mod:`.claimtrees` | synthetic rule chains (vanilla L, sXdY, vVi I) |
| ``recipes`` | :mod:`.recipes` | CaptainCookRecipes (CaptainCook4D graphs) |
| ``prmbench`` | :mod:`.prmbench` | PRMBench, per-step labels and original/modified pairs |
| ``bbm`` | :mod:`.bigbench_mistake` | BIG-Bench Mistake |
| ``processbench`` | :mod:`.processbench` | any file in ProcessBench format |
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from . import bigbench_mistake, claimtrees, processbench, prmbench, recipes
from .base import TaskData


__all__ = ["TASKS", "TaskData", "load_task"]

TASKS: dict[str, Callable[..., TaskData]] = {
    "bbm": bigbench_mistake.load_task,
    "claimtrees": claimtrees.load_task,
    "prmbench": prmbench.load_task,
    "processbench": processbench.load_task,
    "recipes": recipes.load_task,
}


def load_task(name: str, **options: Any) -> TaskData:
    """Load benchmark ``name`` with its loader's keyword options (see each module's ``load_task``).

    Options set to ``None`` are left to the loader's default, so a command line can pass every flag it has.
    """
    if name not in TASKS:
        raise ValueError(f"task={name!r} is unknown: use one of {sorted(TASKS)}.")
    loader = TASKS[name]
    accepted = set(inspect.signature(loader).parameters)
    given = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(given) - accepted)
    if unknown:
        raise ValueError(
            f"task={name!r} takes no option(s) {unknown}; its options are {sorted(accepted)} "
            f"(see ares_rerank/evaluation/tasks/{loader.__module__.rsplit('.', 1)[-1]}.py)."
        )
    missing = [n for n, p in inspect.signature(loader).parameters.items()
               if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD and n not in given]
    if missing:
        flags = " ".join(f"--{n.replace('_', '-')} ..." for n in missing)
        raise ValueError(f"task={name!r} needs {missing} (on the command line: {flags}; see "
                         f"ares_rerank/evaluation/tasks/{loader.__module__.rsplit('.', 1)[-1]}.py).")
    return loader(**given)

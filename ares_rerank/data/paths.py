"""Finding the shared data folder that holds the benchmark files (recipe graphs, PRMBench, BIG-Bench Mistake).

Resolution order: an explicit ``data_dir`` argument, then the ``ARES_DATA_DIR`` environment variable. The package
never guesses a folder from where it is installed; the source checkout's scripts and tests set ``ARES_DATA_DIR`` to
``../shared/data`` beside the checkout when it exists.
"""

from __future__ import annotations

import os
from pathlib import Path


__all__ = ["DATA_DIR_ENV", "default_data_dir", "shared_data_dir"]

DATA_DIR_ENV = "ARES_DATA_DIR"


def default_data_dir() -> Path | None:
    """The folder used when no ``data_dir`` is given: ``$ARES_DATA_DIR``, or ``None`` when it is not set."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else None


def shared_data_dir(subdir: str | None = None, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Locate the shared data folder (or one sub-folder of it) and check that it exists.

    Args:
        subdir: A sub-folder that must exist inside the data folder (e.g. ``"recipe_graphs"``); ``None`` returns the
            data folder itself.
        data_dir: An explicit data folder; ``None`` reads ``$ARES_DATA_DIR``.

    Returns:
        The existing folder: ``data_dir / subdir`` (or ``data_dir`` when ``subdir`` is ``None``).

    Raises:
        FileNotFoundError: The folder is missing; the message names the parameter, the path tried and the fix.
    """
    if data_dir is not None:
        base, source = Path(data_dir).expanduser(), f"data_dir={str(data_dir)!r}"
    elif os.environ.get(DATA_DIR_ENV):
        base, source = default_data_dir(), f"data_dir=None (from ${DATA_DIR_ENV}={os.environ[DATA_DIR_ENV]!r})"
    else:
        raise FileNotFoundError(
            f"data_dir=None and ${DATA_DIR_ENV} is not set: pass data_dir='/path/to/data' (the folder that contains "
            f"'{subdir or '<benchmark folders>'}/'), or set the environment variable {DATA_DIR_ENV} to it."
        )
    target = base / subdir if subdir else base
    if not target.is_dir():
        what = f"a '{subdir}/' folder inside {base}" if subdir else f"the data folder {base}"
        raise FileNotFoundError(
            f"{source}: could not find {what} (tried {target}). Fix: pass data_dir='/path/to/data' (the folder that "
            f"contains '{subdir or '<benchmark folders>'}/'), or set the environment variable {DATA_DIR_ENV} to it."
        )
    return target

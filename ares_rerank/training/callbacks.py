"""Trainer callbacks of the head recipe.

:class:`TimeBudgetCallback` bounds a run's wall time (``max_train_seconds`` of
:class:`~ares_rerank.training.head.HeadTrainingArguments`): on a shared machine, or a rented GPU held for a fixed
time, a run that stops early with its best checkpoint is worth more than one that is killed with none.
"""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback


__all__ = ["TimeBudgetCallback"]


class TimeBudgetCallback(TrainerCallback):
    """Stop training once ``seconds`` of wall time have passed since training began.

    The step that crosses the budget is evaluated and checkpointed before the run ends, so early stopping's best
    checkpoint (``load_best_model_at_end``) is chosen among every evaluation, the last one included.
    """

    def __init__(self, seconds: float) -> None:
        if not seconds > 0 or seconds == float("inf"):  # NaN fails the first test
            raise ValueError(f"seconds={seconds} must be a finite number > 0 (the training time budget), e.g. 3600.")
        self.seconds = float(seconds)
        self.start: float | None = None
        self.stopped_at: int | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.start = time.monotonic()
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.start is not None and time.monotonic() - self.start >= self.seconds:
            control.should_training_stop = True
            control.should_evaluate = True
            control.should_save = True
            self.stopped_at = state.global_step
        return control

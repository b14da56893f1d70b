"""Trainer callbacks of the head recipe.

:class:`TimeBudgetCallback` bounds a run's wall time (``max_train_seconds`` of
:class:`~ares_rerank.training.head.HeadTrainingArguments`): on a shared machine, or a rented GPU held for a fixed
time, a run that stops early with its best checkpoint is worth more than one that is killed with none.
:class:`StopAtStepCallback` (``stop_at_step``) ends a run at a given step while the learning-rate schedule stays the
one of ``max_steps``: it replays, step for step, a run that a time budget stopped there.
"""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback


__all__ = ["StopAtStepCallback", "TimeBudgetCallback"]


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
            stop_evaluated(control)
            self.stopped_at = state.global_step
        return control


class StopAtStepCallback(TrainerCallback):
    """End training after optimizer step ``step``, evaluated and checkpointed, whatever ``max_steps`` says.

    ``max_steps`` keeps setting the learning-rate schedule, so a run stopped here is the first ``step`` steps of the
    full run (the shipped head's GPU stages were stopped by a time budget; their configs replay them by step).
    """

    def __init__(self, step: int) -> None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise ValueError(f"step={step!r} must be an int >= 1 (the last optimizer step to run), e.g. 2500.")
        self.step = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step >= self.step:
            stop_evaluated(control)
        return control


def stop_evaluated(control: Any) -> None:
    """Ask the Trainer to evaluate and checkpoint this step, then stop (so the best checkpoint sees it)."""
    control.should_training_stop = True
    control.should_evaluate = True
    control.should_save = True

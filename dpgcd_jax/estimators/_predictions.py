"""A warning from the predictions a model returns: one answer for every row it was asked about.

The post-fit warnings (`_diagnostics.diagnose`) read released values only, so they cannot see a
model that answers one class on the rows while separating other inputs within the bounds (rows
in a corner of `[-B, B]`, e.g. non-negative features; `benchmarks/bench_warnings.py` measured
71.5% detection on such fits). `predict` can: the test below is a function of the predictions
it returns and of public or released values (`epsilon`, the target bound), so it reveals
nothing that the returned array does not. It reads no training data, and `private_score`
does not run it (there the predictions are not released, only the noisy score).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

MIN_ROWS = 30  # fewer rows may all get one class from a model that learned
FLAT_SHARE = 0.01  # a regressor's predictions whose std is under this share of T


def constant_predictions(predictions: np.ndarray, *, epsilon: float, target_bound: float | None = None) -> str | None:
  """The warning's message when `predictions` (of at least `MIN_ROWS` rows) are one class
  (classifier, `target_bound` None) or vary by a standard deviation under `FLAT_SHARE T`
  (regressor with target bound `T`), else None.

  A regressor whose predictions have standard deviation `s` has an R^2 of at most about
  `1 - (1 - s / sd(y))^2` on the rows, below 0.1 for `s <= 0.045 sd(y)`, which `0.01 T` is
  for any `T <= 4.5 sd(y)`; a classifier answering one class has the accuracy of that
  class's share, at most the majority's.
  """
  predictions = np.asarray(predictions)
  rows = predictions.shape[0]
  if rows < MIN_ROWS:
    return None
  more = f"a larger epsilon (the fit's was {epsilon:g}) or more training rows"
  if target_bound is None:
    if np.any(predictions != predictions[0]):
      return None
    answer = predictions[0].item() if hasattr(predictions[0], "item") else predictions[0]
    return (f"every one of the {rows} predictions is the same class, {answer!r}: on these rows the model "
            f"answers one class (the accuracy of that class's share, at most the majority's). Cause: its "
            f"scores do not cross the decision threshold on these rows: the private steps moved the "
            f"coefficients too little for the intercept, or the rows sit off the centre of the feature bounds "
            f"(e.g. non-negative features with bounds [-B, B]). Fix: declare feature_bound=(lower, upper) "
            f"following each feature's range; class_weight='balanced' when one class dominates; {more}. "
            f"(This warning reads only the predictions returned.)")
  spread = float(np.std(predictions))
  if spread >= FLAT_SHARE * float(target_bound):
    return None
  return (f"the {rows} predictions have a standard deviation of {spread:.3g}, under {FLAT_SHARE:.0%} of the "
          f"target bound T = {float(target_bound):.3g}: the model is nearly constant on these rows (R^2 near 0 "
          f"or below). Cause: the private steps moved the coefficients too little, or T is far above the range "
          f"of y. Fix: a declared target_bound= close to the range of y (or (lower, upper)); {more}. "
          f"(This warning reads only the predictions returned.)")


def predicted(estimator: Any, predictions: np.ndarray) -> None:
  """Hook for `predict`: warns (UserWarning, naming the estimator) when `constant_predictions` fires."""
  message = constant_predictions(predictions, epsilon=float(estimator.epsilon),
                                 target_bound=getattr(estimator, "target_bound_", None))
  if message is not None:
    warnings.warn(f"{type(estimator).__name__}.predict: {message}", UserWarning, stacklevel=3)

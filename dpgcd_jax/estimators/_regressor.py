"""DPGCDRegressor: a private linear regressor (squared or Huber loss).

The private path is the base's (`dpgcd_jax.estimators._linear.DPGCDBase`); this module holds what is
a regressor's: the target bound `T` (declared, or released in the fit's one ledger) and the loss.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from sklearn.base import RegressorMixin

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax.estimators import _diagnostics
from dpgcd_jax.estimators import _ranges
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators import _streamed
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._defaults import AUTO_CLIP_REGRESSION
from dpgcd_jax.estimators._defaults import AUTO_STEPS_UNIT_REGRESSION
from dpgcd_jax.estimators._defaults import TARGET_CLIP_RATIO
from dpgcd_jax.estimators._defaults import target_clip
from dpgcd_jax.estimators._inputs import Targets
from dpgcd_jax.estimators._linear import DPGCDBase
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import typical_size


class DPGCDRegressor(RegressorMixin, DPGCDBase):
  """Differentially private least squares or Huber regression by DP-GCD.

  The same private run as [`DPGCDClassifier`][dpgcd_jax.DPGCDClassifier] with
  `phi(z, y) = (z - y)^2 / 2`
  (`beta = 1`, `phi'` = the residual) or the Huber loss with threshold `huber_delta`,
  on the target in units of a public bound `T`: `y` is clipped to `[-T, T]` and divided
  by `T` (`T` declared as `target_bound=`, or released privately inside the fit with a
  share 0.1 of epsilon, `dpgcd_jax.estimators._released`); `coef_`, `intercept_` and
  `predict` are in raw units. `clip` bounds the residual in units of `T`; "auto" is
  0.15, with the intercept clipped apart at 0.5 (its public bound `K = 0.5 / clip`,
  [`intercept_bound`][dpgcd_jax.estimators._defaults.intercept_bound]). Measured
  (`benchmarks/bench_small_defaults.py`, R^2 on 30% held out, 3 seeds): clip 0.3 with the
  intercept clipped alike / 0.15 with the intercept apart / 0.1 apart gave 0.73 / 0.85 / 0.75
  on 600 x 5 Gaussian features (declared bounds, epsilon = 1), 0.72 / 0.77 / 0.62 on 6000 x 5
  features over 4 decades with an offset of 50 (private scales, epsilon = 2), 0.00 / 0.02 /
  0.07 on raw diabetes (epsilon = 5); the paper's `square` (1000 x 1000, 10 non-zeros, no
  intercept, `make reproduce`'s defaults row, 5 seeds): relative error 0.965 / 0.71 / 0.75.
  Earlier (the intercept clipped alike): derivative clipping gave 0.57-0.64 / -0.90-0.92 on
  the first two sets (the same sensitivity, a smaller signal when features
  lie well inside their bounds). Under a declared target bound the "auto" clip follows the
  target: `min(0.15, s)`, `s` the typical `|y - c| / T` released privately (a share 0.05
  of the budget, the ledger entry "typical target size";
  `dpgcd_jax.estimators._defaults.target_clip`), so that a `T` far above the
  data does not drown the residuals in noise (R^2 0.93-0.96 against 0.49-0.77 at `T` = 26 sd(y),
  `tests/estimators/test_data_following_clip.py`; the CV estimator's private search keeps the fixed
  clip, as the classifier's). "auto" also caps `step_size` so that the noise the run
  may add to a prediction stays below `0.5 T` (a function of the public noise multiplier,
  `n` and the number of steps).

  Args:
    target_bound: PUBLIC bound `T > 0` on `|y|`, or a PUBLIC range, a tuple of scalars
      `(lower, upper)` (fitted on `y - (lower + upper) / 2` with `T = (upper - lower) / 2`);
      None (default) releases a symmetric `T` privately.
    loss: "squared" (default) or "huber".
    huber_delta: the Huber threshold, > 0, in units of the target bound `T` (the residual of
      the fit on `y / T`).
    others: as [`DPGCDClassifier`][dpgcd_jax.DPGCDClassifier] (`clip` bounds the residual).

  Attributes:
    target_bound_: the public `T` used (declared, or privately released): `y` is clipped to
      `target_centre_ +- target_bound_` in the fit.
    target_centre_: the centre of that range (0 unless `target_bound=(lower, upper)`).
    others: as [`DPGCDClassifier`][dpgcd_jax.DPGCDClassifier].

  Examples:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 5))
    >>> y = X @ np.array([1.0, -1.0, 0.0, 0.0, 0.5]) + 0.1 * rng.normal(size=400)
    >>> reg = DPGCDRegressor(epsilon=2.0, feature_bound=3.0, target_bound=4.0,
    ...                      random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.9
    True
  """

  def __init__(self, *, loss="squared", huber_delta=1.0, target_bound=None, penalty=None,
               alpha=1e-4, l1_ratio=0.5, epsilon=1.0, delta=None, fit_intercept=True,
               feature_bound=None, categories=None, scaling=AUTO, clipping="coordinate", secure_noise=False,
               max_iter=AUTO, step_size=AUTO, clip=AUTO, solver="dp_gcd", solver_params=None,
               random_state=None, accountant=None, verbose=0):
    super().__init__(penalty=penalty, alpha=alpha, l1_ratio=l1_ratio, epsilon=epsilon, delta=delta,
                     fit_intercept=fit_intercept, feature_bound=feature_bound, categories=categories, scaling=scaling,
                     clipping=clipping, secure_noise=secure_noise, max_iter=max_iter,
                     step_size=step_size, clip=clip, solver=solver, solver_params=solver_params,
                     random_state=random_state, accountant=accountant, verbose=verbose)
    self.loss = loss
    self.huber_delta = huber_delta
    self.target_bound = target_bound

  def _check_params(self) -> None:
    super()._check_params()
    _validate.check_choice("loss", self.loss, ("squared", "huber"))
    _validate.check_number("huber_delta", self.huber_delta, low=0.0, low_open=True)
    self._target_range()  # checks its values

  def _target_range(self) -> _ranges.Range | None:
    return _ranges.declared("target_bound", self.target_bound, scalar=True)

  def _release_target(self, key: jax.Array, targets: np.ndarray, dtype: Any) -> _released.Released | None:
    target = self._target_range()
    return _released.release_target_bound(key, targets[0], target_bound=None if target is None else target.half_width,
                                          epsilon=float(self.epsilon), dtype=dtype)

  def _target_release(self, num_examples: int, size: int, dtype: Any) -> _released.TargetRelease | None:
    target = self._target_range()
    return _released.target_release(num_examples=num_examples, size=size, dtype=dtype,
                                    target_bound=None if target is None else target.half_width,
                                    epsilon=float(self.epsilon))

  fit_chunks = _streamed.fit_chunks

  def _chunk_targets(self, name: str) -> _streamed.ChunkTargets:
    """The chunks' targets in units of the declared target bound (`fit_chunks`)."""
    target = self._target_range()
    if target is None:
      raise ValueError(f"Expected a declared target_bound for {name}.fit_chunks (the in-memory fit releases it from "
                       f"the whole y), got target_bound=None.")
    bound = float(target.half_width)
    release = _released.target_release(num_examples=1, size=1, dtype=float, target_bound=bound, epsilon=1.0)
    return _streamed.ChunkTargets(_streamed.scaled(float(target.centre), bound), bound, release.finish(None))

  def _loss(self) -> losses_lib.Loss:
    return losses_lib.squared if self.loss == "squared" else losses_lib.huber(float(self.huber_delta))

  def _targets(self, y: np.ndarray, key: jax.Array) -> Targets:
    del key  # a regressor releases nothing here
    return Targets([np.asarray(y, float)], (), ledger_lib.Ledger(), ())

  _noise_cap = _diagnostics.NOISE_CAP
  _auto_clip = _auto_clip_released = AUTO_CLIP_REGRESSION
  _steps_unit = AUTO_STEPS_UNIT_REGRESSION
  # The clip follows the typical |y - c| / T under a declared target bound T (`target_clip`).
  _clip_follows_data = True
  _size_label = typical_size.TARGET_LABEL
  _clip_rule = f"min({AUTO_CLIP_REGRESSION:g}, {TARGET_CLIP_RATIO:g} x the typical |y - c| / T)"

  def _size_records(self, X: Any, feature_bound: Any, target_units: Any) -> tuple[Any, Any] | None:
    """The centred targets in units of the declared `T` (bound 1), or None (`T` released)."""
    del X, feature_bound
    return None if target_units is None else (np.asarray(target_units, np.float64)[:, None], 1.0)

  def _clip_at_size(self, size: float) -> float:
    return target_clip(size)

  def _store(self, coef: np.ndarray, intercept: np.ndarray) -> None:
    self.coef_, self.intercept_ = coef[0], float(intercept[0])

  def _predict(self, X: Any) -> np.ndarray:
    """`<clip_B(x), w> + b`, (n,)."""
    return self._decision(X)[:, 0]

"""DPGCDClassifier and DPGCDRegressor: scikit-learn estimators on one private DP-GCD path.

Model: ``f(x) = <w, clip_B(x)> + b``, the features clipped to the public bound ``B`` (the
same clipping at fit and predict time). The intercept ``b`` is one more coordinate of the
same private run: a constant feature of value 1 with its own public bound 1 and no penalty
(a penalty strength vector with 0 there), so it is selected, clipped and noised like every
other coordinate and never fitted outside the mechanism.

Privacy: a fit releases ``coef_`` and ``intercept_`` through (1) when ``feature_bound`` is
None, an ``epsilon_B``-DP feature bound (:mod:`dpgcd_jax.privacy.bounds`, a share
``BOUND_SHARE`` of epsilon) and (2) one DP-GCD run per target (``T`` steps, one for a
regressor or two classes, one per class for more): Gumbel-max selection and Gaussian
updates with equal multipliers, calibrated jointly with (1) in one
:class:`~dpgcd_jax.privacy.Ledger` to ``(epsilon, delta)``. Everything else (labels seen in
``y``, ``n``, ``p``) is treated as public, as in scikit-learn and diffprivlib: the set of
classes is read from ``y``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import penalties
from dpgcd_jax import seeding
from dpgcd_jax.problem import make_problem
from dpgcd_jax.privacy import accounting, bounds, events, ledger as ledger_lib
from dpgcd_jax.solvers import dp_gcd

SELECTION, UPDATE = "gumbel", "gaussian"
BOUND_SHARE = 0.1
PENALTIES = ("l1", "l2", "elasticnet", None)
AUTO = "auto"
AUTO_CLIP = 0.1
AUTO_MARGIN_STEP = 0.5


@jax.jit
def _private_bound(key: jax.Array, X: jax.Array, epsilon: float) -> jax.Array:
  """``bounds.private_feature_bound`` on the rows of ``X`` (jitted: one compilation per shape)."""
  return bounds.private_feature_bound(key, jnp.max(jnp.abs(X), axis=1), epsilon)


class Hyper(NamedTuple):
  """Resolved hyperparameters of one DP-GCD run."""

  max_iter: int
  step_size: float
  clip: float


def auto_max_iter(n: int, p: int, epsilon: float) -> int:
  """Default ``T``: ``round(n epsilon / sqrt(p))`` in [10, 1000] (public: ``n``, ``p``, ``epsilon``)."""
  return int(min(1000, max(10, round(n * epsilon / math.sqrt(p)))))


def auto_step_size(clip: float, curvature: float) -> float:
  """Default ``gamma = max(1, AUTO_MARGIN_STEP beta / clip)`` (see the class docstring)."""
  return max(1.0, AUTO_MARGIN_STEP * curvature / clip)


def key_from(random_state: Any) -> jax.Array:
  """An explicit JAX key from ``random_state``.

  - None: a fresh key from the operating system's entropy (:func:`dpgcd_jax.seeding.fresh_key`),
    never from NumPy's global state.
  - an int in [0, 2^64): that seed, for reproducibility only (the same seed replays the same
    noise: two fits with one seed on neighbouring data sets are not private against anyone who
    knows the seed).
  - a ``numpy.random.RandomState`` or ``Generator``: 64 bits drawn from it (the caller's
    generator: as private as its own seeding).
  - a JAX key: used as given.
  """
  dtype = getattr(random_state, "dtype", None)
  if dtype is not None and (jnp.issubdtype(dtype, jax.dtypes.prng_key) or dtype == jnp.uint32):
    _validate.check_key("random_state", random_state)
    return random_state
  if random_state is None:
    return seeding.fresh_key()
  if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
    if not 0 <= int(random_state) < 2**64:
      raise ValueError(f"Expected random_state in [0, 2^64), got random_state={random_state!r}.")
    seed = int(random_state)
  elif isinstance(random_state, np.random.RandomState):
    seed = int(random_state.randint(0, 2**32, size=2, dtype=np.uint64) @ np.array([2**32, 1], np.uint64))
  elif isinstance(random_state, np.random.Generator):
    seed = int(random_state.integers(0, 2**64, dtype=np.uint64))
  else:
    raise ValueError(f"Expected random_state to be None, an int, a numpy RandomState or Generator, "
                     f"or a JAX key, got random_state={random_state!r}.")
  return jax.random.wrap_key_data(np.asarray([seed >> 32, seed & 0xFFFFFFFF], np.uint32))


def _check_auto(name: str, value: Any, *, integer: bool = False) -> None:
  if isinstance(value, str) and value == AUTO:
    return
  if np.ndim(value) != 0:
    raise ValueError(f"Expected {name} to be a number or {AUTO!r}, got {name}={value!r}.")
  if integer:
    _validate.check_int(name, value, low=1)
  else:
    _validate.check_number(name, value, low=0.0, low_open=True)


def check_classes(classes: Any) -> np.ndarray:
  """The declared public label set as a sorted 1-D array of >= 2 distinct labels."""
  values = np.asarray(classes)
  if values.ndim != 1 or values.size < 2 or np.unique(values).size != values.size:
    raise ValueError(f"Expected classes to be a 1-D list of at least 2 distinct labels, got "
                     f"classes={classes!r}.")
  return np.sort(values)


class _DPGCDBase(BaseEstimator):
  """What the classifier and the regressor share: validation, bound, calibration, runs."""

  _curvature = 1.0

  def __init__(self, *, penalty=None, alpha=1e-4, l1_ratio=0.5, epsilon=1.0, delta=None,
               fit_intercept=True, feature_bound=None, max_iter=AUTO, step_size=AUTO, clip=AUTO,
               random_state=None):
    self.penalty = penalty
    self.alpha = alpha
    self.l1_ratio = l1_ratio
    self.epsilon = epsilon
    self.delta = delta
    self.fit_intercept = fit_intercept
    self.feature_bound = feature_bound
    self.max_iter = max_iter
    self.step_size = step_size
    self.clip = clip
    self.random_state = random_state

  def _check_params(self) -> None:
    _validate.check_number("epsilon", self.epsilon, low=0.0, low_open=True)
    if self.delta is not None:
      _validate.check_number("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
    if not (self.penalty is None or (isinstance(self.penalty, str) and self.penalty in PENALTIES)):
      raise ValueError(f"Expected penalty in {PENALTIES}, got penalty={self.penalty!r}.")
    _validate.check_number("alpha", self.alpha, low=0.0)
    _validate.check_number("l1_ratio", self.l1_ratio, low=0.0, high=1.0)
    if not isinstance(self.fit_intercept, (bool, np.bool_)):
      raise ValueError(f"Expected fit_intercept to be a bool, got fit_intercept={self.fit_intercept!r}.")
    _check_auto("max_iter", self.max_iter, integer=True)
    _check_auto("step_size", self.step_size)
    _check_auto("clip", self.clip)
    if self.feature_bound is not None:
      _validate.check_number("feature_bound", self.feature_bound, low=0.0, low_open=True)

  def _hyper(self, n: int, p: int, epsilon: float, **override: Any) -> Hyper:
    values = {k: override.get(k, getattr(self, k)) for k in Hyper._fields}
    for name in ("max_iter", "step_size", "clip"):
      _check_auto(name, values[name], integer=name == "max_iter")
    clip = AUTO_CLIP if values["clip"] == AUTO else float(values["clip"])
    step = (auto_step_size(clip, self._curvature) if values["step_size"] == AUTO
            else float(values["step_size"]))
    p += bool(self.fit_intercept)
    steps = auto_max_iter(n, p, epsilon) if values["max_iter"] == AUTO else int(values["max_iter"])
    return Hyper(steps, step, clip)

  def _penalty(self, p: int, alpha: float, l1_ratio: float) -> Any:
    strength = np.full(p, float(alpha))
    if self.fit_intercept:
      strength[-1] = 0.0  # the intercept is not penalized
    if self.penalty == "l1":
      return penalties.L1(strength)
    if self.penalty == "l2":
      return penalties.L2(strength)
    if self.penalty == "elasticnet":
      return penalties.ElasticNet(strength, float(l1_ratio))
    return None

  def _feature_bound(self, X: np.ndarray, key: jax.Array, epsilon: float
                     ) -> tuple[np.ndarray, float, str]:
    """The public bound (p,), the epsilon spent on it, and a note for the report."""
    p = X.shape[1]
    if self.feature_bound is not None:
      bound = np.asarray(self.feature_bound, float)
      if bound.ndim not in (0, 1) or (bound.ndim == 1 and bound.shape != (p,)):
        raise ValueError(f"Expected feature_bound to be a scalar or of shape ({p},), got "
                         f"feature_bound.shape={bound.shape}.")
      return np.broadcast_to(bound, (p,)).copy(), 0.0, "feature bound: declared public"
    eps_b = BOUND_SHARE * epsilon
    bound = float(_private_bound(key, jnp.asarray(X), eps_b))
    return np.full(p, bound), eps_b, (
        f"feature bound: B = {bound:.4g} released privately (dpgcd_jax.privacy.bounds), "
        f"features clipped to [-B, B]")

  def _design(self, X: np.ndarray, bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not self.fit_intercept:
      return X, bound
    return np.hstack([X, np.ones((X.shape[0], 1), X.dtype)]), np.append(bound, 1.0)

  def _train(self, X: np.ndarray, targets: list[np.ndarray], bound: np.ndarray, hyper: Hyper,
             noise: float, key: jax.Array, alpha: Any = None, l1_ratio: Any = None) -> np.ndarray:
    """One DP-GCD run per target at noise multiplier ``noise``; (targets, p [+ 1]) weights."""
    X1, bound1 = self._design(X, bound)
    alpha = self.alpha if alpha is None else alpha
    l1_ratio = self.l1_ratio if l1_ratio is None else l1_ratio
    _validate.check_number("alpha", alpha, low=0.0)
    _validate.check_number("l1_ratio", l1_ratio, low=0.0, high=1.0)
    penalty = self._penalty(X1.shape[1], alpha, l1_ratio)
    params = dp_gcd.Params(hyper.step_size, hyper.clip, noise, noise)
    weights = []
    for k, target in enumerate(targets):
      problem = make_problem(X1, target, self._loss(), penalty=penalty, feature_bound=bound1)
      result = dp_gcd.run(problem, jax.random.fold_in(key, k), params, passes=hyper.max_iter,
                          selection=SELECTION, update=UPDATE)
      weights.append(np.asarray(result.w, float))
    return np.stack(weights)

  def _set_model(self, W: np.ndarray, bound: np.ndarray, hyper: Hyper) -> None:
    p = bound.shape[0]
    coef, intercept = W[:, :p], (W[:, p] if self.fit_intercept else np.zeros(W.shape[0]))
    self.feature_bound_, self.n_iter_, self.step_size_, self.clip_ = bound, *hyper
    self._store(coef, intercept)
    if not np.any(coef):
      warnings.warn(
          f"{type(self).__name__}.fit returned coef_ = 0 (no feature coefficient moved): the "
          f"penalty (alpha={self.alpha}) zeroed every update, or the updates were drowned: clip "
          f"too small (clip={hyper.clip}), too few steps (max_iter={hyper.max_iter}) or too much "
          f"noise (epsilon={self.epsilon}); try penalty=None or a larger epsilon.", UserWarning,
          stacklevel=3)

  def _prepare(self, X: Any, y: Any
               ) -> tuple[np.ndarray, list[np.ndarray], tuple[str, ...], float, jax.Array]:
    """Validated data, the targets, the steps outside the guarantee, delta and the key."""
    self._check_params()
    key = key_from(self.random_state)
    X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2,
                         y_numeric=not isinstance(self, ClassifierMixin))
    targets, not_private = self._targets(y)
    delta = 1.0 / X.shape[0] ** 2 if self.delta is None else float(self.delta)
    return X, targets, not_private, delta, key

  def fit(self, X: Any, y: Any) -> "_DPGCDBase":
    """Fits the model privately; ``privacy_`` reports the total ``(epsilon, delta)``.

    Args:
      X: (n, p) features (array-like or DataFrame; names are kept in ``feature_names_in_``).
      y: (n,) labels (classifier) or targets (regressor).

    Returns:
      self.

    Raises:
      ValueError: naming the argument, for a bad hyperparameter or input.
    """
    X, targets, not_private, delta, key = self._prepare(X, y)
    hyper = self._hyper(*X.shape, float(self.epsilon))
    key_bound, key_run = jax.random.split(key)
    bound, eps_b, bound_note = self._feature_bound(X, key_bound, float(self.epsilon))
    steps = hyper.max_iter * len(targets)
    noise, report = ledger_lib.calibrate(
        lambda k: _bound_ledger(eps_b) + _solver_ledger(k, steps), float(self.epsilon), delta,
        key=("dpgcd_jax.estimators", steps, eps_b, SELECTION, UPDATE))
    W = self._train(X, targets, bound, hyper, noise, key_run)
    self.privacy_ = report.with_notes(bound_note, *self._notes(len(targets), hyper, delta)
                                      ).with_not_private(*not_private)
    self._set_model(W, bound, hyper)
    return self

  def _notes(self, num_targets: int, hyper: Hyper, delta: float) -> list[str]:
    notes = [f"DP-GCD: {num_targets} run(s) x {hyper.max_iter} steps, {SELECTION} selection and "
             f"{UPDATE} updates with equal noise multipliers"]
    if self.delta is None:
      notes.append(f"delta = 1/n^2 = {delta:.3g} (default)")
    return notes

  def _decision(self, X: Any) -> np.ndarray:
    check_is_fitted(self)
    X = validate_data(self, X, reset=False, dtype=np.float64)
    X = np.clip(X, -self.feature_bound_, self.feature_bound_)
    return X @ np.atleast_2d(self.coef_).T + self.intercept_


def _solver_ledger(noise: float, steps: int) -> ledger_lib.Ledger:
  return accounting.gcd_ledger(noise, noise, steps=steps, selection=SELECTION, update=UPDATE)


def _bound_ledger(epsilon: float) -> ledger_lib.Ledger:
  if epsilon == 0.0:
    return ledger_lib.Ledger()
  return ledger_lib.Ledger.of(("feature bound", events.PureDp(epsilon), 1))


class DPGCDClassifier(ClassifierMixin, _DPGCDBase):
  """Differentially private logistic regression by greedy coordinate descent (DP-GCD).

  Labels: any two labels (encoded as -1 / +1, ``classes_[1]`` positive); more classes are
  fitted one-vs-rest, one private run per class, the budget split by composing all the runs
  in one ledger. Each run (Mangold et al. 2023), from ``w = 0`` with ``M_j = B_j^2 / 4``:

  .. math::

     g_j = \\frac1n \\sum_i \\mathrm{clip}(\\phi'(\\langle x_i, w\\rangle, y_i) x_{ij},
     \\pm C_j), \\quad j_t = \\arg\\max_j \\frac{|g_j|}{\\sqrt{M_j}} + b \\bar\\Delta G_j,
     \\quad w_{j_t} \\leftarrow \\mathrm{prox}\\big(w_{j_t} - \\tfrac{\\gamma}{M_{j_t}}
     (g_{j_t} + s \\Delta_{j_t} \\xi)\\big)

  with ``G_j ~ Gumbel``, ``xi ~ N(0, 1)``, ``Delta_j = 2 C_j / n``. Privacy: see
  :mod:`dpgcd_jax.estimators._linear`; the whole fit is ``(epsilon, delta)``-DP.

  Defaults that learn (computed from public quantities only: ``n``, ``p``, ``epsilon``, ``B``).
  With a bound ``B``, ``M_j = beta B^2`` is a worst case: for standardized features the true
  curvature is about ``beta``, ``B^2`` times less, so the safe step ``1 / M_j`` is short. What
  limits a private fit is noise: the noise on ``g_j`` scales with the threshold
  ``C_j = clip B_j`` and does not shrink with the gradient. A small ``clip`` (default 0.1, well
  below ``|phi'(0)| = 1/2`` for the logistic loss) clips most per-example terms to
  ``+-clip B_j``: ``g_j`` becomes ``clip B_j`` times an average of signs, whose
  signal-to-noise ratio no longer depends on ``clip``, with several times less noise than
  ``clip = 1``. One step then moves the margin ``<x, w>`` of a point with ``|x_j| <= B_j`` by
  at most ``step_size clip / beta``: "auto" takes ``step_size = max(1, 0.5 beta / clip)``,
  a margin move of at most about 0.5 per step (``step_size`` 1.25 for the logistic loss at
  ``clip = 0.1``, i.e. above the worst-case ``1 / M_j``). The number of steps trades progress
  against the noise per step (which grows like ``sqrt(T)`` under composition) and, with many
  coordinates, against noisy selections among them: "auto" takes ``n epsilon / sqrt(p)`` in
  [10, 1000], an empirical rule within a factor of about 2 of the best ``T`` on breast_cancer
  (p = 30), 4-feature blobs and a 5000 x 2000 synthetic set, at epsilon from 0.1 to 5. On
  breast_cancer (70/30 split, standardized, epsilon = 1, 10 seeds) the defaults reach a mean
  test accuracy of about 0.94 (non-private logistic regression: 0.97); ``tests`` check >= 0.90.

  Args:
    penalty: "l1", "l2", "elasticnet" or None; the intercept is never penalized.
    alpha: penalty strength (``alpha ||w||_1``, ``alpha / 2 ||w||^2`` or scikit-learn's
      elastic net), >= 0.
    l1_ratio: elastic-net mixing in [0, 1].
    epsilon: total privacy budget, > 0.
    delta: total delta in (0, 1); None (default) uses ``1 / n^2`` for ``n`` training rows.
    fit_intercept: learn an intercept, as a coordinate of the same private run.
    feature_bound: PUBLIC bound ``B > 0`` on ``|x_ij|`` (scalar or (p,)), as diffprivlib's
      ``bounds``: features are clipped to ``[-B, B]`` at fit and predict time. None (default)
      releases a bound privately with a share 0.1 of epsilon (private, accounted in
      ``privacy_``; never read from the data without noise).
    max_iter: DP-GCD steps ``T``, or "auto": ``round(n epsilon / sqrt(p))`` in [10, 1000]
      (``p`` counts the intercept).
    step_size: ``gamma`` in units of ``1 / M_j``, or "auto" (see above).
    clip: bound on ``|phi'|`` (per-example gradient ``phi' x_ij`` clipped at ``clip B_j``), or
      "auto" = 0.1 (see above).
    random_state: an int, a ``RandomState``, a JAX key or None (fresh randomness); turned into
      an explicit JAX key at fit.

  Attributes:
    coef_, intercept_: the private model.
    feature_bound_: (p,) the public bound used (declared or privately released).
    n_iter_, step_size_, clip_: the resolved hyperparameters.
    privacy_: the :class:`dpgcd_jax.privacy.PrivacyReport` of the fit (total epsilon, delta).
    n_features_in_, feature_names_in_: as in scikit-learn.

  Examples:
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 5))
    >>> y = np.where(X[:, 0] - X[:, 1] > 0, "spam", "ham")
    >>> model = make_pipeline(StandardScaler(),
    ...                       DPGCDClassifier(epsilon=1.0, feature_bound=3.0, random_state=0))
    >>> model.fit(X, y).score(X, y) > 0.8
    True
    >>> round(model[-1].privacy_.epsilon, 3)
    1.0
  """

  _curvature = losses_lib.logistic.curvature

  def __init__(self, *, classes=None, penalty=None, alpha=1e-4, l1_ratio=0.5, epsilon=1.0,
               delta=None, fit_intercept=True, feature_bound=None, max_iter=AUTO, step_size=AUTO,
               clip=AUTO, random_state=None):
    super().__init__(penalty=penalty, alpha=alpha, l1_ratio=l1_ratio, epsilon=epsilon, delta=delta,
                     fit_intercept=fit_intercept, feature_bound=feature_bound, max_iter=max_iter,
                     step_size=step_size, clip=clip, random_state=random_state)
    self.classes = classes

  def _check_params(self) -> None:
    super()._check_params()
    if self.classes is not None:
      check_classes(self.classes)

  def _loss(self) -> losses_lib.Loss:
    return losses_lib.logistic

  def _targets(self, y: np.ndarray) -> tuple[list[np.ndarray], tuple[str, ...]]:
    if self.classes is None:
      check_classification_targets(y)
      warnings.warn(
          f"{type(self).__name__}: classes=None, so the label set is read from y without noise "
          f"(a record that is the only member of its class changes classes_ and coef_.shape): "
          f"declare the public label set, e.g. classes={np.unique(y)[:3].tolist()}..., for a fit "
          f"that is private end to end.", _validate.PrivacyLeakWarning, stacklevel=4)
      self.classes_ = np.unique(y)
      not_private = ("label set: classes_ read from y without noise (classes=None)",)
      if self.classes_.size < 2:
        raise ValueError(f"Expected y to have at least 2 classes, got 1 class: {self.classes_[0]!r}.")
    else:
      self.classes_ = check_classes(self.classes)
      unknown = ~np.isin(y, self.classes_)
      if np.any(unknown):
        raise ValueError(f"Expected every label of y in the declared classes={self.classes_.tolist()}, "
                         f"got y containing {np.unique(y[unknown])[:5].tolist()}.")
      not_private = ()
    positives = [self.classes_[1]] if self.classes_.size == 2 else list(self.classes_)
    return [np.where(y == c, 1.0, -1.0) for c in positives], not_private

  def _store(self, coef: np.ndarray, intercept: np.ndarray) -> None:
    self.coef_, self.intercept_ = coef, intercept

  def decision_function(self, X: Any) -> np.ndarray:
    """``<clip_B(x), w> + b``: (n,) for two classes, (n, classes) one-vs-rest."""
    scores = self._decision(X)
    return scores[:, 0] if scores.shape[1] == 1 else scores

  def predict(self, X: Any) -> np.ndarray:
    scores = self.decision_function(X)
    index = (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
    return self.classes_[index]

  def predict_proba(self, X: Any) -> np.ndarray:
    """Logistic probabilities (one-vs-rest: the per-class sigmoids, normalized)."""
    scores = self._decision(X)
    prob = 1.0 / (1.0 + np.exp(-scores))
    if prob.shape[1] == 1:
      return np.hstack([1.0 - prob, prob])
    return prob / prob.sum(axis=1, keepdims=True)

  def predict_log_proba(self, X: Any) -> np.ndarray:
    return np.log(self.predict_proba(X))


class DPGCDRegressor(RegressorMixin, _DPGCDBase):
  """Differentially private least squares or Huber regression by DP-GCD.

  The same private run as :class:`DPGCDClassifier` with ``phi(z, y) = (z - y)^2 / 2``
  (``beta = 1``, ``phi'`` = the residual, clipped at ``clip B_j`` per example and feature) or
  the Huber loss with threshold ``huber_delta``. ``clip`` bounds the residual: the default 0.1
  makes the clipped gradient that of a least absolute deviation fit (signs of residuals),
  robust and low-noise, and a step moves predictions by at most ``step_size clip`` (0.5 with
  the defaults). The defaults assume a target of scale about 1: divide ``y`` by a public scale
  first (scaling it with its own standard deviation reads the data without noise), or set
  ``clip`` and ``step_size`` to the target's scale.

  Args:
    loss: "squared" (default) or "huber".
    huber_delta: the Huber threshold, > 0.
    others: as :class:`DPGCDClassifier` (``clip`` bounds the residual).

  Examples:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 5))
    >>> y = X @ np.array([1.0, -1.0, 0.0, 0.0, 0.5]) + 0.1 * rng.normal(size=400)
    >>> reg = DPGCDRegressor(epsilon=1.0, feature_bound=3.0, random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.8
    True
  """

  def __init__(self, *, loss="squared", huber_delta=1.0, penalty=None, alpha=1e-4, l1_ratio=0.5,
               epsilon=1.0, delta=None, fit_intercept=True, feature_bound=None, max_iter=AUTO,
               step_size=AUTO, clip=AUTO, random_state=None):
    super().__init__(penalty=penalty, alpha=alpha, l1_ratio=l1_ratio, epsilon=epsilon, delta=delta,
                     fit_intercept=fit_intercept, feature_bound=feature_bound, max_iter=max_iter,
                     step_size=step_size, clip=clip, random_state=random_state)
    self.loss = loss
    self.huber_delta = huber_delta

  def _check_params(self) -> None:
    super()._check_params()
    _validate.check_choice("loss", self.loss, ("squared", "huber"))
    _validate.check_number("huber_delta", self.huber_delta, low=0.0, low_open=True)

  def _loss(self) -> losses_lib.Loss:
    return losses_lib.squared if self.loss == "squared" else losses_lib.huber(float(self.huber_delta))

  def _targets(self, y: np.ndarray) -> tuple[list[np.ndarray], tuple[str, ...]]:
    return [np.asarray(y, float)], ()

  def _store(self, coef: np.ndarray, intercept: np.ndarray) -> None:
    self.coef_, self.intercept_ = coef[0], float(intercept[0])

  def predict(self, X: Any) -> np.ndarray:
    """``<clip_B(x), w> + b``, (n,)."""
    return self._decision(X)[:, 0]

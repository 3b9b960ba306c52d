"""The private path shared by DPGCDClassifier and DPGCDRegressor (`DPGCDBase`): one DP-GCD fit.

The classes are in `_classifier.py` and `_regressor.py`; the defaults in `_defaults.py`, the
solvers' adapters in `_solvers.py`, the releases in `_released.py`. The base's methods that check
and prepare a fit's inputs are in `_inputs.py`, those of its private run in `_training.py`; here
are its parameters, its hyperparameters as run, the fit itself, the model and its predictions.

Model: `f(x) = <w, clip_B(x)> + b`, the features clipped to public bounds `B_j` (the same
clipping at fit and predict time; `coef_` and `intercept_` in the user's raw units). The
intercept `b` is one more coordinate of the same private run: a constant feature of value 1
with its own public bound 1 and no penalty, so it is selected, clipped and noised like every
other coordinate and never fitted outside the mechanism.

Privacy, end to end: a fit reads the raw data only through accounted mechanisms, all
composed in ONE [`Ledger`][dpgcd_jax.privacy.Ledger] calibrated to `(epsilon, delta)` by
[`dpgcd_jax.dp_gcd.fit`][] (the library's one path from a budget to a run):

1. the feature bounds `B_j`: declared (`feature_bound=`, free) or released
   (`dpgcd_jax.estimators._released`: per-feature private scales, or one private bound
   when `n` is too small for per-feature scales);
2. a regressor's target bound `T`: declared (`target_bound=`) or released;
3. one run per target (one for a regressor or two classes, one per class for more) of the
   solver (`solver=`): DP-GCD by default (Gumbel-max selection and Gaussian updates with equal
   multipliers), or DP Frank-Wolfe, private hard thresholding, two-stage support selection or
   DP-CD, each through its own `fit` ([`dpgcd_jax.solvers.budget.private_fit`][]), which
   composes items 1-2 (`prior`) and the runs (`targets`) in the same one ledger.

The label set is public by declaration (`classes=`); without it, it is read from `y`
with a [`PrivacyLeakWarning`][dpgcd_jax.PrivacyLeakWarning] and recorded in `privacy_.not_private`.
`n` and `p` are public.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.base import ClassifierMixin
from sklearn.base import OneToOneFeatureMixin
from sklearn.utils.validation import check_array
from sklearn.utils.validation import check_is_fitted
from sklearn.utils.validation import validate_data

from dpgcd_jax import _validate
from dpgcd_jax import mechanisms
from dpgcd_jax import progress
from dpgcd_jax import sparse
from dpgcd_jax.estimators import _diagnostics
from dpgcd_jax.estimators import _inputs
from dpgcd_jax.estimators import _predictions
from dpgcd_jax.estimators import _ranges
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators import _training
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._defaults import AUTO_CLIP
from dpgcd_jax.estimators._defaults import AUTO_CLIP_RELEASED
from dpgcd_jax.estimators._defaults import AUTO_MARGIN_STEP
from dpgcd_jax.estimators._defaults import AUTO_RADIUS
from dpgcd_jax.estimators._defaults import AUTO_STEPS_UNIT
from dpgcd_jax.estimators._defaults import Hyper
from dpgcd_jax.estimators._defaults import intercept_bound
from dpgcd_jax.estimators._defaults import released_step_size
from dpgcd_jax.estimators._inputs import Prepared
from dpgcd_jax.estimators._solvers import ADAPTERS
from dpgcd_jax.estimators._solvers import SELECTION
from dpgcd_jax.estimators._solvers import UPDATE
from dpgcd_jax.estimators._solvers import Adapter
from dpgcd_jax.estimators._solvers import solver_params
from dpgcd_jax.privacy import accountant as accountant_lib
from dpgcd_jax.privacy import typical_size
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_gcd


class DPGCDBase(OneToOneFeatureMixin, BaseEstimator):
  """What the classifier and the regressor share: validation, releases, the private run.

  `get_feature_names_out()` names the columns of `coef_`: `feature_names_in_` (a DataFrame's
  columns) or `x0, ..., x{p-1}`.
  """

  _curvature = 1.0
  _auto_clip = AUTO_CLIP
  _auto_clip_released = AUTO_CLIP_RELEASED
  _clip_follows_data = False  # the "auto" clip from a typical size (`_size_records`)
  _steps_unit = AUTO_STEPS_UNIT
  _noise_cap: float | None = None
  _searches = False  # the CV estimators' fit is a private search

  # Before any private computation (`_inputs`): the parameters, the data and targets, delta.
  _check_params = _inputs.check_params
  _prepare = _inputs.prepare
  _delta = _inputs.fit_delta
  # The private run (`_training`): the layout, the problem, the releases and the runs.
  _layout = _training.build_layout
  _layout_shape = _training.layout_shape
  _penalty = _training.build_penalty
  _problem = _training.build_problem
  _train = _training.train
  _follow_data = _training.follow_data
  _run = _training.run_solver
  _train_at = _training.train_at

  def __init__(self, *, penalty=None, alpha=1e-4, l1_ratio=0.5, epsilon=1.0, delta=None,
               fit_intercept=True, feature_bound=None, categories=None, scaling=AUTO, clipping="coordinate",
               secure_noise=False, max_iter=AUTO, step_size=AUTO, clip=AUTO, solver="dp_gcd",
               solver_params=None, random_state=None, accountant=None, verbose=0):
    self.accountant = accountant
    self.verbose = verbose
    self.penalty = penalty
    self.alpha = alpha
    self.l1_ratio = l1_ratio
    self.epsilon = epsilon
    self.delta = delta
    self.fit_intercept = fit_intercept
    self.feature_bound = feature_bound
    self.categories = categories
    self.scaling = scaling
    self.clipping = clipping
    self.secure_noise = secure_noise
    self.max_iter = max_iter
    self.step_size = step_size
    self.clip = clip
    self.solver = solver
    self.solver_params = solver_params
    self.random_state = random_state

  def _hyper(self, n: int, p: int, epsilon: float, **override: Any) -> Hyper:
    values = {k: override.get(k, getattr(self, k)) for k in Hyper._fields}
    for name in ("max_iter", "step_size", "clip"):
      _inputs.check_auto(name, values[name], integer=name == "max_iter")
    adapter, released = self._adapter(), self._steps_by_released_curvature()
    auto_clip = self._auto_clip_released if released else self._auto_clip
    clip = auto_clip if values["clip"] == AUTO else float(values["clip"])
    p += bool(self.fit_intercept)
    if values["step_size"] != AUTO:
      step = float(values["step_size"])
    elif released:
      step = released_step_size(clip)
    else:
      step = adapter.step(clip, self._curvature, self._solver_params(p))
    steps = int(values["max_iter"]) if values["max_iter"] != AUTO else adapter.steps(n, p, epsilon, self._steps_unit)
    return Hyper(steps, step, clip)

  def _adapter(self) -> Adapter:
    """The record of `self.solver` (`dpgcd_jax.estimators._solvers`)."""
    return ADAPTERS[self.solver]

  def _steps_by_released_curvature(self) -> bool:
    """Whether the runs step by the released curvature (a solver that can, with
    `solver_params["curvature"]` "released", the default)."""
    return self._adapter().released_curvature and self._curvature_option() == "released"

  def _intercept_bound(self, hyper: Hyper) -> float:
    """The intercept's public bound (`intercept_bound`: clipped apart from the features when
    the steps follow the released curvature; else 1)."""
    return intercept_bound(hyper.clip) if self.fit_intercept and self._steps_by_released_curvature() else 1.0

  def _follows_data(self) -> bool:
    """Whether the clip is the data-following "auto" one (DP-GCD with the released curvature;
    it follows the records of `_size_records` when they are declared)."""
    return self._clip_follows_data and isinstance(self.clip, str) and self._steps_by_released_curvature()

  # The classifier's clip follows the typical feature size (in units of declared bounds).
  _size_label = typical_size.LABEL
  _clip_rule = f"max({AUTO_CLIP_RELEASED:g}, {AUTO_MARGIN_STEP:g} x the typical feature size in units of the bounds)"

  def _size_records(self, X: Any, feature_bound: Any, target_units: Any) -> tuple[Any, Any] | None:
    """The records and public bounds whose typical size ([`dpgcd_jax.privacy.typical_size`][]) the
    "auto" clip follows, or None: the features `X` under their declared `feature_bound` (None:
    released bounds). `target_units`: a regressor's centred targets in units of a declared
    `T`, or None."""
    del target_units
    return None if feature_bound is None else (X, feature_bound)

  def _clip_at_size(self, size: float) -> float:
    """The "auto" clip at the released typical size `size` (`_clip_rule`)."""
    return max(self._auto_clip_released, AUTO_MARGIN_STEP * size)

  def _solver_params(self, num_coordinates: int) -> dict[str, Any]:
    """`solver_params` completed by the public defaults (`solver_params`)."""
    return solver_params(self.solver, self.solver_params, num_coordinates=num_coordinates,
                         radius=AUTO_RADIUS)

  def _dp_gcd_params(self) -> dict[str, Any]:
    """DP-GCD's `solver_params` completed by its defaults (`curvature`, `selection_share`)."""
    return solver_params("dp_gcd", self.solver_params, num_coordinates=1, radius=AUTO_RADIUS)

  def _curvature_option(self) -> str:
    """DP-GCD's `curvature` (`solver_params["curvature"]`, default `AUTO_CURVATURE`)."""
    return str(self._dp_gcd_params()["curvature"])

  def _selection_share(self) -> float:
    """DP-GCD's `selection_share` (default `AUTO_SELECTION_SHARE`)."""
    return float(self._dp_gcd_params()["selection_share"])

  def _gcd_plan(self, steps: int, width: int, step_size: Any = 1.0, clip: Any = 1.0) -> budget.Plan:
    """DP-GCD's plan of `steps` iterations over `width` coordinates with this estimator's mechanisms,
    selection share and curvature ([`iterations_plan`][dpgcd_jax.solvers.dp_gcd.iterations_plan]): the
    multipliers a run at noise scale `s` draws (`params_at(s)`) and the events charged for them, in one
    place for the CV estimators' search (`ledger`) and its runs (`_train_at`)."""
    selection, update = self._mechanisms()
    return dp_gcd.iterations_plan(steps, coordinates=width, step_size=step_size, clip=clip, selection=selection,
                                  update=update, selection_share=self._selection_share(),
                                  curvature=self._curvature_option())

  def _mechanisms(self) -> tuple[str, str]:
    """(selection, update) names: Gumbel-max and Gaussian, or with `secure_noise` their
    floating-point-safe counterparts (report-noisy-max with discrete Laplace noise and a
    discrete Gaussian, `dpgcd_jax.discrete_noise`)."""
    if self.secure_noise:
      return mechanisms.secure("laplace", UPDATE)
    return SELECTION, UPDATE

  def __sklearn_tags__(self):
    tags = super().__sklearn_tags__()
    tags.input_tags.sparse = True
    return tags

  def _set_model(self, W: np.ndarray, released: _released.Released, hyper: Hyper, n: int,
                 target: _released.Released | None = None) -> None:
    """Stores the model in raw units and warns from released values (`_diagnostics.diagnose`)."""
    bound = released.bound
    p = bound.shape[0]
    unit = 1.0 if target is None else target.bound
    coef = unit * W[:, :p]
    intercept = unit * (W[:, p] if self.fit_intercept else np.zeros(W.shape[0]))  # on the centred data
    feature, target_range = self._feature_range(p), self._target_range()
    self.feature_centre_ = np.zeros(p) if feature is None else np.broadcast_to(feature.centre, (p,)).copy()
    self.feature_bound_, self.scaling_ = bound, released.how
    if target is not None:
      self.target_bound_ = target.bound
      self.target_centre_ = 0.0 if target_range is None else float(target_range.centre)
    self.n_iter_, self.step_size_, self.clip_ = hyper
    self._store(coef, intercept - coef @ self.feature_centre_ + getattr(self, "target_centre_", 0.0))
    fallback = released.how == "bound" and self.scaling == AUTO
    epsilon = float(self.epsilon)
    informative_n = (_diagnostics.informative_n(p, epsilon) if fallback else None)
    for message in _diagnostics.diagnose(
        coef, intercept, bound, released.how, n=n, epsilon=epsilon,
        target_bound=None if target is None else target.bound, classes=getattr(self, "classes_", None),
        penalty=self.penalty, max_iter=hyper.max_iter, informative_n=informative_n,
        feature_bound_noise=_diagnostics.noise_probability(released),
        target_bound_noise=None if target is None else _diagnostics.noise_probability(target)):
      warnings.warn(f"{type(self).__name__}.fit: {message}", UserWarning, stacklevel=3)

  def _declared_bound(self, p: int) -> np.ndarray | None:
    """The declared bound on the centred features (the half-width of `feature_bound`), or None."""
    feature = self._feature_range(p)
    return None if feature is None else feature.half_width

  def _feature_range(self, p: int) -> _ranges.Range | None:
    """The declared range of the `p` encoded features (`dpgcd_jax.estimators._categorical`)."""
    encoding = getattr(self, "encoding_", None)
    if encoding is None:
      return _ranges.declared("feature_bound", self.feature_bound, p)
    return encoding.expand(_ranges.declared("feature_bound", self.feature_bound, len(encoding.names_in)))

  def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
    """The names of `coef_`'s columns: the input's (`feature_names_in_`, else `x0, ...`), with
    a declared categorical column replaced by its one-hot columns `column_category`."""
    encoding = getattr(self, "encoding_", None)
    if encoding is None:
      return super().get_feature_names_out(input_features)
    return encoding.names_out()

  def _target_range(self) -> _ranges.Range | None:
    """A regressor's declared target range (None: released, or a classifier's labels +-1)."""
    return None
  def _record(self, report: Any) -> None:
    """`privacy_ = report`, charged first to the accountant (`accountant=`, else the active one)."""
    acct = accountant_lib.resolve(self.accountant)
    if acct is not None:
      acct.spend(report, f"{type(self).__name__}.fit")
    self.privacy_ = report

  def predict(self, X: Any) -> np.ndarray:
    """The class of each row (classifier) or `<clip_B(x), w> + b` (regressor), (n,).

    Warns when the model answers one class for every one of at least 30 rows, or a regressor's
    predictions barely vary (`dpgcd_jax.estimators._predictions`: a function of the returned
    predictions only, so it reveals nothing they do not).
    """
    predictions = self._predict(X)
    _predictions.predicted(self, predictions)
    return predictions

  def _predict(self, X: Any) -> np.ndarray:
    raise NotImplementedError

  def private_score(self, X: Any, y: Any, *, epsilon: float, key: jax.Array,
                    target_bound: Any = None) -> Any:
    """A private score of the fitted model on `(X, y)`: accuracy (classifier) or R^2 (regressor,
    with a public `target_bound`, default the fitted one when it was declared), a
    [`dpgcd_jax.scoring.PrivateScore`][] whose `report` is charged to the accountant.

    The data read here must be a split the model was not fitted on, or its budget adds to the
    fit's (the accountant composes both). `key`: a JAX PRNG key (required: the same key gives
    the same score). With `secure_noise=True` the score's noise is discrete too.
    """
    from dpgcd_jax import scoring  # the scores need the fitted model only here

    _validate.check_key("key", key)
    if isinstance(self, ClassifierMixin):
      return scoring.private_accuracy(np.asarray(y), self._predict(X), epsilon=epsilon, key=key,
                                      accountant=self.accountant, secure_noise=bool(self.secure_noise))
    bound = self.target_bound if target_bound is None else target_bound
    if bound is None:
      raise ValueError("Expected a public target_bound for a regressor's private R^2 (declare it in the "
                       "estimator or pass target_bound=), got target_bound=None.")
    return scoring.private_r2(np.asarray(y, float), self._predict(X), epsilon=epsilon, key=key, target_bound=bound,
                              accountant=self.accountant, secure_noise=bool(self.secure_noise))

  def fit(self, X: Any, y: Any, sample_weight: Any = None) -> DPGCDBase:
    """Fits the model privately; `privacy_` reports the total `(epsilon, delta)`.

    Args:
      X: (n, p) features: array-like, DataFrame (names kept in `feature_names_in_`) or
        scipy.sparse (CSR / CSC: the sparse path, O(nnz) per iteration).
      y: (n,) labels (classifier) or targets (regressor).
      sample_weight: must be None (see Raises).

    Returns:
      self.

    Raises:
      ValueError: naming the argument, for a bad hyperparameter or input, before any work;
        for `sample_weight` (not supported: weights change the sensitivity).
    """
    return self._fit_prepared(self._prepare(X, y, sample_weight))

  def _fit_prepared(self, data: Prepared, note: str | None = None, scaling: str | None = None) -> DPGCDBase:
    """The private fit on validated data (`note`: one more line for `privacy_`; `scaling`: as chosen
    already, with `data`, by `_training.choose_scaling`)."""
    epsilon, (n, p) = float(self.epsilon), data.X.shape
    if scaling is None:  # choose_scaling checks "per-step" against the data
      data, scaling = _training.choose_scaling(self, data, epsilon)
    hyper = self._hyper(n, p, epsilon)
    params = self._solver_params(p + bool(self.fit_intercept))  # checked before any release
    layout = self._layout(data.X)
    stored = (p, n) if sparse.is_sparse(layout) else layout.shape
    dtype = jax.dtypes.canonicalize_dtype(layout.dtype)  # the run's
    features = _released.feature_release(num_examples=n, num_features=p, shape=stored, dtype=dtype,
                                         feature_bound=self._declared_bound(p), scaling=scaling,
                                         epsilon=epsilon, delta=data.delta)
    target = self._target_release(n, stored[1], dtype)
    # No warning that depends on the data: a |y_i| above the run dtype's largest float becomes
    # inf when the targets are cast (then clipped to [-T, T] in the run).
    bar = progress.bar(total=hyper.max_iter, enabled=bool(self.verbose),  # the runs share one pass counter
                       desc=f"{type(self).__name__}.fit ({self.solver}, {len(data.targets)} run(s))")
    with np.errstate(over="ignore"), bar:
      W, report, hyper, released, target_released = self._train(layout, n, data.targets, features, target, hyper,
                                                                 data.key, epsilon=epsilon, delta=data.delta,
                                                                 prior=data.prior, rows=data.X)
    self.solver_params_ = params
    notes = [released.note] + ([] if target_released is None else [target_released.note]) + list(data.notes)
    notes += self._notes(len(data.targets), hyper, data.delta) + ([] if note is None else [note])
    self._record(report.with_notes(*notes).with_not_private(*data.not_private))
    self._set_model(W, released, hyper, n, target_released)
    return self

  def _release_target(self, key: jax.Array, targets: np.ndarray, dtype: Any) -> _released.Released | None:
    """The target bound released on the host in the run's `dtype` (the CV estimators), or None."""
    del key, targets, dtype
    return None  # classifiers: labels are +-1

  def _target_release(self, num_examples: int, size: int, dtype: Any) -> _released.TargetRelease | None:
    """The target bound's release in the runs' program, on targets stored in `size` entries of `dtype`."""
    del num_examples, size, dtype
    return None  # classifiers: labels are +-1

  def _notes(self, num_targets: int, hyper: Hyper, delta: float) -> list[str]:
    notes = [self._adapter().note(self, num_targets, hyper)]
    intercept = self._intercept_bound(hyper)
    if intercept > 1.0:
      notes.append(f"intercept clipped apart: its terms at {hyper.clip * intercept:g} (public bound "
                   f"K = {intercept:.4g} on its constant feature), the features' at clip x B_j")
    if self.delta is None:
      notes.append(f"delta = 1/n^2 = {delta:.3g} (default)")
    return notes

  def _decision(self, X: Any) -> np.ndarray:
    check_is_fitted(self)
    encoding = getattr(self, "encoding_", None)
    if encoding is None:
      X = validate_data(self, X, reset=False, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32))
    else:
      if hasattr(X, "columns") and tuple(str(c) for c in X.columns) != encoding.names_in:
        raise ValueError(f"Expected X with the columns of fit {list(encoding.names_in)}, got {list(X.columns)}.")
      X = check_array(encoding.encode(X), dtype=(np.float64, np.float32))
    centre = self.feature_centre_
    if np.any(centre):  # a declared (lower, upper) range: the same clip as in the fit
      X = np.clip(X.toarray() if sparse.is_sparse(X) else X, centre - self.feature_bound_, centre + self.feature_bound_)
    else:
      X = _training.clip_features(X, self.feature_bound_)
    return np.asarray(X @ np.atleast_2d(self.coef_).T) + self.intercept_

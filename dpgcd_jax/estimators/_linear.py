"""DPGCDClassifier and DPGCDRegressor: scikit-learn estimators on one private DP-GCD path.

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

import dataclasses
import functools
import sys
import warnings
import weakref
from collections.abc import Mapping
from typing import Any
from typing import NamedTuple
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.base import ClassifierMixin
from sklearn.base import OneToOneFeatureMixin
from sklearn.base import RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array
from sklearn.utils.validation import check_is_fitted
from sklearn.utils.validation import validate_data

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import mechanisms
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import progress
from dpgcd_jax import seeding
from dpgcd_jax import sparse
from dpgcd_jax.estimators import _categorical
from dpgcd_jax.estimators import _predictions
from dpgcd_jax.estimators import _ranges
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._defaults import AUTO_CLIP
from dpgcd_jax.estimators._defaults import AUTO_CLIP_REGRESSION
from dpgcd_jax.estimators._defaults import AUTO_CLIP_RELEASED
from dpgcd_jax.estimators._defaults import AUTO_MARGIN_STEP
from dpgcd_jax.estimators._defaults import AUTO_RADIUS
from dpgcd_jax.estimators._defaults import AUTO_STEPS_UNIT
from dpgcd_jax.estimators._defaults import AUTO_STEPS_UNIT_REGRESSION
from dpgcd_jax.estimators._defaults import CLASS_COUNT_SHARE
from dpgcd_jax.estimators._defaults import TYPICAL_SIZE_SHARE
from dpgcd_jax.estimators._defaults import Hyper
from dpgcd_jax.estimators._defaults import intercept_bound
from dpgcd_jax.estimators._defaults import known_curvature
from dpgcd_jax.estimators._defaults import released_step_size
from dpgcd_jax.estimators._solvers import ADAPTERS
from dpgcd_jax.estimators._solvers import CLIPPINGS
from dpgcd_jax.estimators._solvers import SELECTION
from dpgcd_jax.estimators._solvers import UPDATE
from dpgcd_jax.estimators._solvers import Adapter
from dpgcd_jax.estimators._solvers import check_solver
from dpgcd_jax.estimators._solvers import solver_params
from dpgcd_jax.privacy import accountant as accountant_lib
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import typical_size
from dpgcd_jax.problem import make_problem
from dpgcd_jax.solvers import dp_gcd

PENALTIES = ("l1", "l2", "elasticnet", None)
CLASS_COUNT_STREAM = 1 << 29  # fold_in data of their key (from random_state)
TYPICAL_SIZE_STREAM = 1 << 28


def key_from(random_state: Any) -> jax.Array:
  """An explicit JAX key from `random_state`.

  - None: a fresh key from the operating system's entropy (`dpgcd_jax.seeding.fresh_key`),
    never from NumPy's global state.
  - an int in [0, 2^64): that seed, for reproducibility only (the same seed replays the same
    noise: two fits with one seed on neighbouring data sets are not private against anyone who
    knows the seed).
  - a `numpy.random.RandomState` or `Generator`: 64 bits drawn from it, for
    reproducibility only: scikit-learn's `clone` (`cross_val_score`, `GridSearchCV`)
    deep-copies the generator, so every clone draws the same key and replays the same noise.
    Only None gives fresh noise at every fit.
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
  return jax.random.wrap_key_data(jax.device_put(np.asarray([seed >> 32, seed & 0xFFFFFFFF], np.uint32)))


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


class DPGCDBase(OneToOneFeatureMixin, BaseEstimator):
  """What the classifier and the regressor share: validation, releases, the private run.

  `get_feature_names_out()` names the columns of `coef_`: `feature_names_in_` (a DataFrame's
  columns) or `x0, ..., x{p-1}`.
  """

  _curvature = 1.0
  _auto_clip = AUTO_CLIP
  _auto_clip_released = AUTO_CLIP_RELEASED
  _clip_follows_data = False  # the classifier's "auto" clip from the typical feature size
  _steps_unit = AUTO_STEPS_UNIT
  _noise_cap: float | None = None

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

  def _check_params(self) -> None:
    accountant_lib.check_real("epsilon", self.epsilon, low=0.0, low_open=True)
    if not (self.accountant is None or isinstance(self.accountant, accountant_lib.Accountant)):
      raise ValueError(f"Expected accountant to be a dpgcd_jax.Accountant or None, got accountant={self.accountant!r}.")
    if self.delta is not None:
      accountant_lib.check_real("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
    _validate.check_int("verbose", int(self.verbose) if isinstance(self.verbose, bool) else self.verbose, low=0)
    if not (self.penalty is None or (isinstance(self.penalty, str) and self.penalty in PENALTIES)):
      raise ValueError(f"Expected penalty in {PENALTIES}, got penalty={self.penalty!r}.")
    _validate.check_number("alpha", self.alpha, low=0.0)
    _validate.check_number("l1_ratio", self.l1_ratio, low=0.0, high=1.0)
    if not isinstance(self.fit_intercept, (bool, np.bool_)):
      raise ValueError(f"Expected fit_intercept to be a bool, got fit_intercept={self.fit_intercept!r}.")
    _check_auto("max_iter", self.max_iter, integer=True)
    _check_auto("step_size", self.step_size)
    _check_auto("clip", self.clip)
    _released.check_scaling(self.scaling)
    _validate.check_choice("clipping", self.clipping, CLIPPINGS)
    if not isinstance(self.secure_noise, (bool, np.bool_)):
      raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={self.secure_noise!r}.")
    _categorical.check(self.categories)
    feature = _ranges.declared("feature_bound", self.feature_bound)  # its length is checked against X in fit
    if feature is not None and not feature.centred and not self.fit_intercept:
      raise ValueError(
          f"Expected fit_intercept=True with feature_bound=(lower, upper) not centred on 0: the model is fitted "
          f"on x - (lower + upper) / 2, so its intercept is -<coef_, centre>, got fit_intercept=False and "
          f"feature_bound={self.feature_bound!r}.")
    check_solver(self.solver, self.solver_params, penalty=self.penalty, step_size=self.step_size,
                 clipping=self.clipping, secure_noise=self.secure_noise)

  def _hyper(self, n: int, p: int, epsilon: float, **override: Any) -> Hyper:
    values = {k: override.get(k, getattr(self, k)) for k in Hyper._fields}
    for name in ("max_iter", "step_size", "clip"):
      _check_auto(name, values[name], integer=name == "max_iter")
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

  def _layout(self, X: Any) -> Any:
    """The features as the runs read them, built once per fit.

    Dense `X`: the device layout [`dpgcd_jax.problem.columns`][]: transposed, in the run
    dtype, with the intercept's constant feature as row `p`, and padded to the public buckets
    of `_layout_shape` (so one compiled program serves every `n` and `p` of a bucket). Sparse
    `X`: `X` itself (the intercept column is added by `_problem`).
    """
    if sparse.is_sparse(X):
      return X
    n, p = X.shape
    N, P = self._layout_shape(n, p + bool(self.fit_intercept))
    return problem_lib.columns(X, jax.dtypes.canonicalize_dtype(X.dtype), num_examples=N, num_features=P,
                               intercept=bool(self.fit_intercept))

  def _layout_shape(self, n: int, width: int) -> tuple[int, int]:
    """`(N, P)`: the public buckets ([`dpgcd_jax.problem.bucket`][]) of `n` records and `width`
    features on DP-GCD's path (the only solver that masks padded features, `Solver.padded`),
    up to `BUCKET_MAX_ENTRIES` entries (a public rule on `n p`: above it a compilation is
    small next to the run, and padding costs memory); with `secure_noise`, whose discrete
    selection cannot mask a coordinate, the records only. Elsewhere `(n, width)`."""
    if not self._adapter().padded or n * width > BUCKET_MAX_ENTRIES:
      return n, width
    return problem_lib.bucket(n), (width if self.secure_noise else problem_lib.bucket(width))

  def _intercept_bound(self, hyper: Hyper) -> float:
    """The intercept's public bound (`intercept_bound`: clipped apart from the features when
    the steps follow the released curvature; else 1)."""
    return intercept_bound(hyper.clip) if self.fit_intercept and self._steps_by_released_curvature() else 1.0

  def _problem(self, layout: Any, n: int, p: int, targets: np.ndarray, bound: np.ndarray | None,
               alpha: Any = None, l1_ratio: Any = None, intercept: float = 1.0) -> tuple[Any, np.ndarray]:
    """The problem on `[X, 1]` (`p` features) with public bounds `[B, intercept]` (first
    target as `y`), from the `_layout` (whose buffer it takes over), and the (K, N) targets
    padded like its records. `bound=None` (a dense layout): the bounds are released in the
    runs' program (`_released.Releases`), the layout is left as it is."""
    alpha = self.alpha if alpha is None else alpha
    l1_ratio = self.l1_ratio if l1_ratio is None else l1_ratio
    _validate.check_number("alpha", alpha, low=0.0)
    _validate.check_number("l1_ratio", l1_ratio, low=0.0, high=1.0)
    width = p + bool(self.fit_intercept)
    bound = bound if bound is None or not self.fit_intercept else np.append(bound, intercept)
    penalty = self._penalty(width, alpha, l1_ratio)
    if sparse.is_sparse(layout):
      X = layout
      if self.fit_intercept:
        X = scipy_sparse().hstack([X, np.ones((n, 1), X.dtype)], format="csc")
      return make_problem(X, targets[0], self._loss(), penalty=penalty, feature_bound=bound), targets
    label = 0.0 if self._loss().labels is None else self._loss().labels[-1]
    targets = np.pad(targets, ((0, 0), (0, layout.shape[1] - n)), constant_values=label)
    problem = problem_lib.from_columns(layout, targets[0], self._loss(), feature_bound=bound, num_examples=n,
                                       num_features=width, penalty=penalty)
    return problem, targets

  def _train(self, layout: Any, n: int, targets: np.ndarray, features: _released.FeatureRelease,
             target: _released.TargetRelease | None, hyper: Hyper, key: jax.Array, *, epsilon: float,
             delta: float, prior: ledger_lib.Ledger, rows: Any
             ) -> tuple[np.ndarray, Any, Hyper, _released.Released, _released.Released | None]:
    """The releases `features` and `target`, then one private run per target through the
    solver's `fit` (the one path) on the `_layout`: one compiled program on a dense layout (the
    releases are its prelude, `_released.Releases`, whose ledger the solver's `fit` composes
    with the runs); sparse features get their bounds released first, on the host (the `prior`
    of the `fit`), then declared to the runs' program.

    Returns the (targets, p [+ 1]) weights in units of the target, the privacy report of the
    releases and the runs, the hyperparameters as run (the step size capped when "auto" caps
    it), the feature bounds and the target bound (`_released.Released`, or None). `rows`: the
    features on the host (n, p), read by the typical size's release (`_follow_data`).
    """
    p = int(features.num_features)
    width = p + bool(self.fit_intercept)
    # DP-FW: the l1 ball is not equivariant to per-coordinate scaling (the other solvers are):
    # it runs on clip_1(x_ij / B_j) = clip_{B_j}(x_ij) / B_j with bound 1 (B public), so that the
    # radius is in units of the bounds; the weights come back in raw units (post-processing).
    unit = self._adapter().unit_features
    notes: tuple[str, ...] = ()
    if features.declared is not None and self._follows_data():
      hyper, prior, notes = self._follow_data(jax.random.fold_in(key, TYPICAL_SIZE_STREAM), rows,
                                              np.asarray(features.declared)[:p], hyper, n=n, epsilon=epsilon,
                                              delta=delta, prior=prior)
    intercept = self._intercept_bound(hyper)
    released = None
    if sparse.is_sparse(layout):
      released = features.release(split_keys(key, 3)[0], layout)
      bound, prior = released.bound, released.ledger + prior
      if unit:
        layout, bound = clip_features(layout, bound) @ scipy_sparse().diags((1.0 / bound).astype(layout.dtype)), \
            np.ones_like(bound)
      problem, targets = self._problem(layout, n, p, targets, bound, intercept=intercept)
      public = np.append(bound, intercept) if self.fit_intercept else bound
      prelude = _released.Releases(_released.declared_release(public, num_examples=n, num_features=width), target,
                                   in_place=False)
    else:
      problem, targets = self._problem(layout, n, p, targets, None)
      prelude = _released.Releases(dataclasses.replace(features, intercept_bound=intercept), target, unit=unit)
    result, hyper = self._run(problem, key, targets, hyper, prelude, n=n, epsilon=epsilon, delta=delta, prior=prior)
    bounds, target_bound = result.released
    released = features.finish(bounds) if released is None else released
    W = np.array(result.w, float)[:, :width]  # a copy: writable even when it is a view of the device's buffer
    if unit:
      W[:, :p] *= 1.0 / released.bound
    target_released = None if target is None else target.finish(target_bound)
    return W, result.privacy.with_notes(*notes), hyper, released, target_released

  def _follows_data(self) -> bool:
    """Whether the clip is the data-following "auto" one (the classifier's DP-GCD with the
    released curvature; with declared bounds)."""
    return self._clip_follows_data and isinstance(self.clip, str) and self._steps_by_released_curvature()

  def _follow_data(self, key: jax.Array, rows: Any, bound: np.ndarray, hyper: Hyper, *, n: int, epsilon: float,
                   delta: float, prior: ledger_lib.Ledger) -> tuple[Hyper, ledger_lib.Ledger, tuple[str, ...]]:
    """The "auto" clip `max(AUTO_CLIP_RELEASED, AUTO_MARGIN_STEP * s)`, `s` the typical feature
    size of the records in units of their public `bound` (`dpgcd_jax.privacy.typical_size`,
    released at `TYPICAL_SIZE_SHARE` of epsilon and delta), its ledger added to `prior`, and the
    `privacy_` note. The step ("auto") follows the clip (`released_step_size`). A failed draw
    (independent of the data) keeps the fixed clip, and so does a release that would not be
    informative at this `n` and budget (`typical_size.informative`, public: nothing is spent).

    Why the floor: the intercept's terms are `phi'` itself (its bound is 1), so a clip below
    `|phi'(0)| = 0.5` shrinks its steps by `clip / 0.5`, and `gamma <= 2` undoes at most half of
    that. Measured (90/10 labels from a Gaussian feature under a declared bound 3, 4000 rows,
    3 keys, `class_weight="balanced"`): clip `0.5 s` = 0.13-0.15 gave a balanced accuracy of
    0.60 / 0.63 / 0.77, the floor 0.25 gave 0.80 / 0.80 / 0.79. Without it, loose bounds gained
    (standardized Gaussian features under a declared bound 10, p = 5000, n = 4000: 0.67 against
    0.57 at 0.25), a gain that needs the intercept clipped apart from the features. With the
    intercept clipped apart (`intercept_bound`) the floor still pays: the rare informative
    terms of an imbalanced set lie in the features' tails (`benchmarks/bench_small_defaults.py`
    `imb4000_b3`, no class weights, balanced accuracy over 3 seeds: floor 0.25 0.70, against
    0.51 with the intercept clipped alike; clip 0.15 0.58, 0.1 0.51)."""
    noise = typical_size.noise_at(TYPICAL_SIZE_SHARE * epsilon, TYPICAL_SIZE_SHARE * delta)
    if not typical_size.informative(n, noise):  # public: n and the budget; nothing is spent
      return hyper, prior, (f"clip: the fixed {hyper.clip:g} (the typical feature size's release would not be "
                            f"informative at n = {n}, epsilon = {epsilon:g}: nothing spent on it)",)
    size = typical_size.release(key, rows, bound, noise)
    how = (f"clip: max({self._auto_clip_released:g}, {AUTO_MARGIN_STEP:g} x the typical feature size in units of "
           f"the bounds), the size released privately "
           f"(dpgcd_jax.privacy.typical_size, a share {TYPICAL_SIZE_SHARE:g} of the budget, noise multiplier "
           f"{noise:.4g})")
    if size is not None:
      hyper = self._hyper(n, bound.size, epsilon, clip=max(self._auto_clip_released, AUTO_MARGIN_STEP * size))
      how += f": size {size:.4g}, clip {hyper.clip:.4g}"
    else:
      how += f": the sampler failed (independent of the data), the fixed clip {hyper.clip:g} ran"
    return hyper, typical_size.ledger(noise) + prior, (how,)

  def _run(self, problem: Any, key: jax.Array, targets: np.ndarray, hyper: Hyper, prelude: _released.Releases, *,
           n: int, epsilon: float, delta: float, prior: ledger_lib.Ledger) -> tuple[Any, Hyper]:
    """The solver's `fit` with the releases `prelude` in its program; the result and the
    hyperparameters as run (its record's `run`)."""
    return self._adapter().run(self, problem, key, targets, hyper, n=n, epsilon=epsilon, delta=delta, prior=prior,
                               prelude=prelude)

  def _solver_params(self, num_coordinates: int) -> dict[str, Any]:
    """`solver_params` completed by the public defaults (`solver_params`)."""
    return solver_params(self.solver, self.solver_params, num_coordinates=num_coordinates,
                         radius=AUTO_RADIUS)

  def _train_at(self, X: Any, targets: np.ndarray, bound: np.ndarray, hyper: Hyper, noise: float,
                key: jax.Array, alpha: Any = None, l1_ratio: Any = None,
                target_unit: float | None = None) -> np.ndarray:
    """The runs of `_train` at a GIVEN noise multiplier, for a caller that accounts for
    them itself (the CV estimators' repeat-and-select); (targets, p [+ 1]) weights, on
    `targets` already in units of `target_unit` (a regressor's: the penalty follows,
    `penalties.in_target_units`)."""
    width = bound.shape[0] + bool(self.fit_intercept)
    problem, targets = self._problem(self._layout(X), X.shape[0], bound.shape[0], targets, bound, alpha, l1_ratio,
                                     intercept=self._intercept_bound(hyper))
    if target_unit is not None:
      problem = dataclasses.replace(problem, penalty=penalties.in_target_units(problem.penalty, target_unit))
    selection, update = self._mechanisms()
    params = dp_gcd.Params(hyper.step_size, hyper.clip, noise, noise, noise * dp_gcd.CURVATURE_RATIO)
    return np.stack([np.asarray(dp_gcd.run(dataclasses.replace(problem, y=jnp.asarray(t, problem.y.dtype)),
                                           jax.random.fold_in(key, k), params, passes=hyper.max_iter,
                                           selection=selection, update=update, clipping_mode=self.clipping,
                                           curvature=self._curvature_option()).w, float)[:width]
                     for k, t in enumerate(targets)])

  def _curvature_option(self) -> str:
    """DP-GCD's `curvature` (`solver_params["curvature"]`, default `AUTO_CURVATURE`)."""
    return str(solver_params("dp_gcd", self.solver_params, num_coordinates=1, radius=AUTO_RADIUS)["curvature"])

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
    """Stores the model in raw units and warns from released values (`_released.diagnose`)."""
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
    informative_n = (_released.informative_n(p, epsilon) if fallback else None)
    for message in _released.diagnose(
        coef, intercept, bound, released.how, n=n, epsilon=epsilon,
        target_bound=None if target is None else target.bound, classes=getattr(self, "classes_", None),
        penalty=self.penalty, max_iter=hyper.max_iter, informative_n=informative_n,
        feature_bound_noise=_released.noise_probability(released),
        target_bound_noise=None if target is None else _released.noise_probability(target)):
      warnings.warn(f"{type(self).__name__}.fit: {message}", UserWarning, stacklevel=3)

  def _prepare(self, X: Any, y: Any, sample_weight: Any = None) -> Prepared:
    """Validated data, the targets, the steps outside the guarantee, delta and the key."""
    self._check_params()
    if sample_weight is not None:
      raise ValueError(
          f"Expected sample_weight=None: weights are not supported, because a record's weight "
          f"multiplies its clipped gradient, so the sensitivity (2 C / n) would need a public "
          f"bound on the weights; got sample_weight of type {type(sample_weight).__name__}.")
    key = key_from(self.random_state)
    encoding = _categorical.declared(self.categories, X)  # public: the declared categories
    X_in = X
    if encoding is not None:
      X = encoding.encode(X)
    X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32),
                         ensure_min_samples=2, y_numeric=not isinstance(self, ClassifierMixin))
    self.encoding_ = encoding
    if encoding is not None:  # the input's columns, as scikit-learn names them
      self.n_features_in_ = len(encoding.names_in)
      if hasattr(X_in, "columns"):
        self.feature_names_in_ = np.asarray(encoding.names_in, dtype=object)
    n, p = X.shape
    feature = self._feature_range(p)
    if feature is not None and not feature.centred and sparse.is_sparse(X):
      raise ValueError(
          f"Expected a dense X or feature_bound centred on 0 (a bound B, or (-B, B)): with "
          f"feature_bound=(lower, upper) the model is fitted on x - (lower + upper) / 2, which is not "
          f"sparse, got X of type {type(X).__name__} and feature_bound={self.feature_bound!r}.")
    delta = 1.0 / n**2 if self.delta is None else float(self.delta)
    if self.delta is not None and delta >= 1.0 / n:
      warnings.warn(
          f"{type(self).__name__}.fit: delta={delta:g} >= 1/n = {1.0 / n:.3g} (n = {n} rows): a mechanism that "
          f"publishes one record at random is (0, 1/n)-DP, so this delta does not rule that out. The usual "
          f"choice is delta much smaller than 1/n, e.g. delta=None (1/n^2 = {1.0 / n**2:.3g}, the default).",
          UserWarning, stacklevel=3)
    warn_model_selection(type(self).__name__)
    acct = accountant_lib.resolve(self.accountant)
    if acct is not None:  # before any private computation (the labels' encoding included)
      acct.check(float(self.epsilon), delta, f"{type(self).__name__}.fit")
    targets, not_private, prior, notes = self._targets(y, key)
    target = self._target_range()
    if feature is not None and not feature.centred:  # public shifts (see _ranges)
      with np.errstate(over="ignore"):  # no warning from the data: an inf is clipped to the bound in the run
        X = X - feature.centre.astype(X.dtype)
    targets = np.stack(targets) if target is None else np.stack(targets) - target.centre
    return Prepared(X, targets, not_private, delta, key, prior, notes)

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

  def _fit_prepared(self, data: Prepared, note: str | None = None) -> DPGCDBase:
    """The private fit on validated data (`note`: one more line for `privacy_`)."""
    epsilon, (n, p) = float(self.epsilon), data.X.shape
    hyper = self._hyper(n, p, epsilon)
    params = self._solver_params(p + bool(self.fit_intercept))  # checked before any release
    layout = self._layout(data.X)
    stored = (p, n) if sparse.is_sparse(layout) else layout.shape
    dtype = jax.dtypes.canonicalize_dtype(layout.dtype)  # the run's
    features = _released.feature_release(num_examples=n, num_features=p, shape=stored, dtype=dtype,
                                         feature_bound=self._declared_bound(p), scaling=self.scaling,
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
      X = clip_features(X, self.feature_bound_)
    return np.asarray(X @ np.atleast_2d(self.coef_).T) + self.intercept_


BUCKET_MAX_ENTRIES = 1 << 22  # 16 MB of float32 features


@functools.partial(jax.jit, static_argnums=1)
def split_keys(key: jax.Array, num: int) -> tuple[jax.Array, ...]:
  """`jax.random.split(key, num)` as a tuple, in one program (not a split and an unstack)."""
  return tuple(jax.random.split(key, num))


_WARNED_SELECTIONS: weakref.WeakSet = weakref.WeakSet()


def warn_model_selection(name: str) -> None:
  """Warns once per scikit-learn model-selection call (`GridSearchCV`, `cross_val_score`, ...)
  that runs this estimator's `fit`: its scores read the data without noise.

  Reads the call stack only (public: which code runs, never the data).
  """
  outer = None
  frame: Any = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None:
    if str(frame.f_globals.get("__name__", "")).startswith("sklearn.model_selection"):
      outer = frame
    frame = frame.f_back
  if outer is None:
    return
  caller = outer.f_locals.get("self", outer.f_locals.get("estimator"))
  try:
    if caller in _WARNED_SELECTIONS:
      return
    _WARNED_SELECTIONS.add(caller)
  except TypeError:  # not weak-referenceable: warn every time
    pass
  what = type(caller).__name__ if outer.f_code.co_name == "fit" else outer.f_code.co_name
  base = name.removesuffix("CV")
  warnings.warn(
      f"{name}.fit is run by scikit-learn's {what}: its scores read the held-out rows without noise, so the "
      f"scores it reports, and any hyperparameters chosen by them, are not private, and each fit spends its "
      f"budget on the same rows. Use {base}CV (a private search whose selection is in privacy_) and private_score / "
      f"dpgcd_jax.private_accuracy / private_r2 (noisy scores charged to an Accountant) instead.",
      _validate.PrivacyLeakWarning, stacklevel=4)


def clip_features(X: Any, bound: np.ndarray) -> Any:
  """`X` (dense or scipy.sparse) with column j clipped to `[-B_j, B_j]` (zeros stay zero)."""
  if not sparse.is_sparse(X):
    return np.clip(X, -bound, bound)
  X = X.tocsr(copy=True)
  X.data = np.clip(X.data, -bound[X.indices], bound[X.indices])
  return X


class Targets(NamedTuple):
  """A fit's (K,) targets, the steps outside the guarantee, and what encoding them released."""

  targets: list[np.ndarray]
  not_private: tuple[str, ...]
  prior: ledger_lib.Ledger
  notes: tuple[str, ...]


class Prepared(NamedTuple):
  """A validated fit input: `X`, (K, n) `targets`, steps outside the guarantee, delta, key."""

  X: Any
  targets: np.ndarray
  not_private: tuple[str, ...]
  delta: float
  key: jax.Array
  prior: ledger_lib.Ledger = ledger_lib.Ledger()  # releases made while preparing (class counts)
  notes: tuple[str, ...] = ()


def scipy_sparse() -> Any:
  """`scipy.sparse` (imported when sparse input is used)."""
  import scipy.sparse  # pylint: disable=import-outside-toplevel
  return scipy.sparse


class DPGCDClassifier(ClassifierMixin, DPGCDBase):
  """Differentially private logistic regression by greedy coordinate descent (DP-GCD).

  Labels: any two labels (encoded as -1 / +1, `classes_[1]` positive); more classes are
  fitted one-vs-rest, one private run per class, the budget split by composing all the runs
  in one ledger. Each run (Mangold et al. 2023), from `w = 0` with `M_j = B_j^2 / 4`:

  $$
  g_j = \\frac1n \\sum_i \\mathrm{clip}(\\phi'(\\langle x_i, w\\rangle, y_i) x_{ij},
  \\pm C_j), \\quad j_t = \\arg\\max_j \\frac{|g_j|}{\\sqrt{M_j}} + b \\bar\\Delta G_j,
  \\quad w_{j_t} \\leftarrow \\mathrm{prox}\\big(w_{j_t} - \\tfrac{\\gamma}{M_{j_t}}
  (g_{j_t} + s \\Delta_{j_t} \\xi)\\big)
  $$

  with `G_j ~ Gumbel`, `xi ~ N(0, 1)`, `Delta_j = 2 C_j / n`. Privacy: see
  `dpgcd_jax.estimators._linear`; the whole fit is `(epsilon, delta)`-DP.

  Defaults that learn (computed from public quantities only: `n`, `p`, `epsilon`, `B`).
  With a bound `B`, `M_j = beta B^2` is a worst case: for a binary word of frequency `q` the
  true curvature `beta mean_i x_ij^2` is `q` times that, so the step `1 / M_j` is `1 / q` too
  short. DP-GCD therefore releases the selected feature's curvature at each step
  (`solver_params={"curvature": "released"}`, the default; [`dpgcd_jax.curvature`][]) and steps
  by `gamma / hat M_j`. "auto" then takes `T = sqrt(n epsilon / 80)` greedy steps in [5, 100]
  ([`auto_greedy_steps`][dpgcd_jax.estimators._defaults.auto_greedy_steps]: steps past the
  features that matter add noise, so `T` follows the budget, not `p`) and
  `step_size = min(2, 0.5 / clip)` ([`released_step_size`][dpgcd_jax.estimators._defaults.released_step_size]).
  The clip follows the data: with declared bounds it is `max(0.25, 0.5 s)`, `s` the median
  over records of the mean size of a record's nonzero features in units of their bounds,
  released privately
  ([`dpgcd_jax.privacy.typical_size`][], `TYPICAL_SIZE_SHARE` = 5% of epsilon and delta): 0.5
  for binary features (every term is `phi' B_j`, and a lower clip turns the gradient into a
  count of signs), 0.25 for features spread below their bounds (the floor keeps the
  intercept's steps: `_follow_data`). Measured (`benchmarks/bench_high_dim.py` sets, eps = 1,
  2 keys; fixed clip 0.25 -> 0.5): text-like n = 32000 0.62 -> 0.66, binary n = 8000 0.70 -> 0.71.
  With released bounds the clip is 0.25 (dense and sparse X alike).
  With `curvature="public"` and for the other solvers: clip 0.1 and
  `step_size = max(1, 0.5 beta / clip)` (a margin move of at most about 0.5 per step), and
  `T = n epsilon / sqrt(p)` in [10, 1000] (DP-CD: that many coordinate updates).
  Measured: `benchmarks/results/high_dim_quick.md` and the docs page "High dimension".

  Args:
    penalty: "l1", "l2", "elasticnet" or None; the intercept is never penalized.
    alpha: penalty strength (`alpha ||w||_1`, `alpha / 2 ||w||^2` or scikit-learn's
      elastic net), >= 0, on `coef_` in raw units: a regressor, fitted on `y / T`, rescales
      it (`penalties.in_target_units`), so that `alpha` is scikit-learn's `Lasso` alpha.
    l1_ratio: elastic-net mixing in [0, 1].
    epsilon: total privacy budget, > 0.
    delta: total delta in (0, 1); None (default) uses `1 / n^2` for `n` training rows.
    fit_intercept: learn an intercept, as a coordinate of the same private run.
    classes: the PUBLIC label set (a list of at least 2 labels). A label of `y` outside it is
      a ValueError; a declared class absent from `y` is fine (its run sees only negatives).
      None (default) reads the classes from `y` without noise: a `PrivacyLeakWarning`,
      and `privacy_.not_private` records it.
    class_weight: a PUBLIC dict `{class: weight > 0}` over the declared `classes` (missing
      classes weigh 1), or None. Each example's logistic loss is multiplied by its class's
      weight divided by the largest weight (`losses.weighted_logistic`), before the per-example
      derivatives are clipped: the sensitivity, and so the privacy, is the unweighted fit's.
      Measured (90/10 labels, 4000 rows, epsilon = 1, 3 seeds): `{0: 1, 1: 8}` raised the
      balanced accuracy from 0.50-0.58 to 0.78-0.79. "balanced" (declared classes only):
      weights `n / (K c_k)` from class counts released privately in the fit's ledger
      (`CLASS_COUNT_SHARE` of epsilon, Laplace, discrete with `secure_noise`; the noisy counts
      are `class_counts_`): 0.78 against 0.50-0.58 on the same data.
    feature_bound: PUBLIC bound `B > 0` on `|x_ij|` (a scalar, or a list / array of p):
      features are clipped to `[-B, B]` at fit and predict time. Or a PUBLIC range, a Python
      tuple `(lower, upper)` (each end a scalar or of p), as diffprivlib's `bounds`: features
      are clipped to `[lower, upper]` and the model is fitted on `x - (lower + upper) / 2`
      with the bound `(upper - lower) / 2` (the same sensitivity; needs `fit_intercept=True`,
      and dense X unless the range is centred on 0). A tuple is always a range. None
      (default) releases symmetric bounds privately (`scaling`), accounted in `privacy_`.
    categories: PUBLIC categorical columns, `{column: [category, ...]}` (a DataFrame's column
      name or a position), one-hot encoded inside (one 0/1 column per declared category; a
      value outside them encodes as zeros) with the public bound 1; `coef_` and
      `get_feature_names_out()` follow the encoded columns. None (default): all numeric.
      See `dpgcd_jax.estimators._categorical`.
    scaling: how bounds are released when `feature_bound` is None: "private" (per-feature
      private scales, [`dpgcd_jax.privacy.scales`][]), "bound" (one private bound for every
      feature) or "auto" (default): "private" when `n` is large enough for the per-feature
      scales to be informative at this epsilon (a rule on public `n`, `p`, `epsilon`:
      [`dpgcd_jax.privacy.scales.scales_informative`][], e.g. about 14,000 rows at p = 30
      for a scale budget of 0.1), else "bound", with a warning when the released model
      suggests it failed. Either way the features are used in units of their bound: DP-GCD
      is equivariant to per-coordinate scaling, so this is a fit on `x_ij / B_j`.
    clipping: "coordinate" (default: the paper's per-coordinate clipping of `phi' x_ij` at
      `clip B_j`) or "derivative" (the scalar `phi'` clipped at `clip`: the same
      sensitivity `2 clip B_j / n`; measured less accurate here, see DPGCDRegressor).
    secure_noise: floating-point-safe noise (`dpgcd_jax.discrete_noise`): report-noisy-max
      with discrete Laplace noise and discrete Gaussian updates (and curvature releases) on a
      public grid, accounted as such. Several times slower per step. The released bounds and
      scales are exact integer mechanisms in every mode. Not covered: the CV estimators'
      validation scores (float Laplace), and float rounding before the snap (module docstring
      of `dpgcd_jax.discrete_noise`).
    max_iter: DP-GCD steps `T`, or "auto" (see above).
    step_size: `gamma` in units of `1 / M_j`, or "auto" (see above).
    clip: bound on `|phi'|` (per-example gradient `phi' x_ij` clipped at `clip B_j`), or
      "auto" (see above).
    solver: the private solver of the runs: "dp_gcd" (default), "dp_fw" (DP Frank-Wolfe on the
      l1 ball, [`dpgcd_jax.solvers.dp_fw`][]; penalty None or "l2", step_size "auto"),
      "dp_iht" (private iterative hard thresholding, [`dpgcd_jax.solvers.dp_iht`][]),
      "two_stage" (peeling of a support, then DP-GCD on it, [`dpgcd_jax.solvers.two_stage`][])
      or "dp_cd" (randomized coordinate descent, [`dpgcd_jax.solvers.dp_cd`][]; `max_iter`
      counts passes of `p` updates, "auto" about DP-GCD's number of updates). The bounds'
      releases, the one ledger and the units of `coef_` are the same for every solver;
      `secure_noise` exists for "dp_gcd" and "dp_cd" only; the CV estimators search
      "dp_gcd" only. A bad combination is a ValueError naming the argument, before any work.
    solver_params: None or a dict of the solver's own hyperparameters (public): "dp_fw":
      `radius` (the l1 radius in units of the feature bounds, and of `T` for a regressor;
      default `AUTO_RADIUS` = 5); "dp_iht": `sparsity` (coordinates kept, the
      intercept counting as one; default `min(10, p + 1)`) and `selection_share`;
      "two_stage": `sparsity` and `support_share`; "dp_gcd", "dp_cd": none. With
      "dp_iht", `step_size="auto"` is DP-GCD's divided by `sparsity`.
    random_state: None (default: a fresh key from the operating system's entropy), an int
      (reproducibility only: the same int replays the same noise), a NumPy `RandomState` /
      `Generator`, or a JAX key.
    accountant: a [`dpgcd_jax.Accountant`][dpgcd_jax.privacy.accountant.Accountant] holding the
      budget of the data set across fits and scores, or None (default: the one active in a
      `with accountant:` block, if any). `fit` is refused before any private computation when
      `(epsilon, delta)` would exceed what remains; its `privacy_` is charged to it.
    verbose: 0 (default) or more: a progress bar (tqdm, on stderr) over the passes of the
      private runs (the CV estimators: of every repetition of their search). It reports pass
      counts only, and the fit is the same with or without it (`dpgcd_jax.progress`).

  Attributes:
    coef_, intercept_: the private model.
    solver_params_: the solver's hyperparameters as run (`solver_params` and the defaults).
    feature_bound_: (p,) the public bounds used (declared or privately released): the
      half-widths of the ranges inputs are clipped to, `feature_centre_ +- feature_bound_`.
    feature_centre_: (p,) the centres of those ranges (0 unless `feature_bound=(lower, upper)`).
    scaling_: how they were obtained: "declared", "private" or "bound".
    n_iter_, step_size_, clip_: the resolved hyperparameters.
    privacy_: the [`dpgcd_jax.privacy.PrivacyReport`][] of the fit (total epsilon, delta).
    n_features_in_, feature_names_in_: as in scikit-learn.

  Examples:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 5)) * [1.0, 100.0, 1.0, 1.0, 1.0]   # known public ranges
    >>> y = np.where(X[:, 0] - X[:, 1] / 100 > 0, "spam", "ham")
    >>> model = DPGCDClassifier(classes=["ham", "spam"], epsilon=1.0,
    ...                         feature_bound=[3.0, 300.0, 3.0, 3.0, 3.0], random_state=0)
    >>> model.fit(X, y).score(X, y) > 0.8
    True
    >>> round(model.privacy_.epsilon, 3), model.privacy_.end_to_end
    (1.0, True)
  """

  _curvature = known_curvature(losses_lib.logistic)
  _clip_follows_data = True

  def __init__(self, *, classes=None, class_weight=None, penalty=None, alpha=1e-4, l1_ratio=0.5, epsilon=1.0,
               delta=None, fit_intercept=True, feature_bound=None, categories=None, scaling=AUTO,
               clipping="coordinate", secure_noise=False, max_iter=AUTO, step_size=AUTO, clip=AUTO,
               solver="dp_gcd", solver_params=None, random_state=None, accountant=None, verbose=0):
    super().__init__(penalty=penalty, alpha=alpha, l1_ratio=l1_ratio, epsilon=epsilon, delta=delta,
                     fit_intercept=fit_intercept, feature_bound=feature_bound, categories=categories, scaling=scaling,
                     clipping=clipping, secure_noise=secure_noise, max_iter=max_iter,
                     step_size=step_size, clip=clip, solver=solver, solver_params=solver_params,
                     random_state=random_state, accountant=accountant, verbose=verbose)
    self.classes = classes
    self.class_weight = class_weight

  def _check_params(self) -> None:
    super()._check_params()
    if self.classes is not None:
      check_classes(self.classes)
    self._class_weights()

  def _class_weights(self, classes: np.ndarray | None = None) -> np.ndarray | None:
    """The class weights in the order of `classes` (default the declared ones), divided by
    their maximum (so every example's weight is in (0, 1]), or None. With declared classes
    everything is checked before any data is read (a PUBLIC dict over a public label set);
    with `classes=None` (the label set read from `y`, not private) a key absent from `y` is
    ignored rather than raising on the data."""
    if self.class_weight is None:
      return None
    if isinstance(self.class_weight, str) and self.class_weight == "balanced":
      if self.classes is None:
        raise ValueError("Expected declared classes= with class_weight='balanced' (its class counts are released "
                         "privately over a public label set), got classes=None.")
      return None  # released from the data in _targets
    if not isinstance(self.class_weight, Mapping):
      raise ValueError(f"Expected class_weight to be None, 'balanced' or a dict {{class: weight > 0}} over the "
                       f"classes, got class_weight={self.class_weight!r}.")
    for c, w in self.class_weight.items():
      _validate.check_number(f"class_weight[{c!r}]", w, low=0.0, low_open=True)
    if classes is None and self.classes is not None:
      classes = check_classes(self.classes)
      unknown = [c for c in self.class_weight if c not in classes.tolist()]
      if unknown:
        raise ValueError(f"Expected the keys of class_weight in classes={classes.tolist()}, "
                         f"got class_weight={self.class_weight!r}.")
    if classes is None:
      return None  # checked; weighed once the classes are read from y
    weights = np.asarray([self.class_weight.get(c, 1.0) for c in classes.tolist()], float)
    return weights / weights.max()

  def _loss(self) -> losses_lib.Loss:
    return losses_lib.logistic if self.class_weight is None else losses_lib.weighted_logistic

  def _targets(self, y: np.ndarray, key: jax.Array) -> Targets:
    if self.classes is None:
      check_classification_targets(y)
      warnings.warn(
          f"{type(self).__name__}: classes=None, so the label set is read from y without noise "
          f"(a record that is the only member of its class changes classes_ and coef_.shape): "
          f"declare the public label set, e.g. classes={np.unique(y)[:3].tolist()}..., for a fit "
          f"that is private end to end.", _validate.PrivacyLeakWarning, stacklevel=4)
      self.classes_ = np.unique(y)
      not_private: tuple[str, ...] = ("label set: classes_ read from y without noise (classes=None)",)
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
    weights = self._class_weights(self.classes_)
    prior, notes = ledger_lib.Ledger(), cast(tuple[str, ...], ())
    if isinstance(self.class_weight, str):  # "balanced" (checked)
      weights, prior, notes = self._balanced_weights(y, jax.random.fold_in(key, CLASS_COUNT_STREAM))
    # Weighted: the target +-w_i carries the label (its sign) and the example's class weight
    # (losses.weighted_logistic); every derivative is clipped after the weighting, so the
    # sensitivity is the unweighted one.
    weight = 1.0 if weights is None else weights[np.searchsorted(self.classes_, y)]
    return Targets([np.where(y == c, weight, -weight) for c in positives], not_private, prior, notes)

  def _balanced_weights(self, y: np.ndarray, key: jax.Array
                        ) -> tuple[np.ndarray, ledger_lib.Ledger, tuple[str, ...]]:
    """`n / (K max(c_k, 1))` from the class counts released by the Laplace update mechanism
    (discrete with `secure_noise`), divided by the largest, with the release's ledger and `privacy_` note.

    Privacy: replacing one record moves two counts by 1 each (the others are unchanged), so the
    counts with noise of multiplier `2 / eps_w` per count are two `Laplace(eps_w / 2)` releases:
    `eps_w`-DP, `eps_w = CLASS_COUNT_SHARE * epsilon`, composed in the fit's one ledger (the runs
    are calibrated to what remains). `n` and the label set are public.
    """
    epsilon_w = CLASS_COUNT_SHARE * float(self.epsilon)
    counts = np.array([np.sum(y == c) for c in self.classes_], np.float64)  # exact integers
    update = mechanisms.update("discrete_laplace" if self.secure_noise else "laplace")
    with jax.enable_x64(True):
      noisy = np.asarray(mechanisms.release(update, key, counts, 2.0 / epsilon_w, 1.0))
    self.class_counts_ = noisy
    weights = y.shape[0] / (len(self.classes_) * np.maximum(noisy, 1.0))
    note = (f"class counts for class_weight='balanced': {update.name} noise on each of {len(self.classes_)} "
            f"counts (multiplier {2.0 / epsilon_w:.4g}, epsilon {epsilon_w:.4g} in all; a record moves two counts)")
    return weights / weights.max(), ledger_lib.Ledger.of(("class counts", update.event(2.0 / epsilon_w), 2)), (note,)

  def _store(self, coef: np.ndarray, intercept: np.ndarray) -> None:
    self.coef_, self.intercept_ = coef, intercept

  def decision_function(self, X: Any) -> np.ndarray:
    """`<clip_B(x), w> + b`: (n,) for two classes, (n, classes) one-vs-rest."""
    scores = self._decision(X)
    return scores[:, 0] if scores.shape[1] == 1 else scores

  def _predict(self, X: Any) -> np.ndarray:
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


class DPGCDRegressor(RegressorMixin, DPGCDBase):
  """Differentially private least squares or Huber regression by DP-GCD.

  The same private run as [`DPGCDClassifier`][dpgcd_jax.estimators._linear.DPGCDClassifier] with
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
  lie well inside their bounds). "auto" also caps `step_size` so that the noise the run
  may add to a prediction stays below `0.5 T` (a function of the public noise multiplier,
  `n` and the number of steps).

  Args:
    target_bound: PUBLIC bound `T > 0` on `|y|`, or a PUBLIC range, a tuple of scalars
      `(lower, upper)` (fitted on `y - (lower + upper) / 2` with `T = (upper - lower) / 2`);
      None (default) releases a symmetric `T` privately.
    loss: "squared" (default) or "huber".
    huber_delta: the Huber threshold, > 0, in units of the target bound `T` (the residual of
      the fit on `y / T`).
    others: as [`DPGCDClassifier`][dpgcd_jax.estimators._linear.DPGCDClassifier] (`clip` bounds the residual).

  Attributes:
    target_bound_: the public `T` used (declared, or privately released): `y` is clipped to
      `target_centre_ +- target_bound_` in the fit.
    target_centre_: the centre of that range (0 unless `target_bound=(lower, upper)`).
    others: as [`DPGCDClassifier`][dpgcd_jax.estimators._linear.DPGCDClassifier].

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

  def _loss(self) -> losses_lib.Loss:
    return losses_lib.squared if self.loss == "squared" else losses_lib.huber(float(self.huber_delta))

  def _targets(self, y: np.ndarray, key: jax.Array) -> Targets:
    del key  # a regressor releases nothing here
    return Targets([np.asarray(y, float)], (), ledger_lib.Ledger(), ())

  _noise_cap = _released.NOISE_CAP
  _auto_clip = _auto_clip_released = AUTO_CLIP_REGRESSION
  _steps_unit = AUTO_STEPS_UNIT_REGRESSION

  def _store(self, coef: np.ndarray, intercept: np.ndarray) -> None:
    self.coef_, self.intercept_ = coef[0], float(intercept[0])

  def _predict(self, X: Any) -> np.ndarray:
    """`<clip_B(x), w> + b`, (n,)."""
    return self._decision(X)[:, 0]

"""The private path shared by DPGCDClassifier and DPGCDRegressor (`DPGCDBase`): one DP-GCD fit.

The classes are in `_classifier.py` and `_regressor.py`; the defaults in `_defaults.py`, the
solvers' adapters in `_solvers.py`, the releases in `_released.py`.

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
from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.base import ClassifierMixin
from sklearn.base import OneToOneFeatureMixin
from sklearn.utils.validation import check_array
from sklearn.utils.validation import check_is_fitted
from sklearn.utils.validation import validate_data

from dpgcd_jax import _validate
from dpgcd_jax import dense
from dpgcd_jax import layout as layout_lib
from dpgcd_jax import mechanisms
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import progress
from dpgcd_jax import seeding
from dpgcd_jax import sparse
from dpgcd_jax.estimators import _categorical
from dpgcd_jax.estimators import _diagnostics
from dpgcd_jax.estimators import _predictions
from dpgcd_jax.estimators import _ranges
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._defaults import AUTO_CLIP
from dpgcd_jax.estimators._defaults import AUTO_CLIP_RELEASED
from dpgcd_jax.estimators._defaults import AUTO_MARGIN_STEP
from dpgcd_jax.estimators._defaults import AUTO_RADIUS
from dpgcd_jax.estimators._defaults import AUTO_STEPS_UNIT
from dpgcd_jax.estimators._defaults import TYPICAL_SIZE_SHARE
from dpgcd_jax.estimators._defaults import Hyper
from dpgcd_jax.estimators._defaults import intercept_bound
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
  _searches = False  # the CV estimators' fit is a private search

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

    Dense `X`: the device layout [`dpgcd_jax.dense.columns`][]: transposed, in the run
    dtype, with the intercept's constant feature as row `p`, and padded to the public buckets
    of `_layout_shape` (so one compiled program serves every `n` and `p` of a bucket). Sparse
    `X`: `X` itself (the intercept column is added by `_problem`).
    """
    if sparse.is_sparse(X):
      return X
    n, p = X.shape
    N, P = self._layout_shape(n, p + bool(self.fit_intercept))
    return dense.columns(X, jax.dtypes.canonicalize_dtype(X.dtype), num_examples=N, num_features=P,
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
    problem = layout_lib.from_columns(layout, targets[0], self._loss(), feature_bound=bound, num_examples=n,
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
      declared = np.asarray(features.declared)[:p]
      hyper, prior, notes = self._follow_data(
          jax.random.fold_in(key, TYPICAL_SIZE_STREAM), lambda k, noise: typical_size.release(k, rows, declared, noise),
          p, hyper, n=n, epsilon=epsilon, delta=delta, prior=prior)
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

  def _follow_data(self, key: jax.Array, release_size: Callable[[jax.Array, float], float | None], p: int,
                   hyper: Hyper, *, n: int, epsilon: float, delta: float, prior: ledger_lib.Ledger
                   ) -> tuple[Hyper, ledger_lib.Ledger, tuple[str, ...]]:
    """The "auto" clip `max(AUTO_CLIP_RELEASED, AUTO_MARGIN_STEP * s)`, `s` the typical feature
    size of the `n` records of `p` features in units of their public bounds
    (`dpgcd_jax.privacy.typical_size`, `release_size(key, noise)`: in memory or over row chunks,
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
    size = release_size(key, noise)
    how = (f"clip: max({self._auto_clip_released:g}, {AUTO_MARGIN_STEP:g} x the typical feature size in units of "
           f"the bounds), the size released privately "
           f"(dpgcd_jax.privacy.typical_size, a share {TYPICAL_SIZE_SHARE:g} of the budget, noise multiplier "
           f"{noise:.4g})")
    if size is not None:
      hyper = self._hyper(n, p, epsilon, clip=max(self._auto_clip_released, AUTO_MARGIN_STEP * size))
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
    delta = self._delta(n, "fit")
    warn_model_selection(type(self).__name__)
    targets, not_private, prior, notes = self._targets(y, key)
    target = self._target_range()
    if feature is not None and not feature.centred:  # public shifts (see _ranges)
      with np.errstate(over="ignore"):  # no warning from the data: an inf is clipped to the bound in the run
        X = X - feature.centre.astype(X.dtype)
    targets = np.stack(targets) if target is None else np.stack(targets) - target.centre
    return Prepared(X, targets, not_private, delta, key, prior, notes)

  def _delta(self, n: int, method: str) -> float:
    """The fit's delta (`1/n^2` by default; a warning at `delta >= 1/n`), checked against the
    accountant before any private computation (public: `n` and the arguments)."""
    delta = 1.0 / n**2 if self.delta is None else float(self.delta)
    if self.delta is not None and delta >= 1.0 / n:
      warnings.warn(
          f"{type(self).__name__}.{method}: delta={delta:g} >= 1/n = {1.0 / n:.3g} (n = {n} rows): a mechanism "
          f"that publishes one record at random is (0, 1/n)-DP, so this delta does not rule that out. The usual "
          f"choice is delta much smaller than 1/n, e.g. delta=None (1/n^2 = {1.0 / n**2:.3g}, the default).",
          UserWarning, stacklevel=4)
    acct = accountant_lib.resolve(self.accountant)
    if acct is not None:
      acct.check(float(self.epsilon), delta, f"{type(self).__name__}.{method}")
    return delta

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

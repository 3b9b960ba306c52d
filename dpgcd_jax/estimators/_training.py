"""The private run of an estimator's fit: the device layout, the problem, the releases and the runs.

The methods of [`DPGCDBase`][dpgcd_jax.estimators._linear.DPGCDBase] that turn validated data
into weights (`_layout`, `_problem`, `_train`, ...), as functions of the estimator (`self`)
bound in its class: `_train` makes the fit's releases (the feature bounds, a regressor's target
bound, the classifier's data-following clip) and its runs through the solver's own `fit`
(the one path from a budget to a run, [`dpgcd_jax.solvers.budget.private_fit`][]), all in one
ledger; `_train_at` runs DP-GCD at a given noise multiplier for a caller that accounts for the
runs itself (the CV estimators' repeat-and-select). The hyperparameters they run with are the
estimator's (`_hyper`, from [`dpgcd_jax.estimators._defaults`][]), the solver's record its
(`_adapter`, [`dpgcd_jax.estimators._solvers`][]).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import dense
from dpgcd_jax import layout as layout_lib
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sparse
from dpgcd_jax.estimators import _inputs
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._defaults import SIZE_TO_BOUND
from dpgcd_jax.estimators._defaults import TYPICAL_SIZE_SHARE
from dpgcd_jax.estimators._defaults import Hyper
from dpgcd_jax.estimators._defaults import bound_scale
from dpgcd_jax.estimators._defaults import shrunk_bounds
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import scale_spread
from dpgcd_jax.privacy import typical_size
from dpgcd_jax.problem import make_problem
from dpgcd_jax.solvers import dp_gcd

TYPICAL_SIZE_STREAM = 1 << 28
SPREAD_STREAM = 1 << 29
# `scaling="auto"` asks whether the scales spread (`choose_scaling`) from n >= SPREAD_MIN_N records and
# n epsilon >= SPREAD_MIN_N_EPSILON on (public): the vote's margin n / 2 is then 3.7 of its noise scales or more,
# and a small table keeps one program for every epsilon (measured where both designs were run: `choose_scaling`).
SPREAD_MIN_N = SPREAD_MIN_N_EPSILON = 1000
BUCKET_MAX_ENTRIES = 1 << 22  # 16 MB of float32 features


def build_layout(self: Any, X: Any) -> Any:
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


def layout_shape(self: Any, n: int, width: int) -> tuple[int, int]:
  """`(N, P)`: the public buckets ([`dpgcd_jax.problem.bucket`][]) of `n` records and `width`
  features on DP-GCD's path (the only solver that masks padded features, `Solver.padded`),
  up to `BUCKET_MAX_ENTRIES` entries (a public rule on `n p`: above it a compilation is
  small next to the run, and padding costs memory); with `secure_noise`, whose discrete
  selection cannot mask a coordinate, the records only. Elsewhere `(n, width)`."""
  if not self._adapter().padded or n * width > BUCKET_MAX_ENTRIES:
    return n, width
  return problem_lib.bucket(n), (width if self.secure_noise else problem_lib.bucket(width))


def build_penalty(self: Any, p: int, alpha: float, l1_ratio: float) -> Any:
  """`self.penalty` on `p` coordinates of strength `alpha`, the intercept's (the last) not
  penalized; None without a penalty."""
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


def build_problem(self: Any, layout: Any, n: int, p: int, targets: np.ndarray, bound: np.ndarray | None,
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


def train(self: Any, layout: Any, n: int, targets: np.ndarray, features: _released.FeatureRelease,
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
  target_units = None  # the centred targets in units of a declared target bound
  if target is not None and target.how == _released.DECLARED:
    target_units = np.asarray(targets[0], np.float64) / float(target.declared)
  records = self._size_records(rows, None if features.declared is None else np.asarray(features.declared)[:p],
                               target_units)
  if records is not None and self._follows_data():
    size_rows, size_bound = records
    hyper, prior, notes, scale = self._follow_data(
        jax.random.fold_in(key, TYPICAL_SIZE_STREAM),
        lambda k, noise: typical_size.release(k, size_rows, size_bound, noise),
        p, hyper, n=n, epsilon=epsilon, delta=delta, prior=prior)
    if scale < 1.0:  # declared bounds far above the data, shrunk (`bound_scale`): the runs clip at them
      features = dataclasses.replace(features, declared=shrunk_bounds(features.declared, scale))
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
  if features.how == _released.PER_STEP:  # the bounds DP-GCD released for the features it selected (one run)
    bounds = np.asarray(result.trace.bounds)[0]
  released = features.finish(bounds) if released is None else released
  W = np.array(result.w, float)[:, :width]  # a copy: writable even when it is a view of the device's buffer
  if unit:
    W[:, :p] *= 1.0 / released.bound
  target_released = None if target is None else target.finish(target_bound)
  return W, result.privacy.with_notes(*notes), hyper, released, target_released


def choose_scaling(self: Any, data: Any, epsilon: float) -> tuple[Any, str]:
  """The fit's `scaling` and its inputs (`_inputs.Prepared`) with what choosing it released.

  `scaling="auto"` where the per-feature scales would not be informative (`_released.resolve_scaling`
  gives "bound") on a dense `X` without declared bounds, from `SPREAD_MIN_N` records and `n epsilon >=
  SPREAD_MIN_N_EPSILON`, for
  DP-GCD's one run without penalty and with coordinate clipping (public conditions only): "per-step"
  when the records' scales spread, released privately ([`dpgcd_jax.privacy.scale_spread`][], a share of
  epsilon in `data.prior`), else "bound". "per-step" given (or chosen) is checked against the data
  (`_inputs.check_per_step`). Elsewhere `self.scaling`, and nothing is spent.

  Measured (`dpgcd_jax.experiments.high_dim`, p = 5000, DPGCDClassifier's defaults, accuracy, 4 seeds at
  eps = 1): raw Gaussian features of scales `10^U[-1, 1]`, one bound against per step, 0.679 / 0.769 at
  n = 4000 (0.688 / 0.800 at n = 16000, 2 seeds), 0.633 / 0.712 at n = 2000; at `n epsilon` = 1000, 3 seeds:
  0.595 / 0.624 (n = 1000) and 0.614 / 0.654 (n = 4000, eps = 0.25). Standardized: 0.785 / 0.765 at
  n = 4000 (0.790 / 0.786 at n = 16000), hence the vote.
  """
  n, p = data.X.shape
  scaling = self.scaling
  public = (scaling == AUTO and self._declared_bound(p) is None and not sparse.is_sparse(data.X)
            and self._adapter().scale_free and self.penalty is None and self.clipping == "coordinate"
            and len(data.targets) == 1 and n >= SPREAD_MIN_N and n * epsilon >= SPREAD_MIN_N_EPSILON
            and _released.resolve_scaling(scaling, n, p, epsilon, data.delta) == "bound")
  if public:
    spread = scale_spread.release(jax.random.fold_in(data.key, SPREAD_STREAM), data.X, epsilon)
    scaling = _released.PER_STEP if spread else "bound"
    data = data._replace(prior=scale_spread.ledger(epsilon) + data.prior, notes=data.notes + (
        f"scaling: {scaling!r}, from the records' vote on whether their scales spread (released privately, "
        f"dpgcd_jax.privacy.scale_spread, epsilon {scale_spread.epsilon_of(epsilon):.3g}): "
        + ("they do" if spread else "they do not" if spread is not None else "the sampler failed (independent "
           "of the data)"),))
  if scaling == _released.PER_STEP:
    _inputs.check_per_step(self, data.X, len(data.targets))
  return data, scaling


def follow_data(self: Any, key: jax.Array, release_size: Callable[[jax.Array, float], float | None], p: int,
                hyper: Hyper, *, n: int, epsilon: float, delta: float, prior: ledger_lib.Ledger
                ) -> tuple[Hyper, ledger_lib.Ledger, tuple[str, ...], float]:
  """The "auto" clip `self._clip_at_size(s / f)`, `s` the typical size of the `n` records of
  `self._size_records` in units of their public bounds (`dpgcd_jax.privacy.typical_size`,
  `release_size(key, noise)`: in memory or over row chunks, released at `TYPICAL_SIZE_SHARE` of
  epsilon and delta), its ledger added to `prior`, the `privacy_` note, and `f`, the factor on
  declared feature bounds (`_defaults.bound_scale` of the features' size, 1 for a target's):
  the caller clips the features at `f B_j`, where they are about `s / f` in size. The classifier's
  rule is `max(AUTO_CLIP_RELEASED, AUTO_MARGIN_STEP * s / f)` on the features (below); the
  regressor's `min(AUTO_CLIP_REGRESSION, TARGET_CLIP_RATIO * s)` on its target under a declared
  bound (`_defaults.target_clip`). The step ("auto") follows the clip (`released_step_size`). A
  failed draw (independent of the data) keeps the fixed clip, and so does a release that would
  not be informative at this `n` and budget (`typical_size.informative`, public: nothing is
  spent).

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
    return hyper, prior, (f"clip: the fixed {hyper.clip:g} (the {self._size_label}'s release would not be "
                          f"informative at n = {n}, epsilon = {epsilon:g}: nothing spent on it)",), 1.0
  size = release_size(key, noise)
  how = (f"clip: {self._clip_rule}, the size released privately (dpgcd_jax.privacy.typical_size, a share "
         f"{TYPICAL_SIZE_SHARE:g} of the budget, noise multiplier {noise:.4g})")
  scale = 1.0
  if size is not None:
    scale = bound_scale(size) if self._size_label == typical_size.LABEL else 1.0
    hyper = self._hyper(n, p, epsilon, clip=self._clip_at_size(size / scale))
    how += f": size {size:.4g}, clip {hyper.clip:.4g}"
    if scale < 1.0:
      how += (f"; the declared feature bounds are {1 / size:.3g}x the typical size: the features are clipped at "
              f"{scale:.4g}x them ({SIZE_TO_BOUND:g}x that size, _defaults.bound_scale)")
  else:
    how += f": the sampler failed (independent of the data), the fixed clip {hyper.clip:g} ran"
  return hyper, typical_size.ledger(noise, self._size_label) + prior, (how,), scale


def run_solver(self: Any, problem: Any, key: jax.Array, targets: np.ndarray, hyper: Hyper,
               prelude: _released.Releases, *, n: int, epsilon: float, delta: float,
               prior: ledger_lib.Ledger) -> tuple[Any, Hyper]:
  """The solver's `fit` with the releases `prelude` in its program; the result and the
  hyperparameters as run (its record's `run`)."""
  return self._adapter().run(self, problem, key, targets, hyper, n=n, epsilon=epsilon, delta=delta, prior=prior,
                             prelude=prelude)


def train_at(self: Any, X: Any, targets: np.ndarray, bound: np.ndarray, hyper: Hyper, noise: float,
             key: jax.Array, alpha: Any = None, l1_ratio: Any = None,
             target_unit: float | None = None) -> np.ndarray:
  """The runs of `_train` at a GIVEN noise scale (the multipliers of `self._gcd_plan(...).params_at(noise)`),
  for a caller that accounts for
  them itself (the CV estimators' repeat-and-select); (targets, p [+ 1]) weights, on
  `targets` already in units of `target_unit` (a regressor's: the penalty follows,
  `penalties.in_target_units`)."""
  width = bound.shape[0] + bool(self.fit_intercept)
  problem, targets = self._problem(self._layout(X), X.shape[0], bound.shape[0], targets, bound, alpha, l1_ratio,
                                   intercept=self._intercept_bound(hyper))
  if target_unit is not None:
    problem = dataclasses.replace(problem, penalty=penalties.in_target_units(problem.penalty, target_unit))
  selection, update = self._mechanisms()
  params = self._gcd_plan(hyper.max_iter, width, hyper.step_size, hyper.clip).params_at(noise)
  return np.stack([np.asarray(dp_gcd.run(dataclasses.replace(problem, y=jnp.asarray(t, problem.y.dtype)),
                                         jax.random.fold_in(key, k), params, passes=hyper.max_iter,
                                         selection=selection, update=update, clipping_mode=self.clipping,
                                         curvature=self._curvature_option()).w, float)[:width]
                   for k, t in enumerate(targets)])


@functools.partial(jax.jit, static_argnums=1)
def split_keys(key: jax.Array, num: int) -> tuple[jax.Array, ...]:
  """`jax.random.split(key, num)` as a tuple, in one program (not a split and an unstack)."""
  return tuple(jax.random.split(key, num))


def clip_features(X: Any, bound: np.ndarray) -> Any:
  """`X` (dense or scipy.sparse) with column j clipped to `[-B_j, B_j]` (zeros stay zero)."""
  if not sparse.is_sparse(X):
    return np.clip(X, -bound, bound)
  X = X.tocsr(copy=True)
  X.data = np.clip(X.data, -bound[X.indices], bound[X.indices])
  return X


def scipy_sparse() -> Any:
  """`scipy.sparse` (imported when sparse input is used)."""
  import scipy.sparse  # pylint: disable=import-outside-toplevel
  return scipy.sparse

"""What an estimator releases before its run, and the warnings it may compute afterwards.

Before the DP-GCD run, an estimator needs public feature bounds `B_j` (they set the
clipping, the smoothness `M_j = beta B_j^2` and the unit of every coefficient) and, for a
regressor, a public target bound `T`. Each is public by the user's declaration or released
here by an accounted mechanism, whose entry joins the run's ledger (one calibration):

- `feature_bound=` declared: free, exact (`DECLARED`).
- `scaling="private"`: per-feature bounds by a noisy binary search over a public log grid
  ([`dpgcd_jax.privacy.scales.private_feature_scales`][], Gaussian, a share
  share of epsilon and delta: the smallest of `SCALE_SHARES` at which the scales are
  informative, `scale_share`). Inside the model each feature is clipped to
  `[-B_j, B_j]` and its coordinate has `M_j = beta B_j^2`: DP-GCD is equivariant to
  per-coordinate scaling, so this is exactly a fit on `x_ij / B_j` with `coef_` returned in
  the user's raw units.
- `scaling="bound"`: one bound for every feature ([`dpgcd_jax.privacy.bounds`][],
  AboveThreshold on the per-record statistic `max_j |x_ij|`, pure `SCALE_SHARE * epsilon`):
  informative from much smaller `n` (measured: on standardized breast_cancer, 398 rows, it
  lands near the 0.9-quantile where the per-feature search, or the same binary search on the
  one statistic, lands far off), but features on a smaller scale than `B` are drowned.
- `scaling="auto"` (default): "private" when [`dpgcd_jax.privacy.scales.scales_informative`][]
  holds at the share (public `n`, `p`, `epsilon`, `delta` only), else "bound".
- the regressor's target: `target_bound=` declared, or `T` released by AboveThreshold on
  `|y_i|` (quantile `TARGET_QUANTILE`, pure `TARGET_SHARE * epsilon`);
  `y` is clipped to `[-T, T]` and fitted in units of `T`.

`diagnose` turns released values only (`coef_`, `intercept_`, the bounds, `n`,
`p`, `epsilon`, the scaling used) into warnings that name a likely failure and its fix.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sparse as sparse_lib
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import scales

AUTO = "auto"
SCALINGS = (AUTO, "private", "bound")
DECLARED = "declared"
SCALE_SHARE = 0.1
SCALE_SHARES = (0.1, 0.2, 0.3)
TARGET_SHARE = 0.1
TARGET_QUANTILE = 0.95
FLAT_FRACTION = 0.05
NOISE_CAP = 0.5
NOISE_RELEASE = 0.5  # `noise_probability` from which a released bound is flagged
REFERENCE_BOUND = 1.0  # `noise_probability`'s least reference value


class Released(NamedTuple):
  """A public bound and what it cost.

  Attributes:
    bound: (p,) feature bounds, or the scalar target bound.
    how: "declared", "private" (per-feature scales) or "bound" (one released bound).
    ledger: its privacy ledger (empty when declared).
    note: one line for `privacy_.notes`.
    epsilon, rank: for a bound released by AboveThreshold ([`dpgcd_jax.privacy.bounds`][]):
      its (public) epsilon, in the dtype it ran in, and rank `ceil(q n)`; None otherwise.
      `noise_probability` reads them.
  """

  bound: Any
  how: str
  ledger: ledger_lib.Ledger
  note: str
  epsilon: Any = None
  rank: int | None = None


def check_scaling(scaling: Any) -> None:
  if not (isinstance(scaling, str) and scaling in SCALINGS):
    raise ValueError(f"Expected scaling in {SCALINGS}, got scaling={scaling!r}.")


def check_positive_bound(name: str, bound: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
  """A declared public bound: finite, > 0, a scalar or of `shape`; ValueError naming `name`."""
  values = np.asarray(bound, dtype=float) if _is_numeric(bound) else None
  if values is None or values.ndim > 1 or (values.ndim == 1 and shape is not None and values.shape != shape) \
      or (values.ndim == 1 and shape is None):
    expected = "a scalar" if shape is None else f"a scalar or of shape {shape}"
    raise ValueError(f"Expected {name} to be {expected}, got {name}={bound!r}.")
  if not np.all(np.isfinite(values)) or not np.all(values > 0):
    raise ValueError(f"Expected {name} > 0 and finite, got {name}={bound!r}.")
  if not np.all((values >= problem_lib.BOUND_RANGE[0]) & (values <= problem_lib.BOUND_RANGE[1])):
    raise ValueError(f"Expected {name} in [2^-60, 2^60] (its square, a smoothness, must be a normal float32), "
                     f"got {name}={bound!r}.")
  return values


def _is_numeric(x: Any) -> bool:
  try:
    return np.asarray(x).dtype.kind in "iuf"
  except Exception:  # pylint: disable=broad-except
    return False


def scale_share(n: int, p: int, epsilon: float, delta: float) -> float | None:
  """The smallest share of `SCALE_SHARES` at which per-feature private scales are
  informative ([`dpgcd_jax.privacy.scales.scales_informative`][]), or None: public only."""
  for share in SCALE_SHARES:
    if scales.scales_informative(n, p, share * epsilon, share * delta):
      return share
  return None


def resolve_scaling(scaling: str, n: int, p: int, epsilon: float, delta: float) -> str:
  """"private" or "bound" for `scaling="auto"`, from public `n`, `p`, `epsilon`, `delta`."""
  if scaling != AUTO:
    return scaling
  return "bound" if scale_share(n, p, epsilon, delta) is None else "private"


FEATURE_BATCH = 64  # features per step of `_record_max_abs`


@jax.jit
def _record_max_abs(XT: jax.Array, num_features: jax.Array) -> jax.Array:
  """(N,) `max_{j < p} |x_ij|` over a layout's true features (`p` traced: one program per bucket).

  A running maximum over batches of features: no temporary the size of `XT` (a plain column
  reduction of `|XT|` left a 1.3x copy of X at 20000 x 2000).
  """
  P, N = XT.shape
  batch = min(FEATURE_BATCH, P)

  def running_max(b: jax.Array, out: jax.Array) -> jax.Array:
    start = jnp.minimum(b * batch, P - batch)  # the last batch overlaps: max is idempotent
    rows = jax.lax.dynamic_slice_in_dim(XT, start, batch)
    true_feature = (start + jnp.arange(batch)) < num_features
    return jnp.maximum(out, jnp.max(jnp.where(true_feature[:, None], jnp.abs(rows), 0), axis=0))

  return jax.lax.fori_loop(0, -(-P // batch), running_max, jnp.zeros(N, XT.dtype))


@functools.partial(jax.tree_util.register_dataclass, meta_fields=["how"],
                   data_fields=["declared", "epsilon", "noise", "share", "rank", "padding", "num_examples",
                                "num_features", "intercept_bound"])
@dataclasses.dataclass(frozen=True)
class FeatureRelease:
  """How a fit gets its public feature bounds (module docstring), as a pytree: `how` is
  static, the numbers are traced (a new budget, or a new `n` or `p` in a layout's bucket,
  compiles nothing). Built by [`feature_release`][dpgcd_jax.estimators._released.feature_release].

  Attributes:
    how: "declared", "private" (per-feature scales) or "bound" (one bound).
    declared: the declared (p,) bounds, or None.
    epsilon: "bound": the AboveThreshold budget (pure DP).
    noise, share: "private": the scales' noise multiplier and the budget share it was
      calibrated to.
    rank, padding: "bound": the public rank `ceil(q n)` and the `N - n` zero records of a
      padded layout (subtracted from the counts: [`dpgcd_jax.privacy.bounds.bound_at_rank`][]).
    num_examples, num_features: the true `n` and `p` of a padded layout.
    intercept_bound: the public bound `K >= 1` of feature `p` (an intercept's constant 1; a
      zero column without one): `K > 1` clips the intercept's terms at `K` times the clip
      of the features' (`dpgcd_jax.estimators._defaults.intercept_bound`).
  """

  how: str
  declared: Any
  epsilon: Any
  noise: Any
  share: Any
  rank: Any
  padding: Any
  num_examples: Any
  num_features: Any
  intercept_bound: Any = 1.0

  def bounds(self, key: jax.Array, XT: Any) -> jax.Array:
    """(P,) bounds for the features of `XT`, a dense layout (P, N) of
    [`dpgcd_jax.problem.columns`][] or a [`dpgcd_jax.sparse.SparseColumns`][] (p, n): `B_j`
    for the first `p` (declared, or released from `XT` with `key`), `intercept_bound` at `p` (an
    intercept), 1 beyond (padded features): public. Jittable: only this reads the features."""
    P = XT.shape[0]
    true = jnp.arange(P) < self.num_features
    if self.how == DECLARED:
      values = jnp.asarray(self.declared)
    elif self.how == "private":
      values = scales.private_feature_scales(key, XT, self.noise, num_examples=self.num_examples,
                                             num_features=self.num_features)
    else:
      statistic = (XT.record_max_abs() if isinstance(XT, sparse_lib.SparseColumns)
                   else _record_max_abs(XT, self.num_features))
      values = jnp.full(P, bounds.bound_at_rank(key, statistic, self.epsilon, self.rank, padding=self.padding))
    beyond = jnp.where(jnp.arange(P) == self.num_features, jnp.asarray(self.intercept_bound, values.dtype), 1)
    return jnp.where(true, values, beyond.astype(values.dtype))

  def release(self, key: jax.Array, features: Any) -> Released:
    """The bounds released on the host, before the runs (the CV estimators, sparse features;
    a fit on a dense layout makes this release in its runs' program: `Releases`). `features`:
    scipy.sparse (n, p) or the layout `bounds` reads."""
    if self.how == DECLARED:
      return self.finish(self.declared)
    return self.finish(_bounds(self, key, sparse_lib.from_matrix(features) if sparse_lib.is_sparse(features)
                                            else features))

  @property
  def ledger(self) -> ledger_lib.Ledger:
    """Its privacy ledger (host; empty when declared)."""
    if self.how == DECLARED:
      return ledger_lib.Ledger()
    if self.how == "private":
      return scales.scales_ledger(float(self.noise), label="feature bounds")
    return ledger_lib.Ledger.of(("feature bound", events.PureDp(float(self.epsilon)), 1))

  def finish(self, values: Any) -> Released:
    """The `Released` of the bounds `values` this release gave (host; declared: the declared ones)."""
    p = int(self.num_features)
    bound = np.asarray(self.declared if self.how == DECLARED else values, float)[:p]
    if self.how == DECLARED:
      return Released(bound, DECLARED, self.ledger, "feature bounds: declared public")
    if self.how == "private":
      return Released(bound, self.how, self.ledger, (
          f"feature bounds: per-feature private scales (dpgcd_jax.privacy.scales, a share {float(self.share):g} of "
          f"the budget, noise multiplier {float(self.noise):.4g}), B_j from {bound.min():.3g} to {bound.max():.3g}"))
    return Released(bound, self.how, self.ledger, (
        f"feature bounds: one bound B = {bound[0]:.4g} for every feature, released privately "
        f"(dpgcd_jax.privacy.bounds on max_j |x_ij|, epsilon {float(self.epsilon):.3g})"),
        epsilon=self.epsilon, rank=int(self.rank))


def feature_release(*, num_examples: int, num_features: int, shape: tuple[int, ...], dtype: Any, feature_bound: Any,
                    scaling: str, epsilon: float, delta: float) -> FeatureRelease:
  """The release of the (p,) public feature bounds of a fit on `n = num_examples` records and
  `p = num_features` features (module docstring), stored as `shape` ((P, N) for a dense layout,
  (p, n) sparse) in `dtype`; host only: public values, in the dtype the mechanisms compute in
  (the one bound's epsilon in the features' `dtype`, the scales' noise in the default float),
  so that the ledger holds the values that run."""
  n, p = num_examples, num_features
  if feature_bound is not None:  # padded with 1 to P: no program per p
    bound = np.broadcast_to(check_positive_bound("feature_bound", feature_bound, (p,)), (p,))
    return declared_release(np.pad(bound, (0, shape[0] - p), constant_values=1.0), num_examples=n, num_features=p)
  common = dict(num_examples=np.int32(n), num_features=np.int32(p), declared=None, epsilon=None, noise=None,
                share=None, rank=None, padding=None)
  how = resolve_scaling(scaling, n, p, epsilon, delta)
  if how == "private":
    share = scale_share(n, p, epsilon, delta) or SCALE_SHARES[-1]
    noise = scales.calibrate_scales(share * epsilon, share * delta)
    default = jax.dtypes.canonicalize_dtype(float)
    return FeatureRelease(how=how, **dict(common, noise=default.type(noise), share=default.type(share)))
  eps_b = SCALE_SHARE * epsilon
  return FeatureRelease(how=how, **dict(common, epsilon=np.dtype(dtype).type(eps_b), padding=np.int32(shape[1] - n),
                                        rank=np.int32(math.ceil(bounds.DEFAULT_QUANTILE * n))))


def declared_release(bound: np.ndarray, *, num_examples: int, num_features: int) -> FeatureRelease:
  """The `FeatureRelease` of public bounds (P,) on the first `num_features` features (declared,
  or released before): kept in float64 on the host, exact in `finish`."""
  return FeatureRelease(how=DECLARED, declared=np.asarray(bound, float), epsilon=None, noise=None, share=None,
                        rank=None, padding=None, num_examples=np.int32(num_examples),
                        num_features=np.int32(num_features))


@functools.partial(jax.tree_util.register_dataclass, meta_fields=["how"],
                   data_fields=["declared", "epsilon", "rank", "padding"])
@dataclasses.dataclass(frozen=True)
class TargetRelease:
  """How a regressor gets its public target bound `T` (module docstring), as a pytree
  (`how` static: "declared" or "private"; the numbers traced)."""

  how: str
  declared: Any
  epsilon: Any
  rank: Any
  padding: Any

  def bound(self, key: jax.Array, y: jax.Array) -> jax.Array:
    """`T`: declared, or released from the (N,) targets `y` of `n` records and `N - n` zero
    padding (`|y_i|` at quantile `TARGET_QUANTILE`, AboveThreshold). Jittable."""
    if self.how == DECLARED:
      return jnp.asarray(self.declared)
    return bounds.bound_at_rank(key, jnp.abs(y), self.epsilon, self.rank, padding=self.padding)

  @property
  def ledger(self) -> ledger_lib.Ledger:
    """Its privacy ledger (host; empty when declared)."""
    if self.how == DECLARED:
      return ledger_lib.Ledger()
    return ledger_lib.Ledger.of(("target bound", events.PureDp(float(self.epsilon)), 1))

  def finish(self, value: Any) -> Released:
    """The `Released` of the bound `value` this release gave (host; declared: the declared one)."""
    if self.how == DECLARED:
      return Released(float(self.declared), DECLARED, self.ledger, "target bound: declared public")
    value = float(value)
    return Released(value, "private", self.ledger, (
        f"target bound: T = {value:.4g} released privately (dpgcd_jax.privacy.bounds on |y_i|, "
        f"quantile {TARGET_QUANTILE}, epsilon {float(self.epsilon):.3g}); y clipped to [-T, T] and fitted in "
        f"units of T"), epsilon=self.epsilon, rank=int(self.rank))


def target_release(*, num_examples: int, size: int, dtype: Any, target_bound: Any, epsilon: float) -> TargetRelease:
  """The release of a regressor's target bound on `n = num_examples` targets stored in `size`
  entries (zero padded) in `dtype` (its epsilon in that dtype: the value that runs and is
  accounted); host only."""
  if target_bound is not None:  # a float64 on the host (exact in `finish`)
    return TargetRelease(DECLARED, np.float64(check_positive_bound("target_bound", target_bound)), None, None, None)
  return TargetRelease("private", None, np.dtype(dtype).type(TARGET_SHARE * epsilon),
                       np.int32(math.ceil(TARGET_QUANTILE * num_examples)), np.int32(size - num_examples))


@functools.partial(jax.tree_util.register_dataclass, data_fields=["features", "target"],
                   meta_fields=["unit", "in_place"])
@dataclasses.dataclass(frozen=True)
class Releases:
  """An estimator's releases before its runs, in the runs' program (a
  [`Prelude`][dpgcd_jax.solvers.base.Prelude]): one compiled program per fit.

  `split(key, 3)`: the feature bounds' key, the target bound's and the runs'. The runs see the
  features clipped to `[-B_j, B_j]` with `M_j = beta B_j^2` (with `unit`, for DP-FW: divided
  by `B_j` too, `M_j = beta`) and, with a target release, the targets clipped to `[-T, T]` in
  units of `T` (and the penalty with them: `penalties.in_target_units`). `released` is
  `((P,) bounds, T or None)`; `ledger` is both releases' (`fit` composes it with the runs).
  `in_place`: the layout's buffer becomes the clipped features (the estimator gives it up).
  """

  features: FeatureRelease
  target: TargetRelease | None
  unit: bool = False
  in_place: bool = True

  @property
  def ledger(self) -> ledger_lib.Ledger:
    return self.features.ledger if self.target is None else self.features.ledger + self.target.ledger

  def __call__(self, problem: problem_lib.Problem, key: jax.Array, targets: jax.Array | None
               ) -> tuple[problem_lib.Problem, jax.Array, jax.Array | None, tuple[jax.Array, jax.Array | None]]:
    key_features, key_target, key_run = jax.random.split(key, 3)
    bound = self.features.bounds(key_features, problem.XT)
    problem = problem_lib.with_feature_bound(problem, bound.astype(problem.smoothness.dtype), unit=self.unit)
    target = None
    if self.target is not None:
      if targets is None:
        raise ValueError("Expected the targets whose bound is released, got targets=None.")
      target = self.target.bound(key_target, targets[0])
      unit = target.astype(targets.dtype)
      targets = jnp.clip(targets, -unit, unit) / unit
      problem = dataclasses.replace(problem, penalty=penalties.in_target_units(problem.penalty, unit))
    return problem, key_run, targets, (bound, target)


@jax.jit
def _bounds(release: FeatureRelease, key: jax.Array, XT: Any) -> jax.Array:
  return release.bounds(key, XT)


@jax.jit
def _target_bound(release: TargetRelease, key: jax.Array, y: jax.Array) -> jax.Array:
  return release.bound(key, y)


def release_feature_bounds(key: jax.Array, features: Any, *, num_examples: int, num_features: int,
                           feature_bound: Any, scaling: str, epsilon: float, delta: float) -> Released:
  """The (p,) public feature bounds, released on the host (`FeatureRelease.release`).

  `features`: the training features of `num_examples = n` records and `num_features = p`
  features, either scipy.sparse (n, p) or the dense layout of
  [`dpgcd_jax.problem.columns`][] ((P, N): transposed, possibly with an intercept row and
  zero padding, which the releases exclude); only the mechanisms read them.
  """
  shape = features.shape[::-1] if sparse_lib.is_sparse(features) else features.shape
  dtype = jax.dtypes.canonicalize_dtype(features.dtype)
  return feature_release(num_examples=num_examples, num_features=num_features, shape=shape, dtype=dtype,
                         feature_bound=feature_bound, scaling=scaling, epsilon=epsilon, delta=delta
                         ).release(key, features)


def release_target_bound(key: jax.Array, y: np.ndarray, *, target_bound: Any, epsilon: float, dtype: Any) -> Released:
  """The public target bound `T`, released on the host (the CV estimators; a fit makes the same
  release inside its program: `Releases`): declared, or released on `|y_i|` (module docstring)
  in `dtype`, the run's."""
  n = np.shape(y)[0]
  size = problem_lib.bucket(n)  # y padded with zero records to the public bucket of n: one program per bucket
  release = target_release(num_examples=n, size=size, dtype=dtype, target_bound=target_bound, epsilon=epsilon)
  if release.how == DECLARED:
    return release.finish(release.declared)
  with np.errstate(over="ignore"):  # no warning that depends on the data (a |y_i| above float32's max: inf)
    padded = jax.device_put(np.pad(np.asarray(y, dtype), (0, size - n)))
  return release.finish(_target_bound(release, key, padded))


def diagnose(coef: np.ndarray, intercept: np.ndarray, feature_bound: np.ndarray, how: str, *,
             n: int, epsilon: float, target_bound: float | None = None, classes: Any = None,
             penalty: str | None = None, max_iter: int | None = None, informative_n: int | None = None,
             feature_bound_noise: float | None = None, target_bound_noise: float | None = None) -> list[str]:
  """Warnings from RELEASED or public values only, each naming what it saw, a cause and a fix.

  Nothing here reads the training data: a warning computed from `X` or `y` would be a
  side channel that no ledger accounts for. Each test is a statement about the released
  model that is true whatever the data (`benchmarks/bench_warnings.py` measures how often
  they fire on fits that failed and on fits that learned):

  - every coefficient is 0: the model is its intercept, one answer for every input;
  - one class for every input within the bounds (sound): inputs are clipped to
    `[-B_j, B_j]` at predict time, so class `k` beats class `l` everywhere when
    `b_k - b_l > sum_j |w_kj - w_lj| B_j` (two classes: `|b| > sum_j |w_j| B_j`);
  - one class for every input of the ellipsoid `sum_j (x_j / B_j)^2 <= 1` (sound for
    that set, by Cauchy-Schwarz: `b_k - b_l > ||(w_kj - w_lj) B_j||_2`): every input but
    those with several features near their bounds at once, so most likely every row;
  - a regressor whose predictions vary by less than `FLAT_FRACTION` of the target range
    `2 T` over the clipped inputs;
  - a bound released by AboveThreshold that may be its noise: with no record at or below
    `max(B, 1)`, the release's noise alone stops there or lower with probability
    `>= NOISE_RELEASE` (`noise_probability`): features (or targets) above it were clipped.

  The model can still answer one class on the rows while none of these fires: when the
  rows sit in a corner of the bounds (e.g. non-negative features with bounds `[-B, B]`)
  no released value tells it. When `scaling="auto"` fell back to one bound, the failure
  warnings say so and ask for declared bounds (`informative_n`).

  Args:
    coef: (K, p) coefficients in raw units (K = 1 for a regressor or two classes).
    intercept: (K,) intercepts.
    feature_bound: (p,) the public bounds used (inputs are clipped to them at predict time).
    how: how the bounds were obtained ("declared", "private", "bound").
    n, epsilon: public.
    target_bound: the regressor's public target bound `T` (None for a classifier).
    classes: the classifier's labels (`classes_`), to name the constant answer.
    penalty, max_iter: the public hyperparameters (to name a cause and a fix).
    informative_n: when `scaling="auto"` fell back to one bound, the `n` from which
      per-feature private scales would have been released (public).
    feature_bound_noise, target_bound_noise: `noise_probability` of the released feature
      bound and target bound (None when declared or per-feature scales).

  Returns:
    The messages (empty when nothing looks wrong).
  """
  coef, intercept = np.atleast_2d(coef), np.atleast_1d(intercept)
  bound = np.asarray(feature_bound, float)
  regressor = target_bound is not None
  messages = []
  steps = "" if max_iter is None else f" (max_iter={max_iter} now)"
  more = f"a larger epsilon (now {epsilon:g}) or more rows (n={n})"
  fallback = ""
  if how == "bound" and informative_n is not None:
    fallback = (f"; and n={n} is below the n >= {informative_n} from which per-feature private scales are "
                f"released at epsilon={epsilon:g}, so one bound B = {np.max(bound):.3g} was released for every "
                f"feature: features on a much smaller scale than B are drowned in the noise")
  declare = "declare feature_bound= per feature (public ranges, e.g. from the data's documentation)"
  if not np.any(coef):
    answer = (f"predicts {intercept[0]:.4g} for every input" if regressor else
              f"predicts the same class, {_label(classes, _zero_model_class(intercept))!r}, for every input")
    if penalty in ("l1", "elasticnet"):
      cause, fix = (f"the {penalty} penalty can hold every coefficient at 0",
                    f"a smaller alpha or penalty=None; {more}")
    else:
      cause, fix = ("every private step updated the intercept, or moved no feature out of the noise",
                    f"{more}; more steps{steps}; {declare}")
    messages.append(f"every coefficient is 0: the model is its intercept alone and {answer}. Cause: {cause}"
                    f"{fallback}. Fix: {fix}.")
  elif not regressor:
    pairs = coef.shape[0] > 1  # one-vs-rest: the differences of the scores
    for order, where in ((1, "within the feature bounds (inputs are clipped to [-B_j, B_j])"),
                         (2, "x with sum_j (x_j / B_j)^2 <= 1 (all but those with several features near "
                             "their bounds at once), so most likely for every row")):
      winner, margin, reach = _constant_winner(coef, intercept, bound, order)
      if winner is not None:
        w = "(w_kj - w_lj)" if pairs else "w_j"
        norm = f"sum_j |{w}| B_j" if order == 1 else f"||{w} B_j||_2"
        messages.append(
            f"the model predicts the same class, {_label(classes, winner)!r}, for every input {where}: its "
            f"intercept margin {'b_k - b_l' if pairs else '|b|'} = {margin:.3g} exceeds what the features can "
            f"move the {'scores' if pairs else 'score'}, {norm} = {reach:.3g} (typically the majority class). "
            f"Cause: the private steps moved the features' coefficients less than the intercept{fallback}. "
            f"Fix: {more}; more steps{steps}; {declare}, as tight as the data allow (a bound far above a "
            f"feature's range shrinks what it can add).")
        break
  elif target_bound is not None:
    reach, target = float(np.abs(coef[0]) @ bound), float(target_bound)
    if 2.0 * reach < FLAT_FRACTION * 2.0 * target:
      messages.append(
          f"the predictions vary by at most {2.0 * reach:.3g} over the clipped inputs, under "
          f"{FLAT_FRACTION:.0%} of the target range 2T = {2.0 * target:.3g}: the model is nearly "
          f"constant. Cause: the private steps moved the coefficients little{fallback}. Fix: {more}; more "
          f"steps{steps}; a declared target_bound= close to the range of y; {declare}.")
  if feature_bound_noise is not None and feature_bound_noise >= NOISE_RELEASE:
    messages.append(
        f"the released feature bound B = {np.max(bound):.3g} (one bound for every feature) may be the "
        f"release's noise: with no record at or below max(B, {REFERENCE_BOUND:g}), the noise alone stops "
        f"the release there or lower with probability {feature_bound_noise:.2f} at this n and epsilon={epsilon:g} "
        f"(the release gets a share {SCALE_SHARE:g} of it). Features above B were clipped to [-B, B], i.e. "
        f"reduced to their signs when B is far below their scale (one class for every row when they are "
        f"non-negative). Fix: {declare}; or {more}.")
  if target_bound_noise is not None and target_bound_noise >= NOISE_RELEASE:
    messages.append(
        f"the released target bound T = {target_bound:.3g} may be the release's noise: with no |y_i| at or "
        f"below max(T, {REFERENCE_BOUND:g}), the noise alone stops the release there or lower with probability "
        f"{target_bound_noise:.2f} at this n and epsilon={epsilon:g} (the release gets a share {TARGET_SHARE:g} "
        f"of it). y was clipped to [-T, T], so unless |y| is that small every prediction is near 0 (R^2 near 0 "
        f"or below). Fix: declare target_bound= (a public bound on |y|); or {more}.")
  return messages


def noise_probability(released: Released) -> float | None:
  """For a bound released by AboveThreshold (`released.rank` set): the probability that the
  release's noise alone stops at or below `max(released.bound, 1)` when no record lies at or
  below it; None otherwise. Public: the grid, the release's epsilon and rank only.

  Every query at or below such a grid point is then `-rank`
  ([`dpgcd_jax.privacy.bounds.bound_at_rank`][]), and the release stops at the first one that,
  plus its discrete Laplace noise (scale `t_2`), reaches the noisy threshold (scale `t_1`),
  the scales that ran ([`dpgcd_jax.privacy.bounds.above_threshold_scales`][]):
  `1 - sum_rho P(rho) (1 - P(nu >= rho + rank))^(k + 1)` over the `k + 1` grid points up to
  it. Large (`>= NOISE_RELEASE`): the noise stops the release before it reaches data at that
  scale, so the released value is no evidence about the data. The reference is at least 1
  (`REFERENCE_BOUND`): a release at the bottom of the grid is what the noise gives, whatever
  its probability of landing exactly there. The top grid point (no query fired) is not flagged.
  """
  if released.rank is None or released.epsilon is None:
    return None
  value = float(np.max(released.bound))
  log_grid = np.log2(bounds.GRID)
  index = int(np.argmin(np.abs(log_grid - np.log2(max(value, REFERENCE_BOUND)))))
  scales_run = [np.asarray(v) for v in bounds.above_threshold_scales(released.epsilon, np)]
  if not bool(scales_run[2]) or value >= bounds.GRID[-1]:
    return None
  t_threshold, t_query = float(scales_run[0]), float(scales_run[1])
  rho = np.arange(-int(40 * t_threshold), int(40 * t_threshold) + 1, dtype=float)
  p_rho = np.tanh(0.5 / t_threshold) * np.exp(-np.abs(rho) / t_threshold)
  stay = np.exp((index + 1) * np.log1p(-_laplace_tail(rho + released.rank, t_query)))
  return float(np.clip(1.0 - np.sum(p_rho * stay), 0.0, 1.0))


def _laplace_tail(a: np.ndarray, scale: float) -> np.ndarray:
  """`P(Z >= a)` for the discrete Laplace `P(Z = z) = tanh(1 / (2 t)) exp(-|z| / t)`, integer `a`."""
  c = np.tanh(0.5 / scale) / -np.expm1(-1.0 / scale)
  upper = c * np.exp(-np.maximum(a, 1.0) / scale)  # a >= 1: sum_{z >= a}
  lower = 1.0 - c * np.exp(-np.maximum(1.0 - a, 1.0) / scale)  # a <= 0: 1 - P(Z >= 1 - a)
  return np.minimum(np.where(a >= 1.0, upper, lower), 1.0 - 1e-300)


def _constant_winner(coef: np.ndarray, intercept: np.ndarray, bound: np.ndarray, order: int
                     ) -> tuple[int | None, float, float]:
  """(the class index every input gets, its margin, the features' reach), or (None, ., .).

  Inputs `x` with `|x_j| <= B_j` (`order` 1: the box) or `sum_j (x_j / B_j)^2 <= 1` (`order`
  2: the ellipsoid inside it). Two classes (one score `s = b + <w, x>`, class 1 when
  `s > 0`): class 1 everywhere when `b > r`, class 0 when `-b >= r`, with `r` the largest
  `|<w, x>|` over the set, `||w B||_1` or `||w B||_2`. One-vs-rest (argmax of the scores):
  class `k` everywhere when `b_k - b_l > ||(w_k - w_l) B||` for every `l != k`.
  """
  scaled = coef * bound
  if coef.shape[0] == 1:
    reach = float(np.linalg.norm(scaled[0], ord=order))
    b = float(intercept[0])
    return (1 if b > reach else 0 if -b >= reach else None), abs(b), reach
  for k in range(coef.shape[0]):  # at most one class can beat every other everywhere
    others = [l for l in range(coef.shape[0]) if l != k]
    reaches = np.array([np.linalg.norm(scaled[k] - scaled[l], ord=order) for l in others])
    margins = intercept[k] - intercept[others]
    worst = int(np.argmin(margins - reaches))
    if margins[worst] > reaches[worst]:
      return k, float(margins[worst]), float(reaches[worst])
  return None, 0.0, 0.0


def _zero_model_class(intercept: np.ndarray) -> int:
  """The class a model with every coefficient 0 gives every input (`predict`'s rule)."""
  return int(intercept[0] > 0) if intercept.shape[0] == 1 else int(np.argmax(intercept))


def _label(classes: Any, index: int | None) -> Any:
  """The label of class `index` (its index when the labels are unknown)."""
  if classes is None or index is None:
    return index
  value = np.asarray(classes)[index]
  return value.item() if hasattr(value, "item") else value


def prediction_noise(update_noise: float, *, step_size: float, clip: float, curvature: float,
                     n: int, steps: int) -> float:
  """The standard deviation the run's noise may add to a prediction, in units of the target.

  An update of coordinate `j` moves `w_j` by `gamma / M_j` times its noise, of standard
  deviation `s Delta_j = s 2 clip B_j / n`; with `M_j = beta B_j^2` and `|x_j| <= B_j`, a
  prediction moves by at most `u = 2 gamma s clip / (beta n)` per update, whatever `B_j`.
  Over `T` updates the noise adds up to at most `u sqrt(T)` (all on one coordinate; less
  when spread). Public: no data is read.
  """
  return 2.0 * step_size * update_noise * clip / (curvature * n) * math.sqrt(steps)


def informative_n(p: int, epsilon: float) -> int:
  """The `n` from which `scaling="auto"` releases per-feature scales (at the largest
  share; delta = 1/n^2)."""
  return scales.min_informative_n(p, SCALE_SHARES[-1] * epsilon)

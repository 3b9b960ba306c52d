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
  AboveThreshold on the per-record statistic, the 0.9-quantile of `|x_ij| != 0`, pure `SCALE_SHARE * epsilon`,
  at most `bounds.MAX_EPSILON`):
  informative from much smaller `n` (measured: on standardized breast_cancer, 398 rows, it
  lands near the 0.9-quantile where the per-feature search, or the same binary search on the
  one statistic, lands far off), but features on a smaller scale than `B` are drowned.
- `scaling="per-step"` (DP-GCD, dense features): no bound before the run. DP-GCD selects on
  `sign(x_ij)` and releases the bound of each feature it selects, at that step, in the run's ledger
  ([`dpgcd_jax.solvers.scale_free`][]); the features are capped at `bounds.GRID[-1] = 2^16` (public)
  until then, and `feature_bound_` holds the released bounds (the cap where a feature was never selected).
- `scaling="auto"` (default): "private" when [`dpgcd_jax.privacy.scales_budget.scales_informative`][]
  holds at the share and the scales' sampler draws are cheap at `epsilon` (`SCALES_CHARGE_SHARE`;
  public `n`, `p`, `epsilon`, `delta` only), else "bound".
- the regressor's target: `target_bound=` declared, or `T` released by AboveThreshold on
  `|y_i|` (quantile `TARGET_QUANTILE`, pure `TARGET_SHARE * epsilon`);
  `y` is clipped to `[-T, T]` and fitted in units of `T`.

The warnings computed afterwards from released values are in
`dpgcd_jax.estimators._diagnostics`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _pytree
from dpgcd_jax import layout as layout_lib
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sparse as sparse_lib
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import scales
from dpgcd_jax.privacy import scales_budget
from dpgcd_jax.solvers import budget

AUTO = "auto"
PER_STEP = "per-step"
SCALINGS = (AUTO, "private", "bound", PER_STEP)
CAP = float(bounds.GRID[-1])  # `scaling="per-step"`: the public bound of every feature until its own is released
DECLARED = "declared"
SCALE_SHARE = 0.1
SCALE_SHARES = (0.1, 0.2, 0.3)
TARGET_SHARE = 0.1
TARGET_QUANTILE = 0.95


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


# The per-feature scales' L p discrete draws are charged to delta at the whole fit's epsilon
# (`dpgcd_jax.privacy.events.DiscreteDraws`): "auto" releases them only where that charge is at
# most this share of delta (else the one bound, whose draws are charged at its own epsilon). At
# epsilon = 1 that holds up to p = 1e4 features per 1e-10 of delta; at epsilon = 100 nowhere.
SCALES_CHARGE_SHARE = 0.1


def scale_share(n: int, p: int, epsilon: float, delta: float) -> float | None:
  """The smallest share of `SCALE_SHARES` at which per-feature private scales are
  informative ([`dpgcd_jax.privacy.scales_budget.scales_informative`][]) and their draws'
  charge at `epsilon` is at most `SCALES_CHARGE_SHARE` of `delta`, or None: public only."""
  if scales_budget.scales_ledger(1.0, features=p).sampler_charge(epsilon) > SCALES_CHARGE_SHARE * delta:
    return None
  for share in SCALE_SHARES:
    if scales_budget.scales_informative(n, p, share * epsilon, share * delta):
      return share
  return None


def resolve_scaling(scaling: str, n: int, p: int, epsilon: float, delta: float) -> str:
  """"private" or "bound" for `scaling="auto"`, from public `n`, `p`, `epsilon`, `delta`."""
  if scaling != AUTO:
    return scaling
  return "bound" if scale_share(n, p, epsilon, delta) is None else "private"


@_pytree.dataclass_pytree(meta_fields=["how"],
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
    [`dpgcd_jax.dense.columns`][] or a [`dpgcd_jax.sparse.SparseColumns`][] (p, n): `B_j`
    for the first `p` (declared, or released from `XT` with `key`), `intercept_bound` at `p` (an
    intercept), 1 beyond (padded features): public. Jittable: only this reads the features."""
    P = XT.shape[0]
    true = jnp.arange(P) < self.num_features
    if self.how == DECLARED:
      values = jnp.asarray(self.declared)
    elif self.how == PER_STEP:
      values = jnp.full(P, CAP, XT.dtype)
    elif self.how == "private":
      values = scales.private_feature_scales(key, XT, self.noise, num_examples=self.num_examples,
                                             num_features=self.num_features)
    else:
      statistic = layout_lib.record_statistic(XT, self.num_features)
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
    if self.how in (DECLARED, PER_STEP):  # per-step: the run's ledger holds the releases
      return ledger_lib.Ledger()
    if self.how == "private":
      return scales_budget.scales_ledger(float(self.noise), label="feature bounds", features=int(self.num_features))
    return budget.release_ledger("feature bound", self.epsilon)

  def finish(self, values: Any) -> Released:
    """The `Released` of the bounds `values` this release gave (host; declared: the declared ones)."""
    p = int(self.num_features)
    bound = np.asarray(self.declared if self.how == DECLARED else values, float)[:p]
    if self.how == DECLARED:
      return Released(bound, DECLARED, self.ledger, "feature bounds: declared public")
    if self.how == PER_STEP:
      selected = int(np.sum(bound > 0))
      bound = np.where(bound > 0, bound, CAP)  # never selected: the cap (its coefficient is 0)
      return Released(bound, self.how, self.ledger, (
          f"feature bounds: released per step for the {selected} selected features (entries "
          f"'column bound' of the run; DP-GCD selects on sign(x_ij), dpgcd_jax.solvers.scale_free), the cap "
          f"{CAP:g} elsewhere"))
    if self.how == "private":
      return Released(bound, self.how, self.ledger, (
          f"feature bounds: per-feature private scales (dpgcd_jax.privacy.scales, a share {float(self.share):g} of "
          f"the budget, noise multiplier {float(self.noise):.4g}), B_j from {bound.min():.3g} to {bound.max():.3g}"))
    return Released(bound, self.how, self.ledger, (
        f"feature bounds: one bound B = {bound[0]:.4g} for every feature, released privately "
        f"(dpgcd_jax.privacy.bounds on each record's 0.9-quantile of |x_ij| != 0, epsilon {float(self.epsilon):.3g})"),
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
  if how == PER_STEP:
    return FeatureRelease(how=how, **common)
  if how == "private":
    share = scale_share(n, p, epsilon, delta) or SCALE_SHARES[-1]
    noise = scales_budget.calibrate_scales(share * epsilon, share * delta, features=p)
    default = jax.dtypes.canonicalize_dtype(float)
    return FeatureRelease(how=how, **dict(common, noise=default.type(noise), share=default.type(share)))
  eps_b = bounds.release_epsilon(SCALE_SHARE * epsilon)
  return FeatureRelease(how=how, **dict(common, epsilon=np.dtype(dtype).type(eps_b), padding=np.int32(shape[1] - n),
                                        rank=np.int32(math.ceil(bounds.DEFAULT_QUANTILE * n))))


def declared_release(bound: np.ndarray, *, num_examples: int, num_features: int) -> FeatureRelease:
  """The `FeatureRelease` of public bounds (P,) on the first `num_features` features (declared,
  or released before): kept in float64 on the host, exact in `finish`."""
  return FeatureRelease(how=DECLARED, declared=np.asarray(bound, float), epsilon=None, noise=None, share=None,
                        rank=None, padding=None, num_examples=np.int32(num_examples),
                        num_features=np.int32(num_features))


@_pytree.dataclass_pytree(meta_fields=["how"],
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
    return budget.release_ledger("target bound", self.epsilon)

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
  return TargetRelease("private", None, np.dtype(dtype).type(bounds.release_epsilon(TARGET_SHARE * epsilon)),
                       np.int32(math.ceil(TARGET_QUANTILE * num_examples)), np.int32(size - num_examples))


@_pytree.dataclass_pytree(data_fields=["features", "target"],
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
    problem = layout_lib.with_feature_bound(problem, bound.astype(problem.smoothness.dtype), unit=self.unit)
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
  [`dpgcd_jax.dense.columns`][] ((P, N): transposed, possibly with an intercept row and
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

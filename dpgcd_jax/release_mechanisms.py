"""The mechanisms of the statistics released before a run: their device-side draws and their events.

Part of the one mechanism layer (`dpgcd_jax.mechanisms`): the modules of
`dpgcd_jax.privacy` that release a statistic (the feature bound, the feature scales, the typical
size, the smoothness) compute their exact statistic and their public scales, and draw every noise
through an object below, which owns its sampler (a mechanism of `dpgcd_jax.mechanisms`), its
sensitivity and its privacy event (`event`, the type the callers' ledgers charge):

- [`AboveThreshold`][dpgcd_jax.release_mechanisms.AboveThreshold]: integer queries of
  sensitivity 1, discrete Laplace noise; `PureDp(epsilon)` ([`dpgcd_jax.privacy.bounds`][]).
- [`NoisySearch`][dpgcd_jax.release_mechanisms.NoisySearch]: per feature, a binary search on
  integer counts of sensitivity 1 per feature (l2 `sqrt(p)`), discrete Gaussian noise;
  `DiscreteGaussian(noise)` per round ([`dpgcd_jax.privacy.scales`][],
  [`dpgcd_jax.privacy.typical_size`][]).
- [`ClippedMeans`][dpgcd_jax.release_mechanisms.ClippedMeans]: per coordinate, the mean of
  terms clipped to `[0, c_j]` (sensitivity `c_j / n` plus its roundings), Laplace or Gaussian
  noise; `PureDp(epsilon)` or `Gaussian(s)` ([`dpgcd_jax.privacy.smoothness`][]).

The privacy arguments are in the docstrings of those modules; the draws here are the same draws
(same keys, same samplers, same shapes) as when they lived there.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import clipping
from dpgcd_jax import discrete_grid
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import events

Array = jax.Array


def above_threshold_scales(epsilon: Any, xp=jnp) -> tuple[Array, Array, Array]:
  """`(t_1, t_2, valid)`: the int32 discrete Laplace scales `t_1 > 2 / epsilon` (threshold) and
  `t_2 > 4 / epsilon` (queries), rounded up from the float quotients
  (`dpgcd_jax.discrete_grid.integer_scale_above`; `epsilon` in float32 or wider, whatever
  the features' dtype). `valid` is False for `epsilon <= 0`, NaN, or a scale out of the
  sampler's range. Jittable; `xp=numpy` evaluates the same IEEE operations on the host (the
  same integers, no compiled program: the post-fit diagnostics read them)."""
  epsilon = xp.asarray(epsilon, jnp.promote_types(jnp.result_type(epsilon), jnp.result_type(float)))
  t_threshold, ok_threshold = discrete_grid.integer_scale_above(epsilon.dtype.type(2.0) / epsilon, xp)
  t_query, ok_query = discrete_grid.integer_scale_above(epsilon.dtype.type(4.0) / epsilon, xp)
  return t_threshold, t_query, ok_threshold & ok_query


@jax.jit
def _above_threshold(key: Array, queries: Array, epsilon: Any) -> Array:
  t_threshold, t_query, valid = above_threshold_scales(epsilon)
  # One draw of K + 1 independent entries (one sampler in the program): the threshold's, then the queries'.
  noisy, ok = mechanisms.DiscreteLaplaceNoise().perturb_integers(
      key, jnp.append(jnp.zeros((), queries.dtype), queries), jnp.append(t_threshold, jnp.full(queries.shape, t_query)))
  above = noisy[1:] >= noisy[0]
  index = jnp.where(jnp.any(above), jnp.argmax(above), queries.size - 1)
  return jnp.where(valid & jnp.all(ok), index, -1)


@dataclasses.dataclass(frozen=True)
class AboveThreshold:
  """AboveThreshold on integer queries of sensitivity 1: `epsilon`-DP (pure), event `PureDp(epsilon)`.

  An integer noisy threshold `rho` (discrete Laplace of scale `t_1 > 2 / epsilon`), integer noises
  `nu_k` (discrete Laplace of scale `t_2 > 4 / epsilon`): the first `k` with `Q_k + nu_k >= rho`
  (the proof: [`dpgcd_jax.privacy.bounds`][]). Its `K + 1` draws are charged apart
  (`draws(K)`, [`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws]).
  """

  sensitivity: int = 1  # of every query Q_k, replace-one neighbours

  def run(self, key: Array, queries: Array, epsilon: Any) -> Array:
    """The first `k` with `Q_k + nu_k >= rho` on the (K,) int32 `queries` (`K - 1` if none), -1 when
    not valid (an `epsilon` out of range, or a sampler cap). Jitted: one program for every `n`."""
    return _above_threshold(key, queries, epsilon)

  def event(self, epsilon: float) -> events.PrivacyEvent:
    """The event of one release at `epsilon`: `PureDp(epsilon)`."""
    return events.PureDp(float(epsilon))

  def draws(self, num_queries: int) -> int:
    """The sampler draws of one release over `num_queries` queries (one more for the threshold)."""
    return int(num_queries) + 1


class Search(NamedTuple):
  """The transcript of the noisy binary search (for tests and diagnostics; all released).

  Attributes:
    index: (p,) the released grid index `lo_j` of every feature.
    queried: (L, p) the index `m_j` queried in every round.
    released: (L, p) int32, the noisy queries `clip(N_{j m_j} - ceil(t)) + Z_j` of every round
      (the noisy count minus the rank; the search goes left where it is `>= 0`).
  """

  index: Array  # type: ignore[assignment]  # public field; shadows tuple.index (mypy flags the name)
  queried: Array
  released: Array


def count_sigma(noise: Any, num_features: Any) -> tuple[Array, Array]:
  """`(sigma, valid)`: the int32 standard deviation of every count's discrete Gaussian noise.

  `sigma > noise * sqrt(p)`, strictly, rounded up from the float product
  (`dpgcd_jax.discrete_grid.integer_scale_above`): the run's noise is never below the
  accounted one. `valid` is False for a NaN, negative or infinite `noise`, or a `sigma`
  outside the sampler's range `[1, MAX_SCALE]`. Jittable (`noise` and `num_features` traced).
  """
  dtype = jnp.result_type(float)
  return discrete_grid.integer_scale_above(jnp.asarray(noise, dtype) * jnp.sqrt(jnp.asarray(num_features, dtype)))


@jax.jit
def noisy_search(key: Array, counts: Array, noise: Any, threshold: Any, *, num_features: Any = None) -> Search:
  """The mechanism on exact counts: per feature, a noisy binary search for `N_jk >= t`.

  Jitted (one program per shape of `counts`: the samplers take seconds to compile) and
  vmappable (over `key`, `noise` and `threshold`). Every round releases the
  integer queries `clip(N_{j m_j} - ceil(t)) + Z_j`, `Z_j` discrete Gaussian of
  `sigma = count_sigma(noise, p) > noise sqrt(p)`, and compares them with 0 exactly (the
  guarantee: [`dpgcd_jax.privacy.scales`][], `DiscreteGaussian(noise)` per round,
  `ceil(log2 K)` rounds).

  Args:
    key: a JAX PRNG key.
    counts: (p, K) exact counts (e.g. [`grid_counts`][dpgcd_jax.privacy.scales.grid_counts]).
    noise: the multiplier `s >= 0`; NaN, negative, or too large for the sampler
      (`s sqrt(p) >= MAX_SCALE`): every index is -1 (fail closed). `s = 0` is the exact,
      non-private search.
    threshold: `t = q n` (public): `N >= t` iff `N >= ceil(t)` for an integer count `N`.
    num_features: None, or the number `p` of true features (a traced int may be given) when
      `counts` has more rows: the noise is `sigma(s, p)`; the other rows are searched with the
      same noise and carry nothing (the caller drops them).

  Returns:
    A [`Search`][dpgcd_jax.release_mechanisms.Search]; a feature whose draw hit a sampler cap
    (probability `< 3.5e-18`, independent of the data) has index -1.
  """
  p, K = counts.shape
  rounds = max(1, math.ceil(math.log2(K)))
  noise = jnp.asarray(noise, jnp.result_type(float))
  sigma, in_range = count_sigma(noise, p if num_features is None else num_features)
  exact = noise == 0.0
  rank = jnp.ceil(jnp.asarray(threshold, noise.dtype)).astype(jnp.int32)
  rows = jnp.arange(p)

  def one_round(carry, key_r):
    lo, hi, failed = carry
    mid = (lo + hi) // 2
    query = discrete_grid.count_query(counts[rows, mid], rank)
    noisy, ok = mechanisms.DiscreteGaussianNoise().perturb_integers(key_r, query, sigma)
    failed = failed | ~ok
    released = jnp.where(exact | failed, query, noisy)
    left = released >= 0
    active = lo < hi
    hi = jnp.where(active & left, mid, hi)
    lo = jnp.where(active & ~left, mid + 1, lo)
    return (lo, hi, failed), (mid, released)

  start = (jnp.zeros(p, jnp.int32), jnp.full(p, K - 1, jnp.int32), jnp.zeros(p, bool))
  (lo, _, failed), (queried, released) = jax.lax.scan(one_round, start, jax.random.split(key, rounds))
  valid = exact | (in_range & ~failed)  # False for a NaN or negative noise too.
  return Search(jnp.where(valid, lo, -1), queried, released)


@dataclasses.dataclass(frozen=True)
class NoisySearch:
  """The noisy binary search on integer counts of sensitivity 1 per feature (l2 `sqrt(p)` over `p`
  features): `DiscreteGaussian(noise)` per round, and one sampler draw per feature and round."""

  sensitivity: int = 1  # of every count N_jk, replace-one neighbours

  def run(self, key: Array, counts: Array, noise: Any, threshold: Any, *, num_features: Any = None) -> Search:
    """[`noisy_search`][dpgcd_jax.release_mechanisms.noisy_search]."""
    return noisy_search(key, counts, noise, threshold, num_features=num_features)

  def event(self, noise: float) -> events.PrivacyEvent:
    """The event of one round at multiplier `noise`: `DiscreteGaussian(noise)` (`1 / (2 noise^2)`-zCDP)."""
    return events.DiscreteGaussian(noise)

  def draws(self, num_features: int) -> events.PrivacyEvent:
    """The samplers' charge of one round over `num_features` features: `DiscreteDraws(num_features)`."""
    return events.DiscreteDraws(num_features)


@dataclasses.dataclass(frozen=True)
class ClippedMeans:
  """Per coordinate `j`, the mean over the `n` records of terms in `[0, c_j]`, plus noise of
  `multiplier` times its sensitivity `c_j / n` (widened by the roundings): `noise="laplace"` (l1
  sensitivity `p c / n`: `multiplier = p / epsilon` is `PureDp(epsilon)`) or `"gaussian"` (l2
  `sqrt(p) c / n`: `multiplier = s sqrt(p)` is `Gaussian(s)`). In floats: the mean of the terms
  minus `c_j / 2` is summed exactly on a fixed-point grid ([`dpgcd_jax.clipping.clipped_mean`][])
  and `c_j / 2` added back; the noise is drawn at `c_j / n` widened by those roundings
  ([`dpgcd_jax.clipping.with_roundings`][]) and rounded up ([`dpgcd_jax.clipping.noise_scale`][]).

  `secure=True`: the discrete counterpart, the secure update of the same name
  (`dpgcd_jax.mechanisms` `DiscreteLaplaceNoise` / `DiscreteGaussianNoise`): the mean snapped to the
  public grid `gran_j` of `multiplier x Delta_j` is an integer of sensitivity
  `D_j = ceil(Delta_j / gran_j) + 1`, plus discrete noise of integer scale `t_j > multiplier D_j`. Laplace:
  `sum_j D_j / t_j < p / multiplier = epsilon`, event `DiscreteLaplace(epsilon)`; Gaussian:
  `sum_j D_j^2 / (2 t_j^2) < p / (2 multiplier^2) = 1 / (2 s^2)`-zCDP, event `DiscreteGaussian(s)`;
  each of the `p` draws is charged apart (`draws`). A coordinate whose draw hit a sampler cap, or
  whose scale is out of the sampler's range, is NaN (fail closed).
  """

  noise: str = "laplace"
  secure: bool = False

  def release(self, key: Array, terms: Array, clip: np.ndarray, multiplier: float) -> Array:
    """The (p,) noisy means of the (n, p) `terms` (each in `[0, clip_j]`; `clip` (p,), public)."""
    n = terms.shape[0]
    clip_arr = jnp.asarray(clip, terms.dtype)
    half = clip_arr / 2.0  # exact: a power-of-two scaling
    centred = terms - half[None, :]  # in [-c_j / 2, c_j / 2]; its mean exact up to one rounding
    mean = clipping.clipped_mean(centred, half[None, :], axis=0) + half
    # c_j / n in real arithmetic, plus the mean's rounding and the two roundings of `+ half`
    sensitivity = clipping.with_roundings(clipping.mean_sensitivity(half, n), clip_arr, roundings=2)
    if self.secure:
      update = mechanisms.update(mechanisms.SECURE_UPDATES[self.noise])
      return update.perturb(key, mean, jnp.asarray(clipping.rounded_up(multiplier, terms.dtype)), sensitivity)
    scale = clipping.noise_scale(jnp.asarray(clipping.rounded_up(multiplier, terms.dtype)), sensitivity)
    return mechanisms.update(self.noise).perturb(key, mean, scale)

  def event(self, multiplier: float, num_features: int) -> events.PrivacyEvent:
    """The event of one release at `multiplier` over `num_features` coordinates."""
    if self.noise == "laplace":
      epsilon = num_features / float(multiplier)
      return events.DiscreteLaplace(epsilon) if self.secure else events.PureDp(epsilon)
    noise = float(multiplier) / math.sqrt(num_features)
    return events.DiscreteGaussian(noise) if self.secure else events.Gaussian(noise)

  def draws(self, num_features: int) -> int:
    """The discrete samplers' draws of one release: one per coordinate when `secure`, else none."""
    return int(num_features) if self.secure else 0

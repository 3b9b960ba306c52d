"""The library's one mechanism layer: every privacy noise draw, each with its sampler and its cost.

Every noise that protects a release is drawn here, by a mechanism object below: the solvers'
selections and updates, DP-IHT's and the sparse solvers' peeling (`noisy`), DP-SGD's
Gaussian noise (`noise`), the released curvatures and smoothness (`perturb` on a vector), the
private scores and the CV scores (`perturb`, called from the host by `dpgcd_jax.host_release`),
and the integer releases of the private scales and bounds
(`perturb_integers`, called by AboveThreshold and the noisy binary search of
[`dpgcd_jax.release_mechanisms`][], which hold every draw of `dpgcd_jax.privacy`). A test
(`tests/privacy/test_mechanism_layer.py`) fails when code outside this module and its
samplers (`dpgcd_jax.discrete_noise`) names a noise sampler, so a draw cannot bypass the layer
and its event.

A mechanism is a small frozen (hashable, static under `jax.jit`) object with

- a device-side sampler: `select(key, scores_fn, g, w, M, penalty, scale, rule)` for a
  selection, `perturb(key, g_j, scale)` for an update (`scale` = multiplier x sensitivity);
- `cost`: its host-side privacy cost (`dpgcd_jax.privacy.costs`), from which it reads
  `name`, `event(multiplier)` (the privacy event of one use with that multiplier, which the
  ledger composes) and `zcdp_per_unit` (`rho` of one use times `multiplier^2`: splits a
  budget between a selection and an update, `selection_share` of
  [`dpgcd_jax.privacy.calibrate_gcd`][]). The accounting reads the costs, never this module.

The two float selections also expose `noisy_scores`, the criteria whose argmax `select` is (one
draw per coordinate, for every coordinate: one law on dense and sparse features alike).

Solvers and the accounting look mechanisms up by object or by name (`"laplace"`,
`"gumbel"`, `"gaussian"` are sugar for the objects below). Adding a mechanism is one
class in this file, registered in `SELECTIONS` or `UPDATES`, with its cost in
`dpgcd_jax.privacy.costs`, and a statistical
test of its sampler (`tests/privacy/test_noise.py`) and of its event against dp_accounting.

Privacy arguments (sensitivities in [`dpgcd_jax.solvers.greedy`][]): report-noisy-max with
Laplace noise `b Delta_bar` is `2 / b`-DP; the Gumbel-max (exponential mechanism) with
scale `b Delta_bar` is `2 / b`-DP and `2 / b`-bounded-range; a Laplace update of scale
`b' Delta_j` is `1 / b'`-DP (the Laplace mechanism); a Gaussian update of standard deviation
`s Delta_j` is the Gaussian mechanism with multiplier `s`.

Floating-point-safe mechanisms (`secure_noise=True` in [`dpgcd_jax.dp_gcd.run`][] / `fit`,
or the names `"discrete_laplace"` / `"discrete_gaussian"`): they release integers on a public
grid (`dpgcd_jax.discrete_grid`), the noise drawn by the exact samplers of
`dpgcd_jax.discrete_noise`, so that no released float carries Mironov's (2012) artefacts. Such
an object has `discrete = True` and takes the multiplier and the sensitivity separately:
`select(key, scores_fn, g, w, M, penalty, multiplier, sensitivity, rule) -> (j, ok)` and
`perturb(key, value, multiplier, sensitivity)` (NaN when not ok). Grid
(`dpgcd_jax.discrete_grid.grid_and_scale`): `gran = 2^floor(log2(multiplier Delta / 8192))`
(public), integer sensitivity `D = ceil(Delta / gran) + 1` (the rounding adds one step), integer
scale `t = floor(multiplier D) + 1 > multiplier D`. Hence report-noisy-max with discrete Laplace
noise `t` on the snapped scores is `2 D / t < 2 / b`-DP, a discrete Laplace update
`D / t < 1 / b'`-DP, a discrete Gaussian update `D^2 / (2 t^2) < 1 / (2 s^2)`-zCDP
(Canonne, Kamath & Steinke 2020, Thm 4): the events below are these bounds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any
from typing import ClassVar
from typing import Protocol
from typing import runtime_checkable

import jax
import jax.numpy as jnp

from dpgcd_jax import discrete_grid
from dpgcd_jax import discrete_noise
from dpgcd_jax import penalties
from dpgcd_jax.privacy import costs
from dpgcd_jax.privacy import events

Array = jax.Array


def draw(sampler: Callable[..., Array], key: Array, shape: tuple[int, ...], dtype: Any) -> Array:
  """`sampler(key, shape, dtype)` (a `jax.random` sampler: iid entries), drawn at an even count.

  JAX's threefry generator costs 4-5x more per entry at an odd count (measured on CPU: Laplace
  noise over 99,999 entries 5.0 ms, over 100,000 1.1 ms; 999,999 entries 51 ms, 1e6 13 ms). An
  odd count draws one entry more and drops it: the entries are iid either way, and with JAX's
  default `jax_threefry_partitionable` the kept entries ARE `sampler(key, shape, dtype)` (each
  entry's bits depend on its index only): the draws are unchanged (XLA may still fuse the
  arithmetic after them differently, a float rounding).
  """
  size = math.prod(shape)
  if size % 2 == 0:
    return sampler(key, shape, dtype)
  return sampler(key, (size + 1,), dtype)[:size].reshape(shape)


def argmax(x: Array) -> Array:
  """`jnp.argmax` of a vector (the first maximum; a NaN counts as the maximum), as two reductions.

  The same index as `jnp.argmax` for every input (a max, then the smallest index holding it or
  a NaN), but vectorized: XLA's CPU argmax reduces (value, index) pairs one by one (4.6 ms over
  1e6 scores against 0.6 ms here; a noisy selection over 1e6 coordinates 18.6 -> 9.4 ms).
  """
  top = jnp.max(x)
  hit = (x == top) | jnp.isnan(x)
  return jnp.min(jnp.where(hit, jnp.arange(x.shape[0], dtype=jnp.int32), x.shape[0]))


@runtime_checkable
class SelectionMechanism(Protocol):
  """The contract of a selection (module docstring): a device-side `select` and its cost."""

  name: str
  zcdp_per_unit: float

  def select(self, *args: Any) -> Any: ...

  def event(self, multiplier: float) -> events.PrivacyEvent: ...


@runtime_checkable
class UpdateMechanism(Protocol):
  """The contract of an update (module docstring): a device-side `perturb` and its cost."""

  name: str
  zcdp_per_unit: float

  def perturb(self, *args: Any) -> Any: ...

  def event(self, multiplier: float) -> events.PrivacyEvent: ...


class _Costed:
  """A mechanism's host-side cost (`dpgcd_jax.privacy.costs`): its name, event and zCDP."""

  cost: ClassVar[costs.Cost]

  @property
  def name(self) -> str:
    return self.cost.name

  @property
  def zcdp_per_unit(self) -> float:
    return self.cost.zcdp_per_unit

  def event(self, multiplier: float) -> events.PrivacyEvent:
    return self.cost.event(multiplier)


@dataclasses.dataclass(frozen=True)
class LaplaceNoisyMax(_Costed):
  """Paper-faithful selection: Laplace noise, inside `|.|` where the score allows it."""

  cost: ClassVar[costs.Cost] = costs.SELECTIONS["laplace"]

  def select(self, key: Array, score: Callable[..., Array], g: Array, w: Array, M: Array,
             penalty: Any, scale: Array, rule: str) -> Array:
    return argmax(self.noisy_scores(key, score, g, w, M, penalty, scale, rule))

  def noisy_scores(self, key: Array, score: Callable[..., Array], g: Array, w: Array, M: Array,
                   penalty: Any, scale: Array, rule: str) -> Array:
    """The criteria whose argmax `select` returns (one Laplace draw per coordinate)."""
    z = scale * draw(jax.random.laplace, key, g.shape, g.dtype)
    if _inside(rule, penalty):
      # Score |u_j + c_j| with c_j public, V-shaped without plateau (solvers.greedy).
      return score(g + jnp.sqrt(M) * z, w, M, penalty)
    return score(g, w, M, penalty) + z  # report-noisy-max


def _inside(rule: str, penalty: Any) -> bool:
  """Whether `LaplaceNoisyMax` adds its noise inside `|.|` (GS-s with a differentiable penalty)."""
  return rule == "gs-s" and penalties.is_differentiable(penalty)


@dataclasses.dataclass(frozen=True)
class GumbelMax(_Costed):
  """Exponential mechanism: `argmax score_j + b Delta_bar G_j`, `G_j ~ Gumbel(0, 1)`."""

  cost: ClassVar[costs.Cost] = costs.SELECTIONS["gumbel"]

  def select(self, key: Array, score: Callable[..., Array], g: Array, w: Array, M: Array,
             penalty: Any, scale: Array, rule: str) -> Array:
    return argmax(self.noisy_scores(key, score, g, w, M, penalty, scale, rule))

  def noisy_scores(self, key: Array, score: Callable[..., Array], g: Array, w: Array, M: Array,
                   penalty: Any, scale: Array, rule: str) -> Array:
    """The criteria whose argmax `select` returns (one Gumbel draw per coordinate)."""
    del rule
    return self.noisy(key, score(g, w, M, penalty), scale)

  def noisy(self, key: Array, scores: Array, scale: Array) -> Array:
    """`scores + scale G`, iid standard Gumbel `G`: the criteria of a Gumbel-max selection, and
    of each round of peeling (its top-`s` is `s` rounds of this mechanism, [`dpgcd_jax.peeling`][])."""
    return scores + scale * draw(jax.random.gumbel, key, scores.shape, scores.dtype)


@dataclasses.dataclass(frozen=True)
class LaplaceNoise(_Costed):
  """Update noise `Lap(b' Delta_j)`: the Laplace mechanism, `1 / b'`-DP."""

  cost: ClassVar[costs.Cost] = costs.UPDATES["laplace"]

  def perturb(self, key: Array, value: Array, scale: Array) -> Array:
    """`value + noise`: a scalar, or an array with iid noise per entry."""
    value = jnp.asarray(value)
    return value + self.noise(key, value.shape, value.dtype, scale)

  def noise(self, key: Array, shape: tuple[int, ...], dtype: Any, scale: Array) -> Array:
    """iid `Lap(scale)` entries of `shape`."""
    return scale * _iid(jax.random.laplace, key, shape, dtype)


@dataclasses.dataclass(frozen=True)
class GaussianNoise(_Costed):
  """Update noise `N(0, (s Delta_j)^2)`: the Gaussian mechanism, `1 / (2 s^2)`-zCDP."""

  cost: ClassVar[costs.Cost] = costs.UPDATES["gaussian"]

  def perturb(self, key: Array, value: Array, scale: Array) -> Array:
    """`value + noise`: a scalar, or an array with iid noise per entry."""
    value = jnp.asarray(value)
    return value + self.noise(key, value.shape, value.dtype, scale)

  def noise(self, key: Array, shape: tuple[int, ...], dtype: Any, scale: Array) -> Array:
    """iid `N(0, scale^2)` entries of `shape` (DP-SGD adds them to its exact sum in float64)."""
    return scale * _iid(jax.random.normal, key, shape, dtype)


def _iid(sampler: Callable[..., Array], key: Array, shape: tuple[int, ...], dtype: Any) -> Array:
  """One draw for a scalar (the solvers' updates), `draw` (an even count) for an array."""
  return sampler(key, (), dtype) if shape == () else draw(sampler, key, shape, dtype)


@dataclasses.dataclass(frozen=True)
class DiscreteLaplaceNoisyMax(_Costed):
  """Report-noisy-max on the public grid: `argmax_j round(score_j / gran) + Z_j`, integers.

  `Z_j` discrete Laplace of integer scale `t = floor(b D) + 1`; every score (GS-s, GS-r,
  GS-q) goes through the same report-noisy-max (no noise inside `|.|`). Privacy: the snapped
  scores are integers of sensitivity `D = ceil(Delta_bar / gran) + 1`; given the other
  noises, `j` wins (ties: lowest index) iff `Z_j` reaches an integer threshold that moves
  by at most `2 D` between neighbours, so the release is `2 D / t`-DP, `< 2 / b`: the
  event `PureDp(2 / b)` is an upper bound on the exact mechanism. Multiplier 0: the
  noise-free argmax (the non-private limit); an invalid multiplier or a sampler cap: `ok`
  False (the step then releases NaN).
  """

  cost: ClassVar[costs.Cost] = costs.SELECTIONS["discrete_laplace"]
  discrete: bool = True

  def select(self, key: Array, score: Callable[..., Array], g: Array, w: Array, M: Array,
             penalty: Any, multiplier: Array, sensitivity: Array, rule: str) -> tuple[Array, Array]:
    del rule
    return self.noisy_max(key, score(g, w, M, penalty), multiplier, sensitivity)

  def noisy_max(self, key: Array, scores: Array, multiplier: Array, sensitivity: Array,
                allowed: Array | None = None) -> tuple[Array, Array]:
    """`(j, ok)`: report-noisy-max of `scores` on the grid, over the entries where the PUBLIC
    mask `allowed` is True (all by default; each round of secure peeling,
    [`dpgcd_jax.peeling`][], excludes the indices already drawn)."""
    gran, t, valid = discrete_grid.grid_and_scale(multiplier, sensitivity)
    z = discrete_noise.discrete_laplace(key, t, scores.shape)
    with jax.enable_x64(True):
      noisy = discrete_grid.noisy_integer(scores, gran, z)
      j = argmax(noisy if allowed is None else jnp.where(allowed, noisy, -jnp.inf)).astype(jnp.int32)
    # A NaN score would win the exact argmax whatever the noise: fail closed instead.
    ok = valid & jnp.all(z != discrete_noise.FAILED) & jnp.all(~jnp.isnan(scores))
    # Not ok (a scale out of the samplers' range, or a capped draw): j would be released
    # with too little noise, so the released index is 0, independent of the data, and the
    # step releases NaN.
    j = jnp.where(ok, j, 0)
    exact = argmax(scores if allowed is None else jnp.where(allowed, scores, -jnp.inf))
    return jnp.where(multiplier == 0, exact, j), (multiplier == 0) | ok


def _perturb_on_grid(sampler, key: Array, value: Array, multiplier: Array,
                     sensitivity: Array) -> Array:
  value = jnp.asarray(value)
  gran, t, valid = discrete_grid.grid_and_scale(multiplier, sensitivity)
  z = sampler(key, t, value.shape)  # one draw per entry
  with jax.enable_x64(True):  # the released integer k, then k gran: a function of k (gran: public power of two)
    released = (discrete_grid.noisy_integer(value, gran, z) * jnp.asarray(gran, jnp.float64)).astype(value.dtype)
  ok = valid & (z != discrete_noise.FAILED)
  return jnp.where(multiplier == 0, value, jnp.where(ok, released, jnp.nan))


@dataclasses.dataclass(frozen=True)
class DiscreteLaplaceNoise(_Costed):
  """Update `(round(g_j / gran) + Z) gran`, `Z` discrete Laplace of scale `t = floor(b' D) + 1`.

  `D / t < 1 / b'`-DP (the discrete Laplace mechanism on an integer of sensitivity `D`):
  event `DiscreteLaplace(1 / b')`, accounted as pure DP (randomized response dominates it).
  """

  cost: ClassVar[costs.Cost] = costs.UPDATES["discrete_laplace"]
  discrete: bool = True

  def perturb(self, key: Array, value: Array, multiplier: Array, sensitivity: Array) -> Array:
    return _perturb_on_grid(discrete_noise.discrete_laplace, key, value, multiplier, sensitivity)

  def perturb_integers(self, key: Array, queries: Array, scale: Array) -> tuple[Array, Array]:
    """`(queries + Z, ok)`: int32 integer queries plus discrete Laplace `Z` of int32 scales
    `scale` (one per query, or one for all). The DP argument is the caller's (e.g.
    AboveThreshold, [`dpgcd_jax.release_mechanisms`][]); `ok` is False where a draw hit the
    sampler's cap (the noisy value there is the query itself: the caller must not release it)."""
    return _integers(discrete_noise.discrete_laplace, key, queries, scale)


@dataclasses.dataclass(frozen=True)
class DiscreteGaussianNoise(_Costed):
  """Update `(round(g_j / gran) + Z) gran`, `Z` discrete Gaussian, `sigma = floor(s D) + 1`.

  `D^2 / (2 sigma^2) < 1 / (2 s^2)`-zCDP (CKS 2020, Thm 4, integer sensitivity `D`):
  event `DiscreteGaussian(s)` (RDP `alpha / (2 s^2)`; no GDP / PLD route claims it).
  """

  cost: ClassVar[costs.Cost] = costs.UPDATES["discrete_gaussian"]
  discrete: bool = True

  def perturb(self, key: Array, value: Array, multiplier: Array, sensitivity: Array) -> Array:
    return _perturb_on_grid(discrete_noise.discrete_gaussian, key, value, multiplier, sensitivity)

  def perturb_integers(self, key: Array, queries: Array, scale: Array) -> tuple[Array, Array]:
    """`(queries + Z, ok)`: int32 integer queries plus discrete Gaussian `Z` of int32 sigma
    `scale` (the private scales' noisy counts, [`dpgcd_jax.release_mechanisms`][]), or float64
    integer-valued queries below `2^52` (secure DP-SGD's exact sums); as
    `DiscreteLaplaceNoise.perturb_integers`."""
    return _integers(discrete_noise.discrete_gaussian, key, queries, scale)


def _integers(sampler, key: Array, queries: Array, scale: Array) -> tuple[Array, Array]:
  z = sampler(key, scale, queries.shape)  # the samplers are int32 code: drawn outside x64
  ok = z != discrete_noise.FAILED
  with jax.enable_x64(True):  # float64 integer queries (DP-SGD's exact sums) add exactly
    return queries + jnp.where(ok, z, 0).astype(queries.dtype), ok


SELECTIONS = {m.name: m for m in (LaplaceNoisyMax(), GumbelMax(), DiscreteLaplaceNoisyMax())}
UPDATES = {m.name: m for m in (LaplaceNoise(), GaussianNoise(), DiscreteLaplaceNoise(),
                               DiscreteGaussianNoise())}
SECURE_SELECTIONS = {"laplace": "discrete_laplace", "discrete_laplace": "discrete_laplace"}
SECURE_UPDATES = {"laplace": "discrete_laplace", "gaussian": "discrete_gaussian",
                  "discrete_laplace": "discrete_laplace", "discrete_gaussian": "discrete_gaussian"}


def is_discrete(mechanism: Any) -> bool:
  """Whether a mechanism object releases integers on the public grid (`discrete = True`)."""
  return bool(getattr(mechanism, "discrete", False))


def secure(selection_name: Any, update_name: Any) -> tuple[str, str]:
  """The floating-point-safe counterparts of a (selection, update) pair of names.

  "laplace" -> "discrete_laplace" (both), "gaussian" -> "discrete_gaussian". There is no exact
  discrete exponential mechanism here: `selection="gumbel"` raises, as does any object that
  is not discrete.
  """
  for kind, name, table in (("selection", selection_name, SECURE_SELECTIONS),
                            ("update", update_name, SECURE_UPDATES)):
    if isinstance(name, str) and name in table:
      continue
    if not isinstance(name, str) and is_discrete(name):
      continue
    raise ValueError(f"Expected {kind} to be one of {tuple(table)} (or a discrete mechanism "
                     f"object) with secure_noise=True, got {kind}={name!r}.")
  pick = lambda name, table: table[name] if isinstance(name, str) else name
  return pick(selection_name, SECURE_SELECTIONS), pick(update_name, SECURE_UPDATES)


def selection(mechanism: Any) -> Any:
  """The selection mechanism object for a name or an object (ValueError naming it otherwise)."""
  return _lookup("selection", mechanism, SELECTIONS, "select")


def update(mechanism: Any) -> Any:
  """The update mechanism object for a name or an object (ValueError naming it otherwise)."""
  return _lookup("update", mechanism, UPDATES, "perturb")


def _lookup(kind: str, mechanism: Any, registry: dict[str, Any], method: str) -> Any:
  if isinstance(mechanism, str) and mechanism in registry:
    return registry[mechanism]
  protocol = SelectionMechanism if method == "select" else UpdateMechanism
  if not isinstance(mechanism, str) and isinstance(mechanism, protocol):
    return mechanism
  raise ValueError(f"Expected {kind} to be one of {tuple(registry)} or a {kind} mechanism object "
                   f"(with {method} and event), got {kind}={mechanism!r}.")

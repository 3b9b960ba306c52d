"""Peeling: private top-`s` selection, `s` rounds of the exponential mechanism without replacement.

Used by private iterative hard thresholding ([`dpgcd_jax.solvers.dp_iht`][]) and by the
support selection of the two-stage solver ([`dpgcd_jax.solvers.two_stage`][]).

Given scores `u` (a (p,) vector) whose entries each move by at most `Delta_u` between
neighbouring datasets, round `r = 1, ..., s` draws `j_r` from the coordinates not drawn yet,
`R_r = {1..p} \\ {j_1..j_(r-1)}`, with

$$
P(j_r = j \\mid j_1, \\dots, j_{r-1}) = \\frac{\\exp(u_j / (b \\Delta_u))}
{\\sum_{k \\in R_r} \\exp(u_k / (b \\Delta_u))}, \\quad j \\in R_r
$$

(`b` the multiplier). One draw computes all `s` rounds: the indices of the `s` largest
`u_j + b Delta_u G_j`, `G_j ~ Gumbel(0, 1)` i.i.d., in decreasing order. The ordered top-`s`
of Gumbel-perturbed scores has exactly the law above (the Gumbel-top-k trick; Yellott 1977,
Kool, van Hoof & Welling 2019; Durfee & Rogers 2019 use it for private top-k): the arg max of
`u_j / tau + G_j` over a set is a softmax draw from it, independent of the value of the max;
given the first winner and its value `m`, the others are conditioned only on their max being
below `m`, which leaves their arg max a softmax draw from the remaining set; and so on.
`b = 0` is the exact top-`s` (ties: the lower index first).

Privacy (replace-one neighbours). Round `r` is the exponential mechanism over the set `R_r`,
which is a function of the earlier outputs only: the argument of `dpgcd_jax.mechanisms.GumbelMax`
(the utility moves by at most `Delta_u` for every candidate, the log-probability ratio is a
term in `[-1/b, 1/b]` plus a constant) makes it `2 / b`-bounded-range. The `s` rounds are
`s` adaptive `BoundedRange(2 / b)` releases, [`ledger`][dpgcd_jax.peeling.ledger]; the one-shot draw has the
same output distribution, hence the same guarantee. Releasing the set instead of the ordered
list is post-processing. The Gumbel draw is not snapped to a grid.

Secure peeling ([`peel_secure`][dpgcd_jax.peeling.peel_secure], the solvers' `secure_noise`):
round `r` is report-noisy-max with discrete Laplace noise on the public grid over `R_r`
(`dpgcd_jax.mechanisms.DiscreteLaplaceNoisyMax.noisy_max`, fresh noise each round): given
the earlier outputs, `R_r` is public and the round is `2 / b`-DP, the event `PureDp(2 / b)`;
the `s` rounds compose adaptively ([`ledger`][dpgcd_jax.peeling.ledger] with
`selection="discrete_laplace"`). A failed draw makes `ok` False (the caller releases NaN).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib

Array = jax.Array

ROUND = mechanisms.GumbelMax()  # one round: the exponential mechanism, BoundedRange(2 / b)
SECURE_ROUND = mechanisms.DiscreteLaplaceNoisyMax()  # one secure round: PureDp(2 / b)
SELECTIONS = (ROUND.name, SECURE_ROUND.name)  # secure_noise=False / True: the rounds' registry names


def peel(key: Array, scores: Array, sparsity: int, multiplier: Array, sensitivity: Array) -> Array:
  """The `sparsity` indices drawn by peeling on `scores`, in the order drawn.

  Args:
    key: a JAX PRNG key, used once.
    scores: (p,) utilities `u`; each moves by at most `sensitivity` between neighbours.
    sparsity: `s`, static, `1 <= s <= p`.
    multiplier: `b` >= 0, the temperature in units of `sensitivity`. 0: the exact top-`s`;
      invalid (negative, NaN): NaN scores, a data-independent output (see
      [`dpgcd_jax.clipping.noise_scale`][]).
    sensitivity: `Delta_u`.

  Returns:
    (s,) int32 indices, distinct.
  """
  scale = clipping.noise_scale(multiplier, sensitivity)
  noisy = mechanisms.GumbelMax().noisy(key, scores, scale)
  return jax.lax.top_k(noisy, sparsity)[1]


def peel_secure(key: Array, scores: Array, sparsity: int, multiplier: Array,
                sensitivity: Array) -> tuple[Array, Array]:
  """`(indices, ok)`: `sparsity` rounds of discrete report-noisy-max without replacement
  (module docstring), `fold_in(key, r)` at round `r`; `ok` False if any round failed."""

  def one_round(carry: tuple[Array, Array], r: Array) -> tuple[tuple[Array, Array], Array]:
    drawn, ok = carry
    j, ok_r = SECURE_ROUND.noisy_max(jax.random.fold_in(key, r), scores, multiplier, sensitivity, ~drawn)
    return (drawn | (jnp.arange(scores.shape[0]) == j), ok & ok_r), j

  start = (jnp.zeros(scores.shape, bool), jnp.asarray(True))
  (_, ok), indices = jax.lax.scan(one_round, start, jnp.arange(sparsity))
  return indices, ok


def indicator(indices: Array, size: int) -> Array:
  """(size,) bool: `True` at `indices` (a comparison, not a scatter: it vmaps well)."""
  return jnp.any(jnp.arange(size)[:, None] == indices[None, :], axis=1)


def event(multiplier: float, selection: str = "gumbel") -> events.PrivacyEvent:
  """The event of ONE round with multiplier `b`: `BoundedRange(2 / b)` (`selection="gumbel"`)
  or `PureDp(2 / b)` (`"discrete_laplace"`, secure peeling)."""
  _validate.check_choice("selection", selection, SELECTIONS)
  return mechanisms.selection(selection).event(float(multiplier))


def ledger(label: str, multiplier: float, sparsity: int, count: int = 1,
           selection: str = "gumbel") -> ledger_lib.Ledger:
  """`count` peelings of `sparsity` rounds each: `count * sparsity` rounds of [`event`][dpgcd_jax.peeling.event]."""
  sparsity = check_sparsity(sparsity)
  count = _validate.check_int("count", count, low=0)
  _validate.check_positive("multiplier", multiplier, allow_zero=True, allow_inf=True)
  return ledger_lib.Ledger.of((label, event(multiplier, selection), sparsity * count))


def check_sparsity(sparsity: int, num_features: int | None = None) -> int:
  """`sparsity` as an int in `[1, p]` (ValueError naming it otherwise)."""
  sparsity = _validate.check_int("sparsity", sparsity, low=1)
  if num_features is not None and sparsity > num_features:
    raise ValueError(f"Expected sparsity <= the number of features {num_features}, got sparsity={sparsity}.")
  return sparsity

"""A differentially private estimate of the coordinate smoothness `M_j` (GLM losses).

The solvers use `M_j` (steps `gamma / M_j`, normalized scores `g_j / sqrt(M_j)`, clipping
thresholds `C_j = C sqrt(M_j / sum M)`). Computed from the private `X` it is data-dependent
and their guarantee only holds conditionally on it (see [`dpgcd_jax.problem`][]). This module
spends a declared budget to release `M` privately instead (DP-CD paper, Mangold et al.
2022): for a GLM loss with `phi'' <= beta`,

$$
m_{ij} = \\min(\\beta x_{ij}^2, c), \\qquad
\\hat M_j = \\max\\Big(\\frac1n \\sum_{i=1}^n m_{ij} + \\xi_j,\\; M_{\\min}\\Big).
$$

Sensitivity (replace-one, `n` public): each `m_ij` lies in `[0, c]`, so replacing one
record moves each mean by at most `c / n`; the vector of means moves by at most
`p c / n` in l1 norm and `sqrt(p) c / n` in l2 norm. In floats: the mean of `m_ij - c / 2`
is summed exactly on a fixed-point grid ([`dpgcd_jax.clipping.clipped_mean`][]) and `c / 2`
added back; the noise is drawn at `c / n` widened by those roundings
([`dpgcd_jax.clipping.mean_sensitivity`][], [`dpgcd_jax.clipping.with_roundings`][]) and
rounded up ([`dpgcd_jax.clipping.noise_scale`][]). The noisy means are drawn in the mechanism
layer, by [`ClippedMeans`][dpgcd_jax.release_mechanisms.ClippedMeans] (with its event).

* `noise="laplace"`: `xi_j ~ Lap(p c / (n epsilon))` i.i.d., the Laplace mechanism with l1
  sensitivity `p c / n`: pure `epsilon`-DP.
* `noise="gaussian"`: `xi_j ~ N(0, (s sqrt(p) c / n)^2)`, the Gaussian mechanism with l2
  sensitivity `sqrt(p) c / n`, where `s` is the exact (Balle & Wang 2018) multiplier for one
  Gaussian release at `(epsilon, delta)` (`dpgcd_jax.privacy.baseline_accounting.calibrate_cd`
  with one step): `(epsilon, delta)`-DP. Its noise grows as `sqrt(p)` instead of `p`:
  better in high dimension.

* `secure_noise=True`: the floating-point-safe counterparts (docs/secure_noise.md), discrete
  Laplace or discrete Gaussian noise on the mean snapped to a public grid (the secure updates of
  `dpgcd_jax.mechanisms`): `DiscreteLaplace(epsilon)` or `DiscreteGaussian(s)` (`s` calibrated
  on that event by RDP), plus the samplers' charge of the `p` draws
  ([`smoothness_ledger`][dpgcd_jax.privacy.smoothness.smoothness_ledger]).

A per-coordinate `clip` vector `c_j` gives noise scales proportional to `c_j` with the
same guarantees (`Lap(p c_j / (n epsilon))`: the privacy losses `(c_j / n) / b_j` sum to
`epsilon`; `N(0, (s sqrt(p) c_j / n)^2)`: the squared ratios sum to `1 / s^2`).

The floor `M_min > 0` is post-processing (no privacy cost). It prevents tiny or negative
estimates, which would give huge steps and scores; the default is the noise scale (the
Laplace scale `b_j` or the Gaussian standard deviation `sigma_j`), a public quantity
below which the estimate is mostly noise. Overestimating `M_j` only makes steps more
conservative.

Budget: the solver run with `M_hat` is DP for every fixed `M` and `M_hat` is DP, so by
(adaptive) basic composition the whole pipeline is `(epsilon_M + epsilon_solver,
delta_M + delta_solver)`-DP (`delta_M = 0` for Laplace noise). Example, a total budget
`(1, 1e-6)` split 0.1 / 0.9:

```python
import jax, numpy as np
import dpgcd_jax as dg
from dpgcd_jax.privacy.smoothness import private_smoothness

X = np.random.default_rng(0).normal(size=(10_000, 20)); y = X[:, 0]
key_m, key_run = jax.random.split(jax.random.key(0))
M_hat = private_smoothness(X, "squared", epsilon=0.1, key=key_m, clip=4.0)
problem = dg.make_problem(X, y, "squared", smoothness=M_hat)   # M_hat is now public
result = dg.dp_gcd.fit(problem, key_run, epsilon=0.9, delta=1e-6, passes=20)
# The pair (M_hat, result.w) is (0.1 + 0.9, 1e-6) = (1, 1e-6)-DP. Here the noise scale
# is p c / (n epsilon) = 20 * 4 / (10_000 * 0.1) = 0.08 against M_j close to 1.
```

Choosing `c`: with standardized columns `beta x_ij^2` has mean `beta`; `c` of a few
`beta` keeps the clipping bias small while the noise scale grows linearly in `c`.

References:
  * Mangold, Bellet, Salmon, Tommasi. Differentially Private Coordinate Descent for Composite
    Empirical Risk Minimization. ICML 2022.
  * Dwork, McSherry, Nissim, Smith. Calibrating Noise to Sensitivity in Private Data
    Analysis. TCC 2006.
  * Balle, Wang. Improving the Gaussian Mechanism for Differential Privacy. ICML 2018.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import release_mechanisms

Array = jax.Array
NOISES = ("laplace", "gaussian")


def smoothness_noise_multiplier(p: int, *, epsilon: float, noise: str = "laplace", delta: float | None = None,
                                secure_noise: bool = False) -> float:
  """The noise of `private_smoothness` in units of each coordinate's sensitivity `c_j / n` (host
  side, public inputs): `p / epsilon` (Laplace, both modes) or `s sqrt(p)` (Gaussian: `s` the
  one-release multiplier of `calibrate_cd(epsilon, delta, steps=1)`; with `secure_noise`, the
  smallest `s` at which [`smoothness_ledger`][dpgcd_jax.privacy.smoothness.smoothness_ledger], the
  discrete Gaussian and its draws, is `(epsilon, delta)`-DP)."""
  if noise == "laplace":
    return p / float(epsilon)
  if delta is None:
    raise ValueError("Expected delta in (0, 1) for noise='gaussian', got delta=None.")
  if secure_noise:
    from dpgcd_jax.privacy import calibration  # pylint: disable=g-import-not-at-top
    s, _ = calibration.calibrate(lambda s: _ledger(p, s * math.sqrt(p), noise, True, None), float(epsilon),
                                 float(delta))
    return s * math.sqrt(p)
  from dpgcd_jax.privacy import baseline_accounting  # pylint: disable=g-import-not-at-top
  return baseline_accounting.calibrate_cd(float(epsilon), float(delta), steps=1).update_noise * math.sqrt(p)


def smoothness_ledger(p: int, *, epsilon: float, noise: str = "laplace", delta: float | None = None,
                      secure_noise: bool = False) -> Any:
  """The ledger of one `private_smoothness` release on `p` features (host side): `("smoothness", event, 1)`,
  the event of [`ClippedMeans`][dpgcd_jax.release_mechanisms.ClippedMeans] (`PureDp(epsilon)`,
  `Gaussian(s)`; secure: `DiscreteLaplace(epsilon)`, `DiscreteGaussian(s)`), and with `secure_noise` the
  `p` sampler draws ([`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws], a Laplace release's charged at
  its `epsilon`), as the estimators' secure releases are charged."""
  multiplier = smoothness_noise_multiplier(p, epsilon=epsilon, noise=noise, delta=delta, secure_noise=secure_noise)
  return _ledger(p, multiplier, noise, secure_noise, float(epsilon) if noise == "laplace" else None)


def _ledger(p: int, multiplier: float, noise: str, secure: bool, release_epsilon: float | None) -> Any:
  from dpgcd_jax.privacy import ledger as ledger_lib  # pylint: disable=g-import-not-at-top
  mechanism = release_mechanisms.ClippedMeans(noise, secure)
  spent = ledger_lib.Ledger.of(("smoothness", mechanism.event(multiplier, p), 1))
  return spent.with_draws(mechanism.draws(p), 1, release_epsilon)


def private_smoothness(
    X: Any,
    loss: losses_lib.Loss | str,
    *,
    epsilon: float,
    key: Array,
    clip: Any,
    noise: str = "laplace",
    delta: float | None = None,
    floor: float | None = None,
    secure_noise: bool = False,
) -> Array:
  """`epsilon`-DP (Laplace) or `(epsilon, delta)`-DP (Gaussian) estimate of `M_j`.

  $$
  \\hat M_j = \\max\\Big(\\frac1n \\sum_i \\min(\\beta x_{ij}^2, c_j) + \\xi_j,\\;
  M_{\\min}\\Big), \\quad \\xi_j \\sim \\mathrm{Lap}(p c_j / (n \\varepsilon)) \\text{ or }
  N(0, (s \\sqrt{p} c_j / n)^2).
  $$

  See the module docstring for the sensitivity, the guarantee and how the budget composes
  with the solver's. The result is the data-term smoothness (without `l2`), to be passed
  as `dpgcd_jax.make_problem(..., smoothness=M_hat)`. `key` may be batched with
  `jax.vmap` (the other arguments are host values).

  Args:
    X: (n, p) finite features.
    loss: a GLM [`dpgcd_jax.Loss`][] with a known `curvature` `beta` (`phi'' <= beta`)
      or a built-in name ("squared": 1, "logistic": 1/4, "huber": 1).
    epsilon: the budget spent on the estimate, > 0 and finite.
    key: a JAX PRNG key (required).
    clip: `c > 0`, finite: a scalar or a (p,) vector of per-coordinate clipping levels.
    noise: "laplace" (pure DP, default) or "gaussian" (needs `delta`).
    delta: in (0, 1), for `noise="gaussian"` only.
    floor: `M_min > 0` (post-processing); default: the per-coordinate noise scale.
    secure_noise: the discrete counterpart (floating-point safe, module docstring): discrete
      Laplace or discrete Gaussian noise on the mean snapped to a public grid; a coordinate whose
      draw fails is NaN. Its ledger, the draws' charge included:
      [`smoothness_ledger`][dpgcd_jax.privacy.smoothness.smoothness_ledger].

  Returns:
    (p,) private smoothness estimates, all `>= floor`.

  Raises:
    ValueError: naming the argument, for a bad `X`, `loss`, `epsilon`, `clip`,
      `noise`, `delta`, `floor` or `key`.
  """
  loss = losses_lib.get(loss)
  if not loss.is_glm or loss.curvature is None:
    raise ValueError(
        f"Expected loss to be a GLM loss with a known curvature bound (phi'' <= beta), got "
        f"loss={loss.name!r}; build it with dpgcd_jax.glm_loss(phi, curvature=beta).")
  _validate.check_finite_array("X", X, ndim=2)
  X = jnp.asarray(X)
  X = X.astype(_validate.compute_dtype(X.dtype))  # half precision: the exact mean needs float32
  n, p = X.shape
  if n < 1 or p < 1:
    raise ValueError(f"Expected X to have at least one row and one column, got X.shape={X.shape}.")
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  _validate.check_choice("noise", noise, NOISES)
  if noise == "gaussian":
    if delta is None:
      raise ValueError("Expected delta in (0, 1) for noise='gaussian', got delta=None.")
    _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
  elif delta is not None:
    raise ValueError(f"Expected delta=None for noise='laplace' (pure DP), got delta={delta!r}.")
  _validate.check_positive("clip", clip)
  if np.ndim(clip) not in (0, 1) or (np.ndim(clip) == 1 and np.shape(clip) != (p,)):
    raise ValueError(
        f"Expected clip to be a scalar or of shape ({p},), got clip.shape={np.shape(clip)}.")
  if floor is not None:
    _validate.check_positive("floor", floor)
  _validate.check_key("key", key)

  clip_vec = np.broadcast_to(np.asarray(clip, dtype=float), (p,))
  multiplier = smoothness_noise_multiplier(p, epsilon=epsilon, noise=noise, delta=delta, secure_noise=secure_noise)
  lower = jnp.asarray(multiplier * clip_vec / n if floor is None else np.full(p, floor), X.dtype)
  terms = jnp.minimum(loss.curvature * X**2, jnp.asarray(clip_vec, X.dtype)[None, :])  # m_ij in [0, c_j]
  means = release_mechanisms.ClippedMeans(noise, bool(secure_noise))
  return jnp.maximum(means.release(key, terms, clip_vec, multiplier), lower)

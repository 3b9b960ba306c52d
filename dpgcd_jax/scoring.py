"""Private evaluation: accuracy, log loss and R^2 released by the Laplace mechanism.

A score is a mean of per-example terms. Each function here clips every term to a public
interval `[0, c]`, takes the mean over the `n` examples (`n` public) and adds Laplace noise
of scale `c / (n epsilon)` drawn by the library's Laplace update mechanism
(`dpgcd_jax.mechanisms.LaplaceNoise`, whose cost gives the ledger event); it returns a
[`PrivateScore`][dpgcd_jax.scoring.PrivateScore] with the released value, the noise scale
and a [`PrivacyReport`][dpgcd_jax.privacy.PrivacyReport], and charges the
[`Accountant`][dpgcd_jax.privacy.Accountant] (its `check` before any data are read, its
`spend` after).

Privacy argument (replace-one neighbours, `n` public). Let `t_i = f(record_i)` be the
per-example terms, each in `[0, c]` for every record: neighbours `D`, `D'` differ in one
record `i`, so every other term is equal and `|mean(t) - mean(t')| = |t_i - t'_i| / n <= c / n`:
the mean has sensitivity `c / n`, and its float64 evaluation adds at most `MEAN_ERROR c`:
`Delta = c / n + MEAN_ERROR c`. Adding `Lap(Delta / epsilon)` noise is the Laplace
mechanism, `epsilon`-DP (Dwork, McSherry, Nissim & Smith 2006); the ledger event is
`Laplace(epsilon)` (its exact privacy-loss distribution composes in the ledger). R^2 releases
two means (`epsilon_1 + epsilon_2 = epsilon`), composed in the report.

The terms must be per-example: `y_pred[i]` (or `proba[i]`) must be computed from record `i`
alone by a model that is public or was released privately (its own report charged
separately, e.g. `clf.privacy_`): given the model the score is `epsilon`-DP, and by adaptive
composition the model and its score together are `(eps_model + epsilon, delta_model)`-DP.
A model fit NON-privately on the same data breaks this: its predictions carry every record.

Not covered by default, as for the library's other float mechanisms: the rounding of the
float noise and the float Laplace sampler's finite range (Mironov 2012). With
`secure_noise=True` the mean is snapped to a public power-of-two grid and released with exact
discrete Laplace noise (`dpgcd_jax.mechanisms.DiscreteLaplaceNoise`), which closes that gap.

Examples:
  >>> import jax, numpy as np
  >>> from dpgcd_jax.scoring import private_accuracy
  >>> y = np.array([0, 1] * 5000); y_hat = np.where(np.arange(10_000) < 8000, y, 1 - y)
  >>> score = private_accuracy(y, y_hat, epsilon=1.0, key=jax.random.key(0))
  >>> abs(score.value - 0.8) < 0.01, round(score.noise_scale, 12)   # scale 1 / (n epsilon)
  (True, 0.0001)
  >>> score.report.epsilon, score.report.delta
  (1.0, 0.0)
"""

from __future__ import annotations

import math
from typing import Any
from typing import NamedTuple

import jax
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import discrete_grid
from dpgcd_jax import host_release
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import accountant as accountant_lib
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib

DEFAULT_LOG_LOSS_CLIP = math.log(1000.0)  # probabilities below 1e-3 count as 1e-3
DEFAULT_RESIDUAL_SHARE = 0.8  # R^2: share of epsilon on the squared residuals (see private_r2)


class Release(NamedTuple):
  """One noisy mean: `value = mean(terms) + Lap(noise_scale)`, terms in `[0, bound]`.

  Attributes:
    label: what the mean is of.
    value: the released (noisy) mean.
    noise_scale: the Laplace scale `b = sensitivity / epsilon`.
    sensitivity: `bound / n`, the replace-one sensitivity of the mean.
    epsilon: the release's epsilon.
  """

  label: str
  value: float
  noise_scale: float
  sensitivity: float
  epsilon: float


class PrivateScore(NamedTuple):
  """A privately released score.

  Attributes:
    value: the score, computed from the releases only (post-processing).
    noise_scale: the Laplace scale of the noise on the released mean (for `private_r2`, on
      the mean squared residual; `releases` has both).
    report: what the release spent (`epsilon`-DP, delta 0).
    releases: the noisy means the score is computed from.
  """

  value: float
  noise_scale: float
  report: ledger_lib.PrivacyReport
  releases: tuple[Release, ...]


def _check_epsilon(epsilon: Any) -> float:
  return accountant_lib.check_real("epsilon", epsilon, low=0.0, low_open=True)


def _length(name: str, x: Any) -> int:
  """`n` of a 1-D input (its shape: public), ValueError naming it otherwise."""
  shape = np.shape(x)
  if len(shape) != 1 or shape[0] < 1:
    raise ValueError(f"Expected {name} to be a non-empty 1-D array, got {name}.shape={shape}.")
  return shape[0]


def _same_length(a: str, x: Any, b: str, y: Any) -> int:
  n = _length(a, x)
  if np.shape(y)[:1] != (n,):
    raise ValueError(f"Expected {b} to have {n} rows as {a}, got {b}.shape={np.shape(y)}.")
  return n


def _numeric(name: str, x: Any) -> np.ndarray:
  """`x` as float64 values; ValueError naming it when its dtype is not numeric (strings too)."""
  values = np.asarray(_validate.host_values(x))
  if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
    raise ValueError(f"Expected {name} to be numeric, got {name} of dtype {values.dtype}.")
  return values.astype(np.float64)


def _equal(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
  """`a == b` elementwise as an (n,) bool array, for labels of any type (NaN equals nothing)."""
  with np.errstate(invalid="ignore"):
    equal = np.asarray(a == b)
  if equal.shape != (n,) or equal.dtype != bool:  # types numpy does not compare elementwise
    equal = np.fromiter((bool(u == v) for u, v in zip(a.tolist(), b.tolist(), strict=True)), dtype=bool, count=n)
  return equal


def _release(label: str, terms: np.ndarray, bound: float, epsilon: float, key: jax.Array, secure: bool
             ) -> tuple[Release, ledger_lib.Entry]:
  """`mean(terms) + Lap(bound / (n epsilon))` by the Laplace update mechanism (its discrete
  version on a public grid when `secure`), and its entry.

  `terms` must lie in `[0, bound]` whatever the data (the callers clip them; module docstring).
  """
  multiplier = 1.0 / epsilon  # noise in units of sensitivity
  value, scale, sensitivity = noisy_mean(key, terms, bound, multiplier, secure=secure)
  event = mechanisms.update("discrete_laplace" if secure else "laplace").event(multiplier)
  return (Release(label, value, scale, sensitivity, event.pure_epsilon),
          ledger_lib.Entry(label, event, 1))


MEAN_ERROR = 2.0**-50
"""`|fl(fsum(t) / n) - mean(t)| <= MEAN_ERROR * bound / 2` for terms in `[-bound, bound]`: fsum
is correctly rounded (one rounding, `u = 2^-53` relative), the division rounds once more: at most
`2 u (1 + u) bound`, below `2^-51 bound`."""


def noisy_mean(key: jax.Array, terms: np.ndarray, bound: float, multiplier: float, *,
               secure: bool) -> tuple[float, float, float]:
  """`(mean(terms) + noise, noise scale, sensitivity)`: the Laplace update mechanism of
  `multiplier` x the mean's sensitivity, for `n` terms in an interval of length `bound` within
  `[-bound, bound]` (`[0, bound]`, or `[-bound, 0]` for the CV regressor's negated errors) that
  each depend on one record (`n` public).

  The mean is formed in float64 (`math.fsum`, within `MEAN_ERROR bound / 2` of the exact mean),
  so neighbours' computed means differ by at most `bound / n + MEAN_ERROR bound`: the
  sensitivity used. Default: float64 Laplace noise at that sensitivity times `multiplier`,
  rounded up (`dpgcd_jax.host_release.release`). Secure: the mean snapped to the public grid
  and released with discrete Laplace noise in float64
  (`dpgcd_jax.mechanisms.DiscreteLaplaceNoise`); its scale `t gran` is returned. Rounding the
  mean to float32 first would move neighbours apart by a float32 ulp, more than the sensitivity
  at large `n` (measured by an independent review: epsilon 1.19 for 1 at n = 1e7).
  """
  n = terms.shape[0]
  if not math.isfinite(n * bound):  # public: fsum would overflow on some data and not on others
    raise ValueError(f"Expected n x bound below the largest float64 for a private mean, got n={n} and "
                     f"bound={bound!r} (a smaller public range).")
  sensitivity = bound / n + MEAN_ERROR * bound
  mean = math.fsum(np.asarray(terms, np.float64).tolist()) / n
  with jax.enable_x64(True):
    args = np.float64(multiplier), np.float64(sensitivity)
    if not secure:
      value = host_release.release(mechanisms.LaplaceNoise(), key, np.float64(mean), *args)
      return float(value), float(clipping.scale_above(*args, np.float64)), sensitivity
    value = host_release.release(mechanisms.DiscreteLaplaceNoise(), key, np.float64(mean), *args)
    return float(value), float(discrete_grid.grid_noise_scale(*args)), sensitivity


def _report(entries: list[ledger_lib.Entry], note: str) -> ledger_lib.PrivacyReport:
  """Pure Laplace releases: epsilon the sum of their epsilons (basic composition), delta 0; a
  discrete Laplace release (`secure_noise`) is one sampler draw within total variation `eta` of
  its exact law, so its delta is `(1 + e^epsilon_i) eta`
  ([`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws], charged at its own epsilon)."""
  draws = tuple(ledger_lib.Entry("sampler draws", events.DiscreteDraws(1, release_epsilon=e.event.pure_epsilon), 1)
                for e in entries if isinstance(e.event, events.DiscreteLaplace))
  ledger = ledger_lib.Ledger(tuple(entries) + draws)
  epsilon = sum(e.event.pure_epsilon for e in entries)
  return ledger_lib.PrivacyReport(ledger.entries, epsilon, ledger.sampler_charge(epsilon), "basic", (note,))


def _name(secure: bool) -> str:
  return "discrete Laplace" if secure else "Laplace"


def _secure(secure_noise: Any) -> bool:
  if not isinstance(secure_noise, (bool, np.bool_)):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  return bool(secure_noise)


def _charged(what: str, epsilon: float, accountant: Any) -> accountant_lib.Accountant | None:
  """The accountant to charge (explicit or active), after its `check`: call before reading data."""
  acct = accountant_lib.resolve(accountant)
  if acct is not None:
    acct.check(epsilon, 0.0, what)
  return acct


def private_accuracy(y_true: Any, y_pred: Any, *, epsilon: float, key: jax.Array,
                     accountant: accountant_lib.Accountant | None = None,
                     secure_noise: bool = False) -> PrivateScore:
  """`epsilon`-DP accuracy: `mean(y_true == y_pred) + Lap(1 / (n epsilon))`.

  Terms `1[y_true_i == y_pred_i]` lie in `[0, 1]`: sensitivity `1 / n` (module docstring),
  noise scale `1 / (n epsilon)`. The value is unbiased (not clipped to `[0, 1]`; clip it
  yourself, post-processing, if you want). Labels of any type compared with `==` (a NaN
  matches nothing).

  Args:
    y_true: the `n` true labels (the private data).
    y_pred: the `n` predictions, each from its own record by a public or privately released
      model (module docstring).
    epsilon: the release's epsilon (> 0).
    key: a PRNG key for the noise.
    accountant: the [`Accountant`][dpgcd_jax.privacy.Accountant] to charge; None: the
      active one (`with accountant:`), if any.
    secure_noise: draw the noise as a discrete Laplace on a public grid
      (`dpgcd_jax.mechanisms.DiscreteLaplaceNoise`: no float-sampler artefact; its noise
      scale, `noise_scale`, is slightly above `1 / (n epsilon)`). Event `DiscreteLaplace(epsilon)`.

  Returns:
    A [`PrivateScore`][dpgcd_jax.scoring.PrivateScore].
  """
  epsilon = _check_epsilon(epsilon)
  _validate.check_key("key", key)
  n = _same_length("y_true", y_true, "y_pred", y_pred)
  _length("y_pred", y_pred)
  secure = _secure(secure_noise)
  acct = _charged("private_accuracy", epsilon, accountant)
  equal = _equal(_validate.host_values(y_true), _validate.host_values(y_pred), n)
  release, entry = _release("accuracy", equal.astype(np.float64), 1.0, epsilon, key, secure)
  report = _report([entry], f"private_accuracy: {_name(secure)} mechanism on the mean of 1[y_true == y_pred], "
                            f"sensitivity 1/n (n = {n}, public)")
  if acct is not None:
    acct.spend(report, "private_accuracy")
  return PrivateScore(release.value, release.noise_scale, report, (release,))


def private_log_loss(y_true: Any, proba: Any, *, epsilon: float, key: jax.Array,
                     clip: float = DEFAULT_LOG_LOSS_CLIP, labels: Any = None,
                     accountant: accountant_lib.Accountant | None = None,
                     secure_noise: bool = False) -> PrivateScore:
  """`epsilon`-DP log loss: `mean(min(-log p_i(y_i), clip)) + Lap(clip / (n epsilon))`.

  Terms `min(-log p_i(y_i), clip)` lie in `[0, clip]` (probabilities clipped into `[0, 1]`;
  below `exp(-clip)` they count as `exp(-clip)`): sensitivity `clip / n`, noise scale
  `clip / (n epsilon)`. A label not in `labels`, or a NaN probability, counts as the worst
  term `clip` (no error: an error would depend on the data). Rows are not renormalized.
  The clipping makes the value at most the true log loss (equal when every probability of a
  true class is at least `exp(-clip)`).

  Args:
    y_true: the `n` true labels (the private data).
    proba: `(n,)` probabilities of `labels[1]` (binary), or `(n, k)` class probabilities
      in the order of `labels` (`predict_proba`), each row from its own record.
    epsilon: the release's epsilon (> 0).
    key: a PRNG key for the noise.
    clip: the largest per-example loss (> 0, public); default `log(1000)`.
    labels: the public class labels in column order (`clf.classes_`); default `(0, 1)` for
      a vector, `0, ..., k - 1` for a matrix. Never read from `y_true`.
    accountant, secure_noise: as in [`private_accuracy`][dpgcd_jax.scoring.private_accuracy].

  Returns:
    A [`PrivateScore`][dpgcd_jax.scoring.PrivateScore].
  """
  epsilon = _check_epsilon(epsilon)
  _validate.check_key("key", key)
  clip = accountant_lib.check_real("clip", clip, low=0.0, low_open=True)
  n = _same_length("y_true", y_true, "proba", proba)
  shape = np.shape(proba)
  if len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] < 2):
    raise ValueError(f"Expected proba to have shape (n,) or (n, k) with k >= 2, got proba.shape={shape}.")
  k = 2 if len(shape) == 1 else shape[1]
  labels = tuple(range(k)) if labels is None else tuple(np.asarray(labels).tolist())
  if len(labels) != k or len(set(labels)) != k:
    raise ValueError(f"Expected labels to be {k} distinct class labels (one per column of proba), "
                     f"got labels={labels!r}.")
  secure = _secure(secure_noise)
  acct = _charged("private_log_loss", epsilon, accountant)
  P = _numeric("proba", proba)
  P = np.stack([1.0 - P, P], axis=1) if P.ndim == 1 else P
  y = _validate.host_values(y_true)
  column = np.full(n, -1)
  for j, label in enumerate(labels):
    column[_equal(y, np.full(n, label, dtype=object), n)] = j
  p_true = np.where(column >= 0, P[np.arange(n), np.maximum(column, 0)], 0.0)
  with np.errstate(divide="ignore", invalid="ignore"):
    loss = np.minimum(-np.log(np.clip(p_true, 0.0, 1.0)), clip)
  loss = np.where(np.isnan(loss), clip, loss)
  release, entry = _release("log loss", loss, clip, epsilon, key, secure)
  report = _report([entry], f"private_log_loss: {_name(secure)} mechanism on the mean of min(-log p(y), {clip:.6g}), "
                            f"sensitivity clip/n (n = {n}, public)")
  if acct is not None:
    acct.spend(report, "private_log_loss")
  return PrivateScore(release.value, release.noise_scale, report, (release,))


def _target_range(target_bound: Any) -> tuple[float, float]:
  if isinstance(target_bound, (tuple, list, np.ndarray)):
    if len(target_bound) != 2:
      raise ValueError(f"Expected target_bound to be a number B > 0 (|y| <= B) or a pair (lower, upper), "
                       f"got target_bound={target_bound!r}.")
    lo = accountant_lib.check_real("target_bound[0]", target_bound[0])
    hi = accountant_lib.check_real("target_bound[1]", target_bound[1])
    if not lo < hi:
      raise ValueError(f"Expected target_bound=(lower, upper) with lower < upper, got target_bound={target_bound!r}.")
    return lo, hi
  bound = accountant_lib.check_real("target_bound", target_bound, low=0.0, low_open=True)
  return -bound, bound


def private_r2(y_true: Any, y_pred: Any, *, epsilon: float, key: jax.Array, target_bound: Any,
               residual_share: float = DEFAULT_RESIDUAL_SHARE,
               accountant: accountant_lib.Accountant | None = None,
               secure_noise: bool = False) -> PrivateScore:
  """`epsilon`-DP coefficient of determination against a PUBLIC centre of the target range.

  With the declared range `[lo, hi]` (`target_bound=B`: `[-B, B]`), centre `c = (lo + hi) / 2`
  and half-width `h = (hi - lo) / 2`, both `y` and the predictions are clipped to
  `[lo, hi]` and two means are released:

  * `R = mean((y_i - yhat_i)^2) + Lap(4 h^2 / (n epsilon_1))`: terms in `[0, (2 h)^2]`,
    sensitivity `4 h^2 / n`;
  * `D = mean((y_i - c)^2) + Lap(h^2 / (n epsilon_2))`: terms in `[0, h^2]`, sensitivity `h^2 / n`;

  `epsilon_1 = residual_share epsilon`, `epsilon_2 = epsilon - epsilon_1`: each the Laplace
  mechanism (module docstring), `epsilon`-DP together (their privacy losses add). The value is
  `1 - max(R, 0) / max(D, b_2)` (post-processing; `b_2` the public noise scale of `D`).

  The centre is public, NOT the mean of `y`: no third release. So this is R^2 against the
  constant prediction `c`. It equals scikit-learn's `r2_score` when `mean(y) = c` and is larger
  otherwise (`sum (y - c)^2 = sum (y - mean y)^2 + n (mean y - c)^2`): declare a range
  centred on the expected mean, or centre `y` with a public offset, for a comparable number.
  NaN terms count as their bound. `residual_share` 0.8 fits the residual term's 4x larger
  sensitivity (it minimizes the variance of the value near R^2 = 0.5).

  Args:
    y_true: the `n` targets (the private data).
    y_pred: the `n` predictions, each from its own record (module docstring).
    epsilon: the release's epsilon (> 0).
    key: a PRNG key for the noise (split in two).
    target_bound: `B > 0` (`|y| <= B`) or `(lower, upper)`: public.
    residual_share: the share of `epsilon` on `R`, in `(0, 1)`.
    accountant, secure_noise: as in [`private_accuracy`][dpgcd_jax.scoring.private_accuracy].

  Returns:
    A [`PrivateScore`][dpgcd_jax.scoring.PrivateScore] (`noise_scale`: the scale on `R`;
    `releases`: `R` and `D`).
  """
  epsilon = _check_epsilon(epsilon)
  _validate.check_key("key", key)
  lo, hi = _target_range(target_bound)
  share = accountant_lib.check_real("residual_share", residual_share, low=0.0, high=1.0,
                                    low_open=True, high_open=True)
  n = _same_length("y_true", y_true, "y_pred", y_pred)
  _length("y_pred", y_pred)
  secure = _secure(secure_noise)
  acct = _charged("private_r2", epsilon, accountant)
  centre, half = (lo + hi) / 2.0, (hi - lo) / 2.0
  y = np.clip(_numeric("y_true", y_true), lo, hi)
  y_hat = np.clip(_numeric("y_pred", y_pred), lo, hi)
  # Bounds by the same float operations as the terms (rounding is monotone): |fl(y - y_hat)| <=
  # fl(hi - lo) = 2 half, and |fl(y - centre)| <= max(fl(hi - centre), fl(centre - lo)), which can
  # exceed `half` when the centre rounds
  residual_bound = (2.0 * half) ** 2
  deviation_bound = max((hi - centre) ** 2, (centre - lo) ** 2)
  residual = np.nan_to_num((y - y_hat) ** 2, nan=residual_bound)
  deviation = np.nan_to_num((y - centre) ** 2, nan=deviation_bound)
  key_r, key_d = jax.random.split(key)
  eps_r = share * epsilon
  r, entry_r = _release("r2: squared residuals", residual, residual_bound, eps_r, key_r, secure)
  d, entry_d = _release("r2: squared deviations from the centre", deviation, deviation_bound, epsilon - eps_r,
                        key_d, secure)
  report = _report([entry_r, entry_d],
                   f"private_r2: {_name(secure)} mechanisms on the means of the clipped squared residuals and "
                   f"squared deviations from the public centre {centre:.6g} (range [{lo:.6g}, {hi:.6g}], "
                   f"n = {n}, public)")
  if acct is not None:
    acct.spend(report, "private_r2")
  value = 1.0 - max(r.value, 0.0) / max(d.value, d.noise_scale)
  return PrivateScore(value, r.noise_scale, report, (r, d))

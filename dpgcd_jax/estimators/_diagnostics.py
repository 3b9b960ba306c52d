"""The warnings an estimator computes after its fit, from released values only.

`diagnose` turns released values (`coef_`, `intercept_`, the bounds, `n`, `p`, `epsilon`, the
scaling used) into warnings that name a likely failure and its fix: post-processing of what
the fit released, so they spend nothing and depend on no record beyond the releases.
`noise_probability` judges a released bound, `prediction_noise` bounds the noise of a
prediction, `informative_n` is the public size below which a fit is expected to fall back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpgcd_jax.estimators._released import SCALE_SHARE
from dpgcd_jax.estimators._released import SCALE_SHARES
from dpgcd_jax.estimators._released import TARGET_SHARE
from dpgcd_jax.estimators._released import Released
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import scales_budget

FLAT_FRACTION = 0.05
NOISE_CAP = 0.5
NOISE_RELEASE = 0.5  # `noise_probability` from which a released bound is flagged
REFERENCE_BOUND = 1.0  # `noise_probability`'s least reference value
# The planning rule of docs/high_dim.md: the defaults learned where `n eps r* / ln p` was above a
# band of 25-39 and stayed near the majority class below it. With `r* <= 1` (an effect in units
# of its bound), `n eps < 25 ln p` is below the band for every feature the data could hold. The
# rule was measured with p in the thousands, where the search among p dominates; at p = 13
# (wine, eps = 0.3) fits below it learned, so it warns from FEASIBILITY_MIN_FEATURES on.
FEASIBILITY_FLOOR = 25.0
FEASIBILITY_MIN_FEATURES = 1000


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
    `>= NOISE_RELEASE` (`noise_probability`): features (or targets) above it were clipped;
  - a budget below the planning rule for every feature the data could hold, `n epsilon <
    FEASIBILITY_FLOOR ln p` with `p >= FEASIBILITY_MIN_FEATURES` (public `n`, `epsilon`, `p`
    only; docs/high_dim.md): the model is likely no better than `w = 0`, whatever it released.

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
  p = coef.shape[1]
  if p >= FEASIBILITY_MIN_FEATURES and n * epsilon < FEASIBILITY_FLOOR * math.log(p):
    messages.append(
        f"n * epsilon = {n * epsilon:.4g} is below {FEASIBILITY_FLOOR:g} ln p = {FEASIBILITY_FLOOR * math.log(p):.4g} "
        f"(p = {p} features): in the planning rule measured for DP-GCD (docs/high_dim.md), private "
        f"learning pays from n epsilon r* / ln p of about 25-39 (r*: the strongest feature's effect in "
        f"units of its bound, at most 1), so even the strongest possible feature stays within the noise "
        f"of a search among p, and the model is likely no better than w = 0 (a loss at or above it, R^2 at "
        f"or below 0). Fix: {more}; fewer features (a public pre-selection).")
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
  return scales_budget.min_informative_n(p, SCALE_SHARES[-1] * epsilon)

"""The estimators' public defaults: the "auto" rules and the constants they were measured with.

Every rule reads public quantities only (`n`, `p`, `epsilon`, the declared bounds and the
solver's public settings); what the rules do not know from public quantities (the clip under
declared bounds, a target bound, the feature bounds) is released privately in the fit's ledger
([`dpgcd_jax.estimators._released`][], [`dpgcd_jax.privacy.typical_size`][]).
"""

from __future__ import annotations

import math
from typing import Any
from typing import NamedTuple

import numpy as np

from dpgcd_jax import losses as losses_lib
from dpgcd_jax.estimators import _released
from dpgcd_jax.problem import BOUND_RANGE

AUTO = _released.AUTO
AUTO_CLIP = 0.1
# The classifier's clip when DP-GCD steps by the released curvature (measured: `released_step_size`).
AUTO_CLIP_RELEASED = 0.25
AUTO_CLIP_REGRESSION = 0.15  # in units of the target bound T (measured: module of DPGCDRegressor)
# The regressor's clip under a declared target bound T: at most TARGET_CLIP_RATIO times the typical
# |y - c| / T released at TYPICAL_SIZE_SHARE (measured: `target_clip`).
TARGET_CLIP_RATIO = 1.0
AUTO_MARGIN_STEP = 0.5
AUTO_STEPS_UNIT = 40.0
AUTO_STEPS_UNIT_REGRESSION = 25.0  # a real target carries more signal per record than a label
AUTO_STEPS_MIN, AUTO_STEPS_MAX = 5, 100
AUTO_SPARSITY = 10
# DP-GCD's default: each step releases the second moment of the selected feature and steps by
# 1 / hat M_j (dpgcd_jax.curvature), instead of 1 / (beta B_j^2) from the public bound alone.
AUTO_CURVATURE = "released"
# DP-GCD's default share of each step's budget spent on the selection (the rest on the update
# and the released curvature): finding the few features that matter is the hard part in high
# dimension. Measured (`dpgcd_jax.experiments.high_dim`, p = 5000, eps = 1, 2 seeds, with
# AUTO_STEPS_UNIT = 40), share 0.5 (the solver's default) -> 0.7: dense standardized n = 4000
# 0.775 -> 0.782, raw dense 0.672 -> 0.679; with the unit 80 -> 40 as well, binary n = 8000
# 0.708 -> 0.731, dense standardized n = 2000 0.534 -> 0.698 (both changes and the bound's
# statistic), text n = 32000 0.655 -> 0.653, binary n = 32000 0.758 -> 0.758.
# Neutral for the regressor (test R^2 over 3 keys, share 0.5 -> 0.7): 5 raw features, n = 4200,
# eps = 2: 0.973 -> 0.972; 2000 features, 10 informative, eps = 1: 0.959 -> 0.958; diabetes,
# eps = 5: 0.270 -> 0.274.
AUTO_SELECTION_SHARE = 0.7
# DP-FW's default l1 radius, in units of the feature bounds (and of the target bound T): every
# score is then within +-5. Measured (1000 x 20 standardized make_classification /
# make_regression, 5 informative, B = 3, 3 seeds, 300 held-out rows): radius 5 / 10 / 20 gave
# accuracy 0.89 / 0.87 / 0.84 and R^2 0.37 / 0.18 / -0.36 at epsilon = 1; at epsilon = 5,
# accuracy 0.89 / 0.89 / 0.89 and R^2 0.74 / 0.84 / 0.86.
AUTO_RADIUS = 5.0
CLASS_COUNT_SHARE = 0.05  # of epsilon, for the class counts of class_weight="balanced"
# The classifier's clip with declared bounds: at least AUTO_MARGIN_STEP times the typical feature
# size released at this share of epsilon and delta (dpgcd_jax.privacy.typical_size; measured:
# DPGCDClassifier's docstring).
TYPICAL_SIZE_SHARE = 0.05
# A declared feature bound far above the data: the classifier clips the features at SIZE_TO_BOUND
# times their released typical size where that is below the bound (`bound_scale`).
SIZE_TO_BOUND = 4.0
# The intercept's clip when DP-GCD steps by the released curvature: its terms are `phi'` itself,
# about AUTO_MARGIN_STEP at `w = 0` (measured: `intercept_bound`).
AUTO_INTERCEPT_CLIP = 0.5


def bound_scale(size: float) -> float:
  """The factor `min(1, SIZE_TO_BOUND * size)` on declared feature bounds at the released typical
  size `size` (in their units; public: a function of the release).

  A loose bound costs twice: the clip (in its units) must follow the features down, so the
  sensitivity of every score and step shrinks with it, and the intercept's terms, which keep
  their size `phi'`, lose their steps below the clip floor `AUTO_CLIP_RELEASED`
  (`DPGCDBase._follow_data`). Clipping the features at a few times their typical size instead
  puts them back where the floor was measured. The factor 4 keeps the tails of Gaussian
  features (about 3 sigma): a rare class decided in a tail loses nothing; 2 was better where every
  entry has about the same size, and learned nothing on the tails. Measured (DPGCDClassifier
  defaults, eps = 1; accuracy without the shrink -> with it; in brackets the factor 2, sizes
  computed exactly, NOT private):
  - standardized Gaussian features under `feature_bound=10` (`dpgcd_jax.experiments.high_dim`'s
    dense set, p = 5000, n = 4000, 3 seeds): 0.56 -> 0.77 (0.79; its released scales: 0.78);
  - that module's binary words, rows scaled to unit l2 norm (TfidfVectorizer's default) under
    `feature_bound=1`, entries about 0.08, n = 8000, 3 seeds: 0.52 -> 0.57 (0.72; the words
    unscaled: 0.72; the released grid point 0.074 sits above the median 0.064);
  - balanced accuracy, 90/10 labels decided by a Gaussian feature's tail (`x_0 > 1.28`), 2800 rows,
    4 seeds: 1 feature under bound 3 0.60 -> 0.69, under bound 10 0.54 -> 0.70 (0.50: nothing
    learned); 20 features under bound 3 (not shrunk) 0.69, under bound 10 0.60 -> 0.68 (0.50).
  """
  return min(1.0, SIZE_TO_BOUND * size)


def shrunk_bounds(declared: Any, scale: float) -> np.ndarray:
  """The declared bounds times `scale` ([`bound_scale`][dpgcd_jax.estimators._defaults.bound_scale]), each at
  least the smallest bound a problem takes (`problem.BOUND_RANGE`, where `B^2` is a normal
  float32): public, a function of the declaration and the release only."""
  return np.maximum(np.asarray(declared, np.float64) * scale, BOUND_RANGE[0])


class Hyper(NamedTuple):
  """Resolved hyperparameters of one DP-GCD run."""

  max_iter: int
  step_size: float
  clip: float


def auto_max_iter(n: int, p: int, epsilon: float) -> int:
  """Default `T` of the solvers other than DP-GCD: `round(n epsilon / sqrt(p))` in [10, 1000]
  (public: `n`, `p`, `epsilon`)."""
  return int(min(1000, max(10, round(n * epsilon / math.sqrt(p)))))


def auto_greedy_steps(n: int, epsilon: float, unit: float = AUTO_STEPS_UNIT) -> int:
  """Default `T` of DP-GCD: `round(sqrt(n epsilon / unit))` in [AUTO_STEPS_MIN, AUTO_STEPS_MAX]
  (public: `n`, `epsilon`; `unit`: `AUTO_STEPS_UNIT` for a classifier,
  `AUTO_STEPS_UNIT_REGRESSION` for a regressor).

  Greedy steps past the coordinates that matter only add noise, and each step's share of the
  budget shrinks as `1 / sqrt(T)`: `T` grows with the signal the budget can resolve, not with
  `p`. Measured (`benchmarks/bench_high_dim.py`, sparse binary, text-like and dense sets,
  `p` = 5000 and 20000, `n` from 2000 to 128000, eps = 1, curvature released): the best
  `T` of {5, 10, 20, 40, 80} was about 10 at `n eps = 8000` and 20 at 32000; the older
  rule `n eps / sqrt(p)` gave 113 and 453 there, and a model near `w = 0`. With the
  selection's share `AUTO_SELECTION_SHARE` and the bound on each record's typical magnitude
  ([`dpgcd_jax.privacy.bounds`][]), the unit 40 (T = 10 at n eps = 4000) beat 80 (T = 7) on
  dense standardized features at n = 4000: 0.782 against 0.752 (`dpgcd_jax.experiments.high_dim`,
  2 seeds). A regressor's
  real target resolves more steps: on a raw 5-feature regression (n = 5000, eps = 2, test
  R^2 over 3 keys) T = 11 gave 0.79-0.81 and T = 20 0.96-0.97 (`unit` 25: T = 20).
  """
  return int(min(AUTO_STEPS_MAX, max(AUTO_STEPS_MIN, round(math.sqrt(n * epsilon / unit)))))


def auto_step_size(clip: float, curvature: float) -> float:
  """Default `gamma = max(1, AUTO_MARGIN_STEP beta / clip)` with steps from the public bounds
  (see the class docstring)."""
  return max(1.0, AUTO_MARGIN_STEP * curvature / clip)


def released_step_size(clip: float) -> float:
  """Default `gamma = min(2, max(1, AUTO_MARGIN_STEP / clip))` when DP-GCD steps by the released
  curvature `1 / hat M_j` (the theory step).

  At `w = 0` the derivatives are about `AUTO_MARGIN_STEP` in size (`|phi'(0)| = 1/2` for the
  logistic loss; a target in units of its bound), so a clip `c` below it shrinks every
  gradient, hence every step, by `c / AUTO_MARGIN_STEP`: `gamma` undoes that shrink, up to 2,
  the stability limit of a step `gamma / M_j` on a coordinate of curvature `M_j` (the released
  `hat M_j` is an upper confidence bound, [`dpgcd_jax.curvature`][]). Measured
  (`benchmarks/bench_high_dim.py` cells, accuracy over 2 keys, eps = 1): clip 0.25 with
  `gamma = 2` gave text-like n = 32000 0.59 / 0.64, binary 8000 0.75 / 0.66, binary 32000
  0.77 / 0.74, dense standardized 4000 0.72 / 0.75; clip 0.1 (`gamma` 1.25 or 2: with every
  derivative clipped the model only scales) gave 0.51 / 0.52 (the majority class), 0.72 /
  0.67, 0.62 / 0.58 and 0.71 / 0.74; clip 0.25 with `gamma = 1` 0.51 / 0.52 on text; clip
  0.5 (`gamma = 1`) 0.65 / 0.66, 0.73 / 0.69, 0.77 / 0.75 and 0.57 / 0.59 (dense). Binary
  features do best at clip 0.5: their terms `phi' x_ij` are 0 or `phi' B_j`, so a lower clip
  turns the gradient into a count of signs that does not shrink as the model fits (the docs
  example: 0.68 at clip 0.22, 0.77 at 0.5, 4 keys); dense features, whose terms are mostly
  far below `B_j`, at 0.1-0.25 (less noise, little signal lost). 0.25 keeps every cell
  above the majority class; the classifier raises it to 0.5 for binary features from their
  released typical size (`DPGCDBase._follow_data`).
  """
  return min(2.0, max(1.0, AUTO_MARGIN_STEP / clip))


def target_clip(size: float) -> float:
  """The regressor's "auto" clip under a declared target bound `T`:
  `min(AUTO_CLIP_REGRESSION, TARGET_CLIP_RATIO s)`, `s` the typical `|y - c| / T` released
  privately ([`dpgcd_jax.privacy.typical_size`][], `TARGET_LABEL`).

  The residual at `w = 0` is the target itself, so a declared `T` far above the data puts
  every term far below the fixed clip `0.15 T`: the noise, scaled to the clip, drowns them and
  the noisy steps overshoot. The rule only moves the clip when `s < 0.15` (for Gaussian
  targets, `T` above about 4.5 sd). Measured (the full preset's least-squares sets, n = 1000,
  the estimator's defaults end to end, `T = 3 sd(y)` from the generator's documentation,
  relative error, median of 20 seeds): `log2_ls`, whose heavy tails make the realized `sd(y)`
  81 against the documented 546 (`T` = 20 realized sd), 0.90 at the fixed clip (1.49, worse
  than `w = 0`, over the experiments' seeds 0-4), 0.29 at ratio 1 (5 seeds: 0.22 at ratio
  0.5, where the other sets lost more). `python benchmarks/bench_target_clip.py`.
  The release's share of the budget is the price where `T` is already tight: `square` (`T` =
  2.9 sd) 0.69 -> 0.74, `log1_ls` (`T` = 4.3 sd) 0.69 -> 0.71; spending the share but keeping
  the fixed clip gave 0.75 / 0.71, and ratio 0.5 0.79 / 0.75 (the noisy release at
  `n epsilon` = 1000 then lowers the clip of tight bounds too). On sets not tuned on
  (scikit-learn's `make_regression`, 50 features, 5 informative, noise 10, features / 3 under
  the bound 1.5, epsilon = 1, median test R^2 of 6 seeds, `T` a multiple of sd(y)): n = 2000,
  `T` = 3 sd 0.976 against 0.975 at the fixed clip, 10 sd 0.952 against 0.853; n = 5000 0.984
  / 0.985 and 0.966 / 0.909; with Student-t(2) noise added 0.765 / 0.767 and 0.759 / 0.679.
  Below `n` = 1000 at epsilon = 1 the release is not informative and nothing is spent
  (`typical_size.informative`)."""
  return min(AUTO_CLIP_REGRESSION, TARGET_CLIP_RATIO * size)


def intercept_bound(clip: float) -> float:
  """The intercept's public bound `K = max(1, AUTO_INTERCEPT_CLIP / clip)` when DP-GCD steps by
  the released curvature: the intercept is clipped apart from the features.

  A constant feature of value 1 declared with the bound `K >= 1` (public: a function of the
  clip) has its terms `phi'` clipped at `clip K = AUTO_INTERCEPT_CLIP` while every feature's
  stay clipped at `clip B_j`, and its score is normalized by `sqrt(M_0) = K sqrt(beta)`, so
  that every normalized score keeps the sensitivity `2 clip / (n sqrt(beta))`: the selection's
  noise is unchanged, the intercept's update noise grows `K`-fold, and its step is
  `gamma / hat M_0` with `hat M_0` about `beta` (released: the true second moment is 1). A
  clip far below `|phi'(0)|` no longer shrinks the intercept's steps, so the features' clip
  can follow the data down (`DPGCDBase._follow_data`). With the steps by the public
  curvature (`M_0 = beta K^2`: a step `K^2` too short), `K = 1`.
  """
  return max(1.0, AUTO_INTERCEPT_CLIP / clip)


def known_curvature(loss: losses_lib.Loss) -> float:
  """`beta` of a loss whose curvature bound is known (the estimators' losses)."""
  if loss.curvature is None:
    raise ValueError(f"Expected a loss with a known curvature bound, got loss {loss.name!r}.")
  return loss.curvature

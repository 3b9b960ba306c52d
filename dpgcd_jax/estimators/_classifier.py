"""DPGCDClassifier: a private logistic-regression classifier (one run per class for more than two).

The private path is the base's (`dpgcd_jax.estimators._linear.DPGCDBase`); this module holds what is
a classifier's: the public label set (`classes=`), class weights, the targets (+1/-1 per run),
probabilities.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any
from typing import cast

import jax
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets

from dpgcd_jax import _validate
from dpgcd_jax import host_release
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import mechanisms
from dpgcd_jax.estimators import _streamed
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._defaults import CLASS_COUNT_SHARE
from dpgcd_jax.estimators._defaults import known_curvature
from dpgcd_jax.estimators._inputs import Targets
from dpgcd_jax.estimators._linear import DPGCDBase
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import ledger as ledger_lib

CLASS_COUNT_STREAM = 1 << 29  # fold_in data of their key (from random_state)


def check_classes(classes: Any) -> np.ndarray:
  """The declared public label set as a sorted 1-D array of >= 2 distinct labels."""
  values = np.asarray(classes)
  if values.ndim != 1 or values.size < 2 or np.unique(values).size != values.size:
    raise ValueError(f"Expected classes to be a 1-D list of at least 2 distinct labels, got "
                     f"classes={classes!r}.")
  return np.sort(values)


def positive_classes(classes: np.ndarray) -> np.ndarray:
  """The positive class of each run: `classes[1]` for two classes (one run), every class for
  more (one-vs-rest, one run per class)."""
  return classes[1:] if classes.size == 2 else classes


class DPGCDClassifier(ClassifierMixin, DPGCDBase):
  """Differentially private logistic regression by greedy coordinate descent (DP-GCD).

  Labels: any two labels (encoded as -1 / +1, `classes_[1]` positive); more classes are
  fitted one-vs-rest, one private run per class, the budget split by composing all the runs
  in one ledger. Each run (Mangold et al. 2023), from `w = 0` with `M_j = B_j^2 / 4`:

  $$
  g_j = \\frac1n \\sum_i \\mathrm{clip}(\\phi'(\\langle x_i, w\\rangle, y_i) x_{ij},
  \\pm C_j), \\quad j_t = \\arg\\max_j \\frac{|g_j|}{\\sqrt{M_j}} + b \\bar\\Delta G_j,
  \\quad w_{j_t} \\leftarrow \\mathrm{prox}\\big(w_{j_t} - \\tfrac{\\gamma}{M_{j_t}}
  (g_{j_t} + s \\Delta_{j_t} \\xi)\\big)
  $$

  with `G_j ~ Gumbel`, `xi ~ N(0, 1)`, `Delta_j = 2 C_j / n`. Privacy: see
  `dpgcd_jax.estimators._linear`; the whole fit is `(epsilon, delta)`-DP.

  Defaults that learn (computed from public quantities only: `n`, `p`, `epsilon`, `B`).
  With a bound `B`, `M_j = beta B^2` is a worst case: for a binary word of frequency `q` the
  true curvature `beta mean_i x_ij^2` is `q` times that, so the step `1 / M_j` is `1 / q` too
  short. DP-GCD therefore releases the selected feature's curvature at each step
  (`solver_params={"curvature": "released"}`, the default; [`dpgcd_jax.curvature`][]) and steps
  by `gamma / hat M_j`, spending 0.7 of each step's budget on the selection
  (`AUTO_SELECTION_SHARE`). "auto" then takes `T = sqrt(n epsilon / 40)` greedy steps in [5, 100]
  ([`auto_greedy_steps`][dpgcd_jax.estimators._defaults.auto_greedy_steps]: steps past the
  features that matter add noise, so `T` follows the budget, not `p`) and
  `step_size = min(2, 0.5 / clip)` ([`released_step_size`][dpgcd_jax.estimators._defaults.released_step_size]).
  The clip follows the data: with declared bounds it is `max(0.25, 0.5 s)`, `s` the median
  over records of the mean size of a record's nonzero features in units of their bounds,
  released privately
  ([`dpgcd_jax.privacy.typical_size`][], `TYPICAL_SIZE_SHARE` = 5% of epsilon and delta): 0.5
  for binary features (every term is `phi' B_j`, and a lower clip turns the gradient into a
  count of signs), 0.25 for features spread below their bounds (the floor keeps the
  intercept's steps: `_follow_data`). Measured (`benchmarks/bench_high_dim.py` sets, eps = 1,
  2 keys; fixed clip 0.25 -> 0.5): text-like n = 32000 0.62 -> 0.66, binary n = 8000 0.70 -> 0.71.
  Below `s = 1/4` the declared bounds are shrunk to `4 s B_j` (the features clipped there:
  [`bound_scale`][dpgcd_jax.estimators._defaults.bound_scale]; standardized features under
  `feature_bound=10`: 0.56 -> 0.77).
  With released bounds the clip is 0.25 (dense and sparse X alike).
  With `curvature="public"` and for the other solvers: clip 0.1 and
  `step_size = max(1, 0.5 beta / clip)` (a margin move of at most about 0.5 per step), and
  `T = n epsilon / sqrt(p)` in [10, 1000] (DP-CD: that many coordinate updates).
  Measured: `benchmarks/results/high_dim_quick.md` and the docs page "High dimension".

  Args:
    penalty: "l1", "l2", "elasticnet" or None; the intercept is never penalized.
    alpha: penalty strength (`alpha ||w||_1`, `alpha / 2 ||w||^2` or scikit-learn's
      elastic net), >= 0, on `coef_` in raw units: a regressor, fitted on `y / T`, rescales
      it (`penalties.in_target_units`), so that `alpha` is scikit-learn's `Lasso` alpha.
    l1_ratio: elastic-net mixing in [0, 1].
    epsilon: total privacy budget, > 0.
    delta: total delta in (0, 1); None (default) uses `1 / n^2` for `n` training rows.
    fit_intercept: learn an intercept, as a coordinate of the same private run.
    classes: the PUBLIC label set (a list of at least 2 labels). A label of `y` outside it is
      a ValueError; a declared class absent from `y` is fine (its run sees only negatives).
      None (default) reads the classes from `y` without noise: a `PrivacyLeakWarning`,
      and `privacy_.not_private` records it.
    class_weight: a PUBLIC dict `{class: weight > 0}` over the declared `classes` (missing
      classes weigh 1), or None. Each example's logistic loss is multiplied by its class's
      weight divided by the largest weight (`losses.weighted_logistic`), before the per-example
      derivatives are clipped: the sensitivity, and so the privacy, is the unweighted fit's.
      Measured (90/10 labels, 4000 rows, epsilon = 1, 3 seeds): `{0: 1, 1: 8}` raised the
      balanced accuracy from 0.50-0.58 to 0.78-0.79. "balanced" (declared classes only):
      weights `n / (K c_k)` from class counts released privately in the fit's ledger
      (`CLASS_COUNT_SHARE` of epsilon, Laplace, discrete with `secure_noise`; the noisy counts
      are `class_counts_`): 0.78 against 0.50-0.58 on the same data.
    feature_bound: PUBLIC bound `B > 0` on `|x_ij|` (a scalar, or a list / array of p):
      features are clipped to `[-B, B]` at fit and predict time. Or a PUBLIC range, a Python
      tuple `(lower, upper)` (each end a scalar or of p), as diffprivlib's `bounds`: features
      are clipped to `[lower, upper]` and the model is fitted on `x - (lower + upper) / 2`
      with the bound `(upper - lower) / 2` (the same sensitivity; needs `fit_intercept=True`,
      and dense X unless the range is centred on 0). A tuple is always a range. None
      (default) releases symmetric bounds privately (`scaling`), accounted in `privacy_`.
    categories: PUBLIC categorical columns, `{column: [category, ...]}` (a DataFrame's column
      name or a position), one-hot encoded inside (one 0/1 column per declared category; a
      value outside them encodes as zeros) with the public bound 1; `coef_` and
      `get_feature_names_out()` follow the encoded columns. None (default): all numeric.
      See `dpgcd_jax.estimators._categorical`.
    scaling: how bounds are released when `feature_bound` is None: "private" (per-feature
      private scales, [`dpgcd_jax.privacy.scales`][]), "bound" (one private bound for every
      feature), "per-step" (DP-GCD selects on `sign(x_ij)` and releases the bound of each
      feature it selects, at that step: [`dpgcd_jax.solvers.scale_free`][]; dense X, two classes,
      no penalty) or "auto" (default): "private" when `n` is large enough for the per-feature
      scales to be informative at this epsilon (a rule on public `n`, `p`, `epsilon`:
      [`dpgcd_jax.privacy.scales_budget.scales_informative`][], e.g. about 14,000 rows at p = 30
      for a scale budget of 0.1); else, on dense X from 1000 rows and `n epsilon >= 1000`,
      "per-step" when the records vote privately that their scales spread
      ([`dpgcd_jax.privacy.scale_spread`][], 3% of epsilon) and "bound" otherwise, with a
      warning when the released model suggests it failed. Either way the features are used in
      units of their bound: DP-GCD is equivariant to per-coordinate scaling, so this is a fit
      on `x_ij / B_j`.
    clipping: "coordinate" (default: the paper's per-coordinate clipping of `phi' x_ij` at
      `clip B_j`) or "derivative" (the scalar `phi'` clipped at `clip`: the same
      sensitivity `2 clip B_j / n`; measured less accurate here, see DPGCDRegressor; about
      6x faster per step on dense features, an int8 matrix product over their 13-bit grid,
      `dpgcd_jax.kernels.derivative_total`).
    secure_noise: floating-point-safe noise (`dpgcd_jax.discrete_noise`): report-noisy-max
      with discrete Laplace noise and discrete Gaussian updates (and curvature releases) on a
      public grid, accounted as such. Several times slower per step. The released bounds and
      scales are exact integer mechanisms in every mode. Not covered: the CV estimators'
      validation scores (float Laplace), and float rounding before the snap (module docstring
      of `dpgcd_jax.discrete_noise`).
    max_iter: DP-GCD steps `T`, or "auto" (see above).
    step_size: `gamma` in units of `1 / M_j`, or "auto" (see above).
    clip: bound on `|phi'|` (per-example gradient `phi' x_ij` clipped at `clip B_j`), or
      "auto" (see above).
    solver: the private solver of the runs: "dp_gcd" (default), "dp_fw" (DP Frank-Wolfe on the
      l1 ball, [`dpgcd_jax.solvers.dp_fw`][]; penalty None or "l2", step_size "auto"),
      "dp_iht" (private iterative hard thresholding, [`dpgcd_jax.solvers.dp_iht`][]),
      "two_stage" (peeling of a support, then DP-GCD on it, [`dpgcd_jax.solvers.two_stage`][])
      or "dp_cd" (randomized coordinate descent, [`dpgcd_jax.solvers.dp_cd`][]; `max_iter`
      counts passes of `p` updates, "auto" about DP-GCD's number of updates). The bounds'
      releases, the one ledger and the units of `coef_` are the same for every solver;
      `secure_noise` exists for every solver (each adapter declares it); the CV estimators search
      "dp_gcd" only. A bad combination is a ValueError naming the argument, before any work.
    solver_params: None or a dict of the solver's own hyperparameters (public): "dp_fw":
      `radius` (the l1 radius in units of the feature bounds, and of `T` for a regressor;
      default `AUTO_RADIUS` = 5); "dp_iht": `sparsity` (coordinates kept, the
      intercept counting as one; default `min(10, p + 1)`) and `selection_share`;
      "two_stage": `sparsity` and `support_share`; "dp_gcd": `curvature` ("released", the
      default, or "public") and `selection_share` (the selection's share of each step's budget,
      default `AUTO_SELECTION_SHARE` = 0.7); "dp_cd": none. With
      "dp_iht", `step_size="auto"` is DP-GCD's divided by `sparsity`.
    random_state: None (default: a fresh key from the operating system's entropy), an int
      (reproducibility only: the same int replays the same noise), a NumPy `RandomState` /
      `Generator`, or a JAX key.
    accountant: a [`dpgcd_jax.Accountant`][dpgcd_jax.privacy.accountant.Accountant] holding the
      budget of the data set across fits and scores, or None (default: the one active in a
      `with accountant:` block, if any). `fit` is refused before any private computation when
      `(epsilon, delta)` would exceed what remains; its `privacy_` is charged to it.
    verbose: 0 (default) or more: a progress bar (tqdm, on stderr) over the passes of the
      private runs (the CV estimators: of every repetition of their search). It reports pass
      counts only, and the fit is the same with or without it (`dpgcd_jax.progress`).

  Attributes:
    coef_, intercept_: the private model.
    solver_params_: the solver's hyperparameters as run (`solver_params` and the defaults).
    feature_bound_: (p,) the public bounds used (declared, declared and shrunk to the released
      typical size, or privately released): the half-widths of the ranges inputs are clipped to,
      `feature_centre_ +- feature_bound_`.
    feature_centre_: (p,) the centres of those ranges (0 unless `feature_bound=(lower, upper)`).
    scaling_: how they were obtained: "declared", "private", "bound" or "per-step" (the
      released bound of each selected feature; the cap `2^16` for the others, whose `coef_` is 0).
    n_iter_, step_size_, clip_: the resolved hyperparameters.
    privacy_: the [`dpgcd_jax.privacy.PrivacyReport`][] of the fit (total epsilon, delta).
    n_features_in_, feature_names_in_: as in scikit-learn.

  Examples:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 5)) * [1.0, 100.0, 1.0, 1.0, 1.0]   # known public ranges
    >>> y = np.where(X[:, 0] - X[:, 1] / 100 > 0, "spam", "ham")
    >>> model = DPGCDClassifier(classes=["ham", "spam"], epsilon=1.0,
    ...                         feature_bound=[3.0, 300.0, 3.0, 3.0, 3.0], random_state=0)
    >>> model.fit(X, y).score(X, y) > 0.8
    True
    >>> round(model.privacy_.epsilon, 3), model.privacy_.end_to_end
    (1.0, True)
  """

  _curvature = known_curvature(losses_lib.logistic)
  _clip_follows_data = True

  def __init__(self, *, classes=None, class_weight=None, penalty=None, alpha=1e-4, l1_ratio=0.5, epsilon=1.0,
               delta=None, fit_intercept=True, feature_bound=None, categories=None, scaling=AUTO,
               clipping="coordinate", secure_noise=False, max_iter=AUTO, step_size=AUTO, clip=AUTO,
               solver="dp_gcd", solver_params=None, random_state=None, accountant=None, verbose=0):
    super().__init__(penalty=penalty, alpha=alpha, l1_ratio=l1_ratio, epsilon=epsilon, delta=delta,
                     fit_intercept=fit_intercept, feature_bound=feature_bound, categories=categories, scaling=scaling,
                     clipping=clipping, secure_noise=secure_noise, max_iter=max_iter,
                     step_size=step_size, clip=clip, solver=solver, solver_params=solver_params,
                     random_state=random_state, accountant=accountant, verbose=verbose)
    self.classes = classes
    self.class_weight = class_weight

  def _check_params(self) -> None:
    super()._check_params()
    if self.classes is not None:
      check_classes(self.classes)
    self._class_weights()

  def _class_weights(self, classes: np.ndarray | None = None) -> np.ndarray | None:
    """The class weights in the order of `classes` (default the declared ones), divided by
    their maximum (so every example's weight is in (0, 1]), or None. With declared classes
    everything is checked before any data is read (a PUBLIC dict over a public label set);
    with `classes=None` (the label set read from `y`, not private) a key absent from `y` is
    ignored rather than raising on the data."""
    if self.class_weight is None:
      return None
    if isinstance(self.class_weight, str) and self.class_weight == "balanced":
      if self.classes is None:
        raise ValueError("Expected declared classes= with class_weight='balanced' (its class counts are released "
                         "privately over a public label set), got classes=None.")
      return None  # released from the data in _targets
    if not isinstance(self.class_weight, Mapping):
      raise ValueError(f"Expected class_weight to be None, 'balanced' or a dict {{class: weight > 0}} over the "
                       f"classes, got class_weight={self.class_weight!r}.")
    for c, w in self.class_weight.items():
      _validate.check_number(f"class_weight[{c!r}]", w, low=0.0, low_open=True)
    if classes is None and self.classes is not None:
      classes = check_classes(self.classes)
      unknown = [c for c in self.class_weight if c not in classes.tolist()]
      if unknown:
        raise ValueError(f"Expected the keys of class_weight in classes={classes.tolist()}, "
                         f"got class_weight={self.class_weight!r}.")
    if classes is None:
      return None  # checked; weighed once the classes are read from y
    weights = np.asarray([self.class_weight.get(c, 1.0) for c in classes.tolist()], float)
    return weights / weights.max()

  fit_chunks = _streamed.fit_chunks

  def _chunk_targets(self, name: str) -> _streamed.ChunkTargets:
    """The chunks' targets over the declared classes (`fit_chunks`): one run for two classes,
    one per class for more (one-vs-rest), encoded as `_targets` encodes them; sets `classes_`.
    `class_weight="balanced"`: the weights come from the class counts, released from one pass
    over the labels (`ChunkTargets.weigh`)."""
    self.classes_ = _streamed.declared_classes(self, name)
    positives = positive_classes(self.classes_)
    runs = positives.size
    encode = lambda weights: _streamed.labels(self.classes_, weights, positives)
    if isinstance(self.class_weight, str):  # "balanced" (checked): weighed once the class counts are read

      def weigh(counts: np.ndarray, key: jax.Array) -> _streamed.ChunkTargets:
        weights, prior, notes = self._balanced_weights(counts, key)
        return _streamed.ChunkTargets(encode(weights), runs=runs, prior=prior, notes=notes)

      return _streamed.ChunkTargets(encode(np.ones(self.classes_.size)), runs=runs, weigh=weigh)
    weights = self._class_weights(self.classes_)
    return _streamed.ChunkTargets(encode(np.ones(self.classes_.size) if weights is None else weights), runs=runs)

  def _loss(self) -> losses_lib.Loss:
    return losses_lib.logistic if self.class_weight is None else losses_lib.weighted_logistic

  def _targets(self, y: np.ndarray, key: jax.Array) -> Targets:
    if self.classes is None:
      check_classification_targets(y)
      warnings.warn(
          f"{type(self).__name__}: classes=None, so the label set is read from y without noise "
          f"(a record that is the only member of its class changes classes_ and coef_.shape): "
          f"declare the public label set, e.g. classes={np.unique(y)[:3].tolist()}..., for a fit "
          f"that is private end to end.", _validate.PrivacyLeakWarning, stacklevel=4)
      self.classes_ = np.unique(y)
      not_private: tuple[str, ...] = ("label set: classes_ read from y without noise (classes=None)",)
      if self.classes_.size < 2:
        raise ValueError(f"Expected y to have at least 2 classes, got 1 class: {self.classes_[0]!r}.")
    else:
      self.classes_ = check_classes(self.classes)
      unknown = ~np.isin(y, self.classes_)
      if np.any(unknown):
        raise ValueError(f"Expected every label of y in the declared classes={self.classes_.tolist()}, "
                         f"got y containing {np.unique(y[unknown])[:5].tolist()}.")
      not_private = ()
    positives = positive_classes(self.classes_)
    weights = self._class_weights(self.classes_)
    prior, notes = ledger_lib.Ledger(), cast(tuple[str, ...], ())
    if isinstance(self.class_weight, str):  # "balanced" (checked)
      counts = np.array([np.sum(y == c) for c in self.classes_], np.int64)  # exact integers
      weights, prior, notes = self._balanced_weights(counts, key)
    # Weighted: the target +-w_i carries the label (its sign) and the example's class weight
    # (losses.weighted_logistic); every derivative is clipped after the weighting, so the
    # sensitivity is the unweighted one.
    weight = 1.0 if weights is None else weights[np.searchsorted(self.classes_, y)]
    return Targets([np.where(y == c, weight, -weight) for c in positives], not_private, prior, notes)

  def _balanced_weights(self, counts: np.ndarray, key: jax.Array
                        ) -> tuple[np.ndarray, ledger_lib.Ledger, tuple[str, ...]]:
    """`n / (K max(c_k, 1))` from the exact class `counts` (of the declared classes, `n` records
    in all) released by the Laplace update mechanism (discrete with `secure_noise`) with the key
    `fold_in(key, CLASS_COUNT_STREAM)`, divided by the largest, with the release's ledger and
    `privacy_` note. `fit` counts `y`; `fit_chunks` counts the chunks' labels in one pass.

    Privacy: replacing one record moves two counts by 1 each (the others are unchanged), so the
    counts with noise of multiplier `2 / eps_w` per count are two `Laplace(eps_w / 2)` releases:
    `eps_w`-DP, `eps_w = CLASS_COUNT_SHARE * epsilon`, composed in the fit's one ledger (the runs
    are calibrated to what remains). `n` and the label set are public.
    """
    epsilon_w = bounds.release_epsilon(CLASS_COUNT_SHARE * float(self.epsilon))
    update = mechanisms.update("discrete_laplace" if self.secure_noise else "laplace")
    with jax.enable_x64(True):
      noisy = np.asarray(host_release.release(update, jax.random.fold_in(key, CLASS_COUNT_STREAM),
                                            np.asarray(counts, np.float64), 2.0 / epsilon_w, 1.0))
    self.class_counts_ = noisy
    weights = float(np.sum(counts)) / (len(self.classes_) * np.maximum(noisy, 1.0))
    note = (f"class counts for class_weight='balanced': {update.name} noise on each of {len(self.classes_)} "
            f"counts (multiplier {2.0 / epsilon_w:.4g}, epsilon {epsilon_w:.4g} in all; a record moves two counts)")
    counts_ledger = ledger_lib.Ledger.of(("class counts", update.event(2.0 / epsilon_w), 2)).with_draws(
        len(self.classes_) * int(mechanisms.is_discrete(update)), 1, epsilon_w)
    return weights / weights.max(), counts_ledger, (note,)

  def _store(self, coef: np.ndarray, intercept: np.ndarray) -> None:
    self.coef_, self.intercept_ = coef, intercept

  def decision_function(self, X: Any) -> np.ndarray:
    """`<clip_B(x), w> + b`: (n,) for two classes, (n, classes) one-vs-rest."""
    scores = self._decision(X)
    return scores[:, 0] if scores.shape[1] == 1 else scores

  def _predict(self, X: Any) -> np.ndarray:
    scores = self.decision_function(X)
    index = (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
    return self.classes_[index]

  def predict_proba(self, X: Any) -> np.ndarray:
    """Logistic probabilities (one-vs-rest: the per-class sigmoids, normalized)."""
    scores = self._decision(X)
    prob = 1.0 / (1.0 + np.exp(-scores))
    if prob.shape[1] == 1:
      return np.hstack([1.0 - prob, prob])
    return prob / prob.sum(axis=1, keepdims=True)

  def predict_log_proba(self, X: Any) -> np.ndarray:
    return np.log(self.predict_proba(X))

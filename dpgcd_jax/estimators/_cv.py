"""DPGCDClassifierCV and DPGCDRegressorCV: hyperparameters chosen privately from a grid.

Protocol (Papernot & Steinke 2022, see [`dpgcd_jax.privacy.tuning`][]), from the raw data:

1. when `feature_bound` is None, a feature bound `B` is released privately on all the
   data (a share 0.1 of epsilon, as in [`DPGCDClassifier`][dpgcd_jax.estimators.DPGCDClassifier]);
2. the rows are split at random, independently of the data, into a training part and a
   validation part of `round(validation_fraction n)` rows;
3. `K ~ TNB(repetition_shape, mean = mean_repetitions)` repetitions, each drawing a
   candidate uniformly from the grid, training it with DP-GCD on the training part (noise
   multiplier `u sqrt(T)` for `T` steps in all, the same zCDP-like cost per candidate)
   and scoring it on the validation part with Laplace noise: accuracy (classifier, sensitivity
   `1 / n_val`) or minus the mean absolute residual clipped at `score_clip` (regressor,
   sensitivity `score_clip / n_val`), noise `Lap(sensitivity / eps_s)`, `eps_s = sqrt(2) / u`;
4. the repetition with the best noisy score is kept: `coef_`, `intercept_` (trained on the
   training part), `best_params_` and `best_score_` (noisy). Nothing else is released.

When the default grid is used and `n epsilon` is below `SELECTION_MIN_N_EPSILON`
(public), the search is skipped and the defaults run with the whole budget
(`selection_pays`); `privacy_`, `fell_back_` / `fallback_reason_` and a UserWarning say so.

Privacy: one repetition is a training run on the training rows and a score on the other rows
(parallel composition: its RDP curve is the maximum of the two), with a candidate drawn at
random (its RDP curve is at most the maximum over candidates); `RepeatAndSelect` turns
that curve into the protocol's, composed with the released scales and target bound in one
ledger; `u` is the smallest scale meeting `(epsilon, delta)`
([`dpgcd_jax.solvers.budget.search_scale`][], the one path from a budget to private runs).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import mechanisms
from dpgcd_jax import progress
from dpgcd_jax import scoring
from dpgcd_jax.estimators import _classifier
from dpgcd_jax.estimators import _defaults
from dpgcd_jax.estimators import _linear
from dpgcd_jax.estimators import _regressor
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators import _solvers
from dpgcd_jax.estimators import _training
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import tuning
from dpgcd_jax.solvers import budget

SEARCHABLE = ("clip", "step_size", "max_iter", "alpha", "l1_ratio")


def check_param_grid(param_grid: Any, allowed: Sequence[str]) -> list[dict[str, Any]]:
  """Validates a candidate grid and lists its candidates (scikit-learn's `ParameterGrid` order).

  Args:
    param_grid: a dict `name -> non-empty list of values` or a non-empty list of such dicts.
    allowed: the hyperparameter names that may be searched.

  Raises:
    ValueError: naming `param_grid` for an empty grid, an unknown name, a value that is not a
      non-empty list.
  """
  grids = [param_grid] if isinstance(param_grid, Mapping) else param_grid
  if isinstance(grids, (str, bytes)) or not isinstance(grids, Sequence) or not grids:
    raise ValueError(f"Expected param_grid to be a non-empty dict of lists or a non-empty list of "
                     f"such dicts, got param_grid={param_grid!r}.")
  candidates = []
  for grid in grids:
    if not isinstance(grid, Mapping) or not grid:
      raise ValueError(f"Expected every grid in param_grid to be a non-empty dict, got {grid!r}.")
    for name, values in grid.items():
      if name not in allowed:
        raise ValueError(f"Expected param_grid keys in {tuple(allowed)}, got {name!r}.")
      if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)) or \
          len(values) == 0:
        raise ValueError(f"Expected param_grid[{name!r}] to be a non-empty list, got {values!r}.")
    names = sorted(grid)
    for values in itertools.product(*(list(grid[k]) for k in names)):
      candidates.append(dict(zip(names, values, strict=True)))
  return candidates


def default_grid(n: int, epsilon: float, unit: float = _defaults.AUTO_STEPS_UNIT) -> dict[str, list[Any]]:
  """`max_iter` in {T / 3, T, 3 T}, `T` the "auto" rule of the estimators
  ([`auto_greedy_steps`][dpgcd_jax.estimators._defaults.auto_greedy_steps] with `unit`).

  Public: `n` (training rows), `epsilon`. Three candidates: every
  candidate costs budget (the noise per repetition grows with the mean number of
  repetitions), and on breast_cancer a 3 x 3 grid that adds `clip` in {0.03, 0.1, 0.3}
  lost 0.01 to 0.05 of accuracy against this one (epsilon = 5 and 1).
  """
  steps = _defaults.auto_greedy_steps(n, epsilon, unit)
  return {"max_iter": sorted({max(1, round(steps / 3)), steps, min(3000, 3 * steps)})}


SELECTION_MIN_N_EPSILON = 150_000


def selection_pays(n: int, epsilon: float) -> bool:
  """Whether the default search runs: `n epsilon >= SELECTION_MIN_N_EPSILON` (public only).

  A private search pays for its candidates with noise: with `E[K]` repetitions every run
  gets about `sqrt(2 E[K])` times the noise of a single fit, and the noisy scores must
  still tell the candidates apart. Below the threshold the defaults with the whole budget
  won on every data set we measured (`benchmarks/results/estimators_raw.md`; with the
  released curvature's defaults, `benchmarks/results/high_dim_quick.md`: the search lost
  0.064 of accuracy to them on text-like words at `n epsilon = 32000`, the largest measured
  cell where it ran), so the CV estimator runs them instead (`privacy_` says so): the
  threshold lies above every `n epsilon` measured. A `param_grid` you pass is always searched.
  """
  return n * epsilon >= SELECTION_MIN_N_EPSILON


def _scores(W: np.ndarray, X: Any, bound: np.ndarray, fit_intercept: bool) -> np.ndarray:
  p = X.shape[1]
  scores = np.asarray(_training.clip_features(X, bound) @ W[:, :p].T)
  return scores + W[:, p] if fit_intercept else scores


class _SearchMixin(_linear.DPGCDBase):
  """The private search shared by the two CV estimators (see the module docstring).

  It comes first in their bases, before the estimator it searches for (whose `fit` it replaces).
  """

  _searches = True  # fit runs a private search: fit_chunks (one fit) is refused

  # Constructor parameters of the CV estimators, as given (checked by _check_search).
  param_grid: Any
  mean_repetitions: Any
  repetition_shape: Any
  validation_fraction: Any

  def _score_bound(self) -> float:
    """A bound on `|term|` of every validation row (the score's sensitivity is it over `n_val`)."""
    raise NotImplementedError

  def _validation_terms(self, scores: np.ndarray, targets: list[np.ndarray]) -> np.ndarray:
    """The per-row terms whose mean is the validation score of the decision `scores`."""
    raise NotImplementedError

  def _check_search(self) -> None:
    if self.solver not in _solvers.ADAPTERS or not _solvers.ADAPTERS[self.solver].searchable:
      raise ValueError(
          f"Expected solver='dp_gcd' in {type(self).__name__}: its private search accounts for "
          f"DP-GCD runs (repetitions at a noise multiplier u sqrt(T)); for another solver use "
          f"{type(self).__name__[:-2]}(solver=...), got solver={self.solver!r}.")
    if self.param_grid is not None:
      check_param_grid(self.param_grid, SEARCHABLE)
    if self.mean_repetitions is not None:
      _validate.check_number("mean_repetitions", self.mean_repetitions, low=1.0)
    _validate.check_number("repetition_shape", self.repetition_shape, low=0.0)
    _validate.check_number("validation_fraction", self.validation_fraction, low=0.0, high=1.0,
                           low_open=True, high_open=True)

  def fit(self, X: Any, y: Any, sample_weight: Any = None) -> _SearchMixin:
    """Selects the hyperparameters and fits the model privately (see the module docstring).

    Args:
      X: (n, p) features (dense or scipy.sparse).
      y: (n,) labels or targets.
      sample_weight: must be None (weights change the sensitivity).

    Returns:
      self, with `best_params_`, `best_score_` (noisy) and `privacy_` (the total,
      selection included).

    Raises:
      ValueError: naming the argument, for a bad grid, hyperparameter or input.
    """
    self._check_search()
    data = self._prepare(X, y, sample_weight)
    X, targets, not_private, delta, key = data.X, data.targets, data.not_private, data.delta, data.key
    epsilon, (n, p) = float(self.epsilon), X.shape
    scaling = None  # chosen by the defaults' fit, unless the search would run
    if self.param_grid is None and not selection_pays(n, epsilon):
      reason, fix = (f"n epsilon = {n * epsilon:.4g} < {SELECTION_MIN_N_EPSILON} (public): a private search cannot "
                     f"pay for the noise its candidates add at this budget"), "more rows or a larger epsilon, or "
    else:
      data, scaling = _training.choose_scaling(self, data, epsilon)
      reason, fix = ("scaling='per-step' (" + ("declared" if self.scaling == _released.PER_STEP else
                                                "the records' vote: their scales spread")
                     + "): the search's candidates run on bounds released before them"), "declared feature bounds, or "
    if scaling is None or scaling == _released.PER_STEP:
      self.best_params_, self.best_score_ = {}, float("nan")
      self.fell_back_ = True
      self.fallback_reason_: str | None = reason
      warnings.warn(
          f"{type(self).__name__}.fit: the hyperparameter search was skipped and the default "
          f"hyperparameters ran with the whole budget, because {reason} (best_params_ is {{}}, "
          f"best_score_ NaN; fell_back_ and fallback_reason_ say so). Fix: {fix}pass param_grid= to search "
          f"anyway.", UserWarning, stacklevel=2)
      self._fit_prepared(data, note=f"selection: skipped, {reason}, so the default hyperparameters ran with the "
                                    f"whole budget", scaling=scaling)
      return self
    self.fell_back_, self.fallback_reason_ = False, None
    n_val = int(round(self.validation_fraction * n))
    if n_val < 1 or n - n_val < 2:
      raise ValueError(f"Expected validation_fraction to leave >= 1 validation row and >= 2 "
                       f"training rows, got validation_fraction={self.validation_fraction} "
                       f"for n={n}.")
    grid = self.param_grid
    if grid is None:
      grid = default_grid(n - n_val, epsilon, self._steps_unit)
    candidates = check_param_grid(grid, SEARCHABLE)
    mean = float(len(candidates) if self.mean_repetitions is None else self.mean_repetitions)
    shape = float(self.repetition_shape)
    hypers = [self._hyper(n - n_val, p, epsilon, **c) for c in candidates]
    for c in candidates:  # every candidate is valid before anything runs
      _validate.check_number("alpha", c.get("alpha", self.alpha), low=0.0)
      _validate.check_number("l1_ratio", c.get("l1_ratio", self.l1_ratio), low=0.0, high=1.0)
    key_bound, key_target, key_split, key_run, key_host = jax.random.split(key, 5)
    layout = self._layout(X)
    released = _released.release_feature_bounds(key_bound, layout, num_examples=n, num_features=p,
                                                feature_bound=self._declared_bound(p), scaling=scaling,
                                                epsilon=epsilon, delta=delta)
    # No warning that depends on the data: a |y_i| above the run dtype's largest float is inf.
    with np.errstate(over="ignore"):
      target = self._release_target(key_target, targets, jax.dtypes.canonicalize_dtype(layout.dtype))
    prior = released.ledger + data.prior
    if target is not None:
      targets, prior = np.clip(targets, -target.bound, target.bound) / target.bound, prior + target.ledger
    steps = sorted({h.max_iter * len(targets) for h in hypers})
    # The validation scores' noise: Laplace of multiplier u / sqrt(2) (discrete, on a public grid,
    # with secure_noise), drawn and costed by the mechanism layer.
    scorer = mechanisms.update("discrete_laplace" if self.secure_noise else "laplace")
    # A candidate's t steps run at noise scale u sqrt(t): the multipliers they draw and the events
    # charged for them come from one DP-GCD plan (`_gcd_plan`, also `_train_at`'s).
    plans = {t: self._gcd_plan(t, p + bool(self.fit_intercept)) for t in steps}

    def repetition(u):  # a candidate's runs (drawn at random) | its score (other rows)
      score = ledger_lib.Ledger.of(("score", scorer.event(u / math.sqrt(2.0)), 1))
      return tuple(plans[t].ledger(u * math.sqrt(t)) for t in steps) + (
          score.with_draws(int(mechanisms.is_discrete(scorer)), 1),)

    u, report = budget.search_scale(repetition, epsilon=epsilon, delta=delta, mean=mean, shape=shape, prior=prior)
    perm = np.asarray(jax.random.permutation(key_split, n))
    val, train = perm[:n_val], perm[n_val:]
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key_host)).tolist())
    counter = itertools.count()
    key_score = jax.random.fold_in(key_host, 1)
    bound = released.bound

    def run(index: int, count: int) -> list[tuple[float, np.ndarray]]:
      hyper, cand = hypers[index], candidates[index]
      out = []
      for _ in range(count):
        W = self._train_at(X[train], targets[:, train], bound, hyper,
                           u * math.sqrt(hyper.max_iter * len(targets)),
                           jax.random.fold_in(key_run, next(counter)),
                           alpha=cand.get("alpha"), l1_ratio=cand.get("l1_ratio"),
                           target_unit=None if target is None else float(target.bound))
        scores = _scores(W, X[val], bound, self.fit_intercept)
        noisy, _, _ = scoring.noisy_mean(jax.random.fold_in(key_score, next(counter)),
                                         self._validation_terms(scores, list(targets[:, val])), self._score_bound(),
                                         u / math.sqrt(2.0), secure=bool(self.secure_noise))
        out.append((noisy, W))
      return out

    with progress.bar(total=None, enabled=bool(self.verbose), desc=f"{type(self).__name__} search"):
      index, score, W = tuning.repeat_and_select(rng, len(candidates), run, mean=mean, shape=shape)
    self.best_params_, self.best_score_ = dict(candidates[index]), score
    notes = [released.note] + ([] if target is None else [target.note]) + list(data.notes)
    self._record(report.with_notes(
        *notes,
        f"selection: K ~ TNB(shape={shape:g}, mean={mean:g}) repetitions over {len(candidates)} "
        f"candidates, each trained on {n - n_val} rows (noise multiplier {u:.4g} sqrt(T)) and "
        f"scored on {n_val} other rows ({scorer.name}, epsilon {math.sqrt(2.0) / u:.4g}); only the best "
        f"is released", *self._notes(len(targets), hypers[index], delta)[1:]
    ).with_not_private(*not_private))
    self._set_model(W, released, hypers[index], n - n_val, target)
    return self


class DPGCDClassifierCV(_SearchMixin, _classifier.DPGCDClassifier):
  """`DPGCDClassifier` whose hyperparameters are selected privately (module docstring).

  The whole fit, selection included, is `(epsilon, delta)`-DP; `privacy_` reports it.

  Args:
    param_grid: dict `name -> list of values` (or a list of such dicts) over `clip`,
      `step_size`, `max_iter`, `alpha`, `l1_ratio`; None: `default_grid`
      (`max_iter` in {T / 3, T, 3 T}, `T` the "auto" rule).
    mean_repetitions: `E[K] >= 1`; None: the number of candidates.
    repetition_shape: `eta >= 0` of the truncated negative binomial (1: geometric).
    validation_fraction: share of the rows held out for the private scores, in (0, 1).
    solver, solver_params: accepted for scikit-learn's parameter protocol; only
      `solver="dp_gcd"` (the default) is searched (the search's accounting is DP-GCD's):
      another solver is a ValueError naming `solver` before any work.
    others: as [`DPGCDClassifier`][dpgcd_jax.estimators.DPGCDClassifier] (the values not in the grid are used as given).

  Attributes:
    best_params_: the selected candidate ({} when the search was skipped: see
      `selection_pays`).
    best_score_: its NOISY validation accuracy (the released one; NaN when skipped).
    fell_back_: True when the search was skipped and the defaults ran with the whole budget
      (`selection_pays`; a UserWarning says so too), else False.
    fallback_reason_: why it was skipped (public: `n epsilon` against
      `SELECTION_MIN_N_EPSILON`), or None when the search ran.
    others: as [`DPGCDClassifier`][dpgcd_jax.estimators.DPGCDClassifier]; the model is the selected repetition's.
  """

  def __init__(self, *, param_grid=None, mean_repetitions=None, repetition_shape=1.0,
               validation_fraction=0.25, classes=None, class_weight=None, penalty=None, alpha=1e-4, l1_ratio=0.5,
               epsilon=1.0, delta=None, fit_intercept=True, feature_bound=None, categories=None,
               scaling=_defaults.AUTO, clipping="coordinate", secure_noise=False,
               max_iter=_defaults.AUTO, step_size=_defaults.AUTO, clip=_defaults.AUTO, solver="dp_gcd",
               solver_params=None, random_state=None, accountant=None, verbose=0):
    super().__init__(classes=classes, class_weight=class_weight, penalty=penalty, alpha=alpha, l1_ratio=l1_ratio,
                     epsilon=epsilon, delta=delta,
                     fit_intercept=fit_intercept, feature_bound=feature_bound, categories=categories, scaling=scaling,
                     clipping=clipping, secure_noise=secure_noise, max_iter=max_iter,
                     step_size=step_size, clip=clip, solver=solver, solver_params=solver_params,
                     random_state=random_state, accountant=accountant, verbose=verbose)
    self.param_grid = param_grid
    self.mean_repetitions = mean_repetitions
    self.repetition_shape = repetition_shape
    self.validation_fraction = validation_fraction

  def _score_bound(self) -> float:
    return 1.0

  def _validation_terms(self, scores: np.ndarray, targets: list[np.ndarray]) -> np.ndarray:
    if scores.shape[1] == 1:
      return (np.where(scores[:, 0] > 0, 1.0, -1.0) == np.sign(targets[0])).astype(float)
    return (np.argmax(scores, axis=1) == np.argmax(np.stack(targets, 1), axis=1)).astype(float)


class DPGCDRegressorCV(_SearchMixin, _regressor.DPGCDRegressor):
  """`DPGCDRegressor` whose hyperparameters are selected privately (module docstring).

  The validation score is minus the mean absolute residual, each clipped at `score_clip`
  (sensitivity `score_clip / n_val`): set `score_clip` to the scale of the target.

  Args:
    score_clip: clipping of the absolute residuals in the validation score, > 0, in units of
      the target bound `T` (the regressor fits `y / T`).
    others: as [`DPGCDClassifierCV`][dpgcd_jax.estimators._cv.DPGCDClassifierCV] and
      [`DPGCDRegressor`][dpgcd_jax.estimators.DPGCDRegressor].

  Attributes:
    best_params_, best_score_ (noisy), fell_back_, fallback_reason_: as
      [`DPGCDClassifierCV`][dpgcd_jax.estimators._cv.DPGCDClassifierCV].
  """

  def __init__(self, *, param_grid=None, mean_repetitions=None, repetition_shape=1.0,
               validation_fraction=0.25, score_clip=1.0, loss="squared", huber_delta=1.0,
               target_bound=None, penalty=None, alpha=1e-4, l1_ratio=0.5, epsilon=1.0, delta=None,
               fit_intercept=True, feature_bound=None, categories=None, scaling=_defaults.AUTO, clipping="coordinate",
               secure_noise=False, max_iter=_defaults.AUTO, step_size=_defaults.AUTO, clip=_defaults.AUTO,
               solver="dp_gcd", solver_params=None, random_state=None, accountant=None, verbose=0):
    super().__init__(loss=loss, huber_delta=huber_delta, target_bound=target_bound, penalty=penalty,
                     alpha=alpha, l1_ratio=l1_ratio, epsilon=epsilon, delta=delta,
                     fit_intercept=fit_intercept, feature_bound=feature_bound, categories=categories, scaling=scaling,
                     clipping=clipping, secure_noise=secure_noise, max_iter=max_iter, step_size=step_size, clip=clip,
                     solver=solver, solver_params=solver_params, random_state=random_state,
                     accountant=accountant, verbose=verbose)
    self.param_grid = param_grid
    self.mean_repetitions = mean_repetitions
    self.repetition_shape = repetition_shape
    self.validation_fraction = validation_fraction
    self.score_clip = score_clip

  def _check_search(self) -> None:
    _validate.check_number("score_clip", self.score_clip, low=0.0, low_open=True)
    super()._check_search()

  def _score_bound(self) -> float:
    return float(self.score_clip)

  def _validation_terms(self, scores: np.ndarray, targets: list[np.ndarray]) -> np.ndarray:
    # fmin: a NaN error (0 x inf in a prediction) counts as the clip, so every term is in [-clip, 0]
    return -np.fmin(np.abs(scores[:, 0] - targets[0]), float(self.score_clip))

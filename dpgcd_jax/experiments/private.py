"""The end-to-end private column: public feature bounds and private hyperparameter selection.

What changes from the paper's protocol (the other columns):

1. **Public feature bounds instead of standardization.** The features are NOT standardized
   with the data's own statistics: each set has a bound `B` fixed a priori
   (`PUBLIC`, with the reason), the features are clipped to `[-B, B]` and the
   coordinate smoothness is the worst case `M_j = beta B^2` (as `make_problem(...,
   feature_bound=B)`; declared here with the same values). Real data come raw from the
   registry's loader (`dpgcd_jax.data.DatasetSpec.build`).
2. **Hyperparameters chosen privately** by repeat-and-select (Papernot & Steinke 2022,
   [`dpgcd_jax.privacy.tuning`][]): `K ~ Geometric` with `E[K]` = the number of
   candidates (9), each repetition draws a candidate `(step size, clip)` uniformly from a
   grid fixed a priori (`candidates`), trains it privately on all the data and releases a
   private score, `-(capped objective + Lap(cap / (n eps_s)))`: the objective with each
   example's loss capped at `score_cap` (so one record moves it by at most `cap / n`, plus
   the float64 mean's rounding, charged).
   Only the repetition with the best noisy score is released.
3. **One budget.** One repetition's ledger is the solver's run (noise multipliers `k`
   times the solver's epsilon = 1 calibration) plus the score (`Laplace(eps_s0 / k)`); the
   [`RepeatAndSelect`][dpgcd_jax.privacy.tuning.RepeatAndSelect] event turns it into the whole
   selection's cost and `k` is the smallest scale meeting epsilon = 1, delta = 1 / n^2
   ([`dpgcd_jax.solvers.budget.search_scale`][], the library's one path from a budget to
   private runs, as the CV estimators). The report is kept in
   the results (`epsilon <= 1`).

What stays as in the paper's protocol, stated: the objective (loss, ridge, and for the l1
sets the penalty strength `lambda = fraction * lambda_max`, computed from the data of the
public-bound design: it defines the problem we measure against); the number of passes (the
row of the table, a public budget); regression targets of real data standardized by the
registry (2 statistics). The relative error is measured, non-privately, against `F*` of
the same public-bound problem.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from typing import TYPE_CHECKING
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import sparse

from dpgcd_jax import data as data_lib
from dpgcd_jax import host_release
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import scoring
from dpgcd_jax.experiments import algorithms
from dpgcd_jax.experiments import prepared as prepared_lib
from dpgcd_jax.experiments import sweeps
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import budget

if TYPE_CHECKING:  # the runner imports this module: a type only, no import circle
  from dpgcd_jax.experiments.runner import Preset

SCORE_EPSILON = 0.5  # score budget of one repetition at scale k = 1 (eps_s = SCORE_EPSILON / k)
SHAPE = 1.0  # geometric number of repetitions
SCORE_STREAM = 1 << 30  # fold_in data of a selection's score key (its runs' keys: a split of the same root)
CLIPS = (0.03, 0.3, 3.0)  # per coordinate, in units of B times the target scale


@dataclasses.dataclass(frozen=True)
class PublicSpec:
  """What is public about a data set, fixed before seeing it.

  Attributes:
    feature_bound: `B`: features are clipped to `[-B, B]`.
    score_cap: cap of one example's loss in the private score.
    raw_features: take the loader's raw features (real data) instead of the registry's
      standardized ones.
    note: why these values are public.
    target_scale: a priori scale of `|phi'|` (1 for the logistic loss; the documented
      standard deviation of `y` for least squares, whose `phi'` is the residual): the
      candidate clips are `target_scale * {0.03, 0.3, 3}` in units of `B`.
  """

  feature_bound: float
  score_cap: float
  raw_features: bool
  note: str
  target_scale: float = 1.0


_GAUSSIAN = ("features N(0, 1) by construction (the generator's documentation): B = 3 standard deviations, "
             "fixed a priori (0.27% of the entries are clipped)")
_LOGISTIC_CAP = "logistic loss capped at 3 per example in the score (log 2 at w = 0)"


def _ls(variance: float) -> dict[str, float]:
  """Least squares with a documented Var(y): score cap (3 sd(y))^2 / 2 and target scale sd(y)."""
  return dict(score_cap=9.0 * variance / 2.0, target_scale=float(np.sqrt(variance)))


PUBLIC: dict[str, PublicSpec] = {
    "log1": PublicSpec(3.0, 3.0, False, f"{_GAUSSIAN}; {_LOGISTIC_CAP}"),
    "log2": PublicSpec(3.0, 3.0, False, f"{_GAUSSIAN}; {_LOGISTIC_CAP}"),
    "log1_ls": PublicSpec(feature_bound=3.0, raw_features=False, **_ls(100 * np.e**2 + 1),
                          note=f"{_GAUSSIAN}; squared loss capped at (3 sd(y))^2 / 2 and clips scaled by sd(y), "
                          "with the generator's Var(y) = p e^(2 sigma^2) + 1 = 740"),
    "log2_ls": PublicSpec(feature_bound=3.0, raw_features=False, **_ls(100 * np.e**8 + 1),
                          note=f"{_GAUSSIAN}; squared loss capped at (3 sd(y))^2 / 2 and clips scaled by sd(y), "
                          "with the generator's Var(y) = p e^(2 sigma^2) + 1 = 3.0e5 (heavy-tailed: the "
                          "realized variance is often far smaller, so the score is coarse)"),
    "square": PublicSpec(feature_bound=3.0, raw_features=False, **_ls(10 * 7.0 / 3.0 + 1),
                         note=f"{_GAUSSIAN}; squared loss capped at (3 sd(y))^2 / 2 and clips scaled by sd(y), "
                         "with the generator's Var(y) = nnz E[U(1, 2)^2] + 1 = 24.3"),
    "madelon_synth": PublicSpec(3.0, 3.0, False,
                                "standardized by the generator (MADELON recipe): B = 3, a priori; "
                                f"{_LOGISTIC_CAP}"),
    "permeability_qsar": PublicSpec(1.0, 4.5, True,
                                    "raw binary fingerprints (all 1107 columns, none dropped: the documented "
                                    "range {0, 1} gives B = 1); target standardized by the registry "
                                    "(2 statistics, not accounted); squared loss capped at 3^2 / 2"),
    "dorothea_synth": PublicSpec(1.0, 3.0, False, f"binary features (documented range {{0, 1}}): B = 1; "
                                 f"{_LOGISTIC_CAP}"),
}


@dataclasses.dataclass
class PublicPrepared(prepared_lib.Prepared):
  """A `prepared_lib.Prepared` of the public-bound design (`private` has `M_j = beta B^2`)."""

  bound: float = 1.0


def _clip_features(X: Any, bound: float) -> Any:
  if sparse.issparse(X):
    x = sparse.csr_array(X, dtype=np.float64, copy=True)
    x.data = np.clip(x.data, -bound, bound)
    return x
  return np.clip(np.asarray(X, np.float64), -bound, bound)


def prepare(dataset: data_lib.Dataset, spec: PublicSpec) -> PublicPrepared:
  """The public-bound problem of a registry data set (float32 private, float64 exact) and `F*`.

  Needs JAX's x64 mode for the float64 problem.
  """
  X = dataset.X
  if spec.raw_features:
    raw = data_lib.spec(dataset.name).build()
    X = np.asarray(raw.X, np.float64)
    if X.shape[0] != dataset.n:
      raise ValueError(f"Expected the raw data of {dataset.name!r} to have n={dataset.n} rows, got {X.shape}.")
  X = _clip_features(X, spec.feature_bound)
  public = data_lib.Dataset(name=f"{dataset.name}_public", X=X, y=dataset.y, loss=dataset.loss, l2=dataset.l2,
                            description=f"{dataset.name}, features clipped to a public bound")
  if dataset.lambda_fraction is not None:
    public = public.with_lambda_fraction(dataset.lambda_fraction, type(dataset.penalty))
  if dataset.loss.curvature is None:
    raise ValueError(f"Expected the loss of {dataset.name!r} to have a known curvature bound (M_j = beta B^2), "
                     f"got loss {dataset.loss.name!r}.")
  curvature = float(dataset.loss.curvature)
  p = public.p
  # The exact problem only evaluates objectives and F*: the data's own smoothness (fast reference
  # solve; all-zero columns get a tiny positive constant). The private one has M_j = beta B^2, the
  # value make_problem(..., feature_bound=B) declares, given as declared constants so that its
  # pytree matches the paper problem's (one compiled sweep serves both).
  data_m = np.maximum(curvature * data_lib.column_mean_squares(public.X), 1e-12)
  exact = problem_lib.make_problem(public.X, public.y, public.loss, l2=public.l2, penalty=public.penalty,
                                   smoothness=data_m)
  x32 = public.X.astype(np.float32)
  priv = problem_lib.make_problem(x32, public.y.astype(np.float32), public.loss, l2=public.l2,
                                  penalty=public.penalty,
                                  smoothness=np.full(p, curvature * spec.feature_bound**2, np.float32))
  base = prepared_lib.prepare(public, priv, exact)
  return PublicPrepared(**{f.name: getattr(base, f.name) for f in dataclasses.fields(prepared_lib.Prepared)},
                        bound=spec.feature_bound)


def candidates(algorithm: algorithms.Algorithm, bound: float, target_scale: float = 1.0) -> list[tuple[float, float]]:
  """The a priori grid of the selection: 9 candidates, in the solver's grid units.

  Every other value of the algorithm's own initial axes (fixed before any data is seen; the
  extensions of the paper-protocol grids are data-dependent and NOT used): 3 step sizes a
  decade apart, times `B^2` for the coordinate methods (`M_j = beta B^2` is a worst case;
  `B^2` converts to the scale of unit-variance features); clips `{0.03, 0.3, 3} t` per
  coordinate (`C_j = clip B`; `t` the target scale of `PublicSpec`; DP-SGD: times
  `B`, and `sqrt(p)` times that in l2).
  """
  r = lambda x: float(f"{x:.4g}")
  clips = [c * target_scale for c in CLIPS]
  steps = algorithm.step_sizes.values[::2]
  if algorithm.l2_clip:
    return [(r(g), r(c * bound)) for g in steps for c in clips]
  return [(r(g * bound**2), r(c)) for g in steps for c in clips]


def scaled(noise: Any, k: float) -> Any:
  return tuple(float(x) * k for x in noise) if isinstance(noise, tuple) else float(noise) * k


def calibrate(algorithm: algorithms.Algorithm, problem: problem_lib.Problem, passes: int, delta: float,
              mean: float) -> tuple[float, Any, float, ledger_lib.PrivacyReport]:
  """The scale `k` meeting (epsilon = 1, delta) for the whole selection.

  Returns:
    `(k, noise, score_epsilon, report)`: the run's multipliers `k` times the solver's
    epsilon = 1 calibration, the score's epsilon per repetition, and the privacy report.
  """
  base = algorithm.calibrate(problem, delta, passes)

  def inner(k: float) -> ledger_lib.Ledger:
    return algorithm.ledger(problem, scaled(base, k), passes) + ledger_lib.Ledger.of(
        ("private score", events.Laplace(SCORE_EPSILON / k), 1))

  k, report = budget.search_scale(inner, epsilon=algorithms.EPSILON, delta=delta, mean=mean, shape=SHAPE)
  return k, scaled(base, k), SCORE_EPSILON / k, report


@jax.jit
def _losses(problem: problem_lib.Problem, w: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Per model: each example's loss (n,), and the public terms of the objective."""
  def one(v):
    losses = jax.vmap(problem.loss.phi)(kernels.init_margins(problem, v), problem.y)
    return losses, 0.5 * problem.l2 * jnp.sum(v**2) + problem.penalty.value(v)
  return jax.vmap(one)(w)


def capped_objective(problem: problem_lib.Problem, w: Any, cap: float, pad_to: int = 1
                     ) -> tuple[np.ndarray, np.ndarray]:
  """`(capped means, public terms)` per model: the score's objective is their sum. The capped
  mean is each example's loss clipped to `[0, cap]`, averaged in float64 by `math.fsum`
  (sensitivity `cap / n + scoring.MEAN_ERROR cap`); the public terms (ridge and penalty) are
  functions of the released model alone.

  A model with a non-finite value has public terms `+inf` (a function of the model alone). `pad_to`
  pads the batch to a multiple (one compiled program for every batch size).
  """
  w = np.asarray(w, np.float64).reshape(-1, problem.num_features)
  count = w.shape[0]
  w = np.concatenate([w, np.zeros((-count % pad_to, w.shape[1]))])
  losses, public = _losses(problem, jnp.asarray(w, problem.XT.dtype))
  # clipped on the host in float64, at the exact cap (a NaN loss, e.g. from an overflowing margin,
  # counts as `cap`): every term is in [0, cap] whatever the record and the problem's dtype
  losses = np.asarray(losses[:count], np.float64)
  capped = np.where(np.isnan(losses), cap, np.clip(losses, 0.0, cap))
  means = np.asarray([math.fsum(row) / len(row) for row in capped.tolist()])
  public = np.asarray(public[:count], np.float64)
  return means, np.where(np.isfinite(public) & np.all(np.isfinite(w[:count]), axis=1), public, np.inf)


def private_scores(key: jax.Array, means: np.ndarray, cap: float, n: int, epsilon: float) -> np.ndarray:
  """`means + Lap(multiplier x sensitivity)`: epsilon-DP releases of capped means (float64 from
  `math.fsum`), drawn in float64 by the library's Laplace mechanism at the scale rounded up
  (`dpgcd_jax.host_release.release`).

  Each example's loss is capped at `cap` (losses are >= 0), so replacing one record moves the
  real mean by at most `cap / n`, and the float64 mean by at most `cap / n +
  scoring.MEAN_ERROR cap`: the sensitivity of every score (for a fixed, already private model);
  the multiplier is `1 / epsilon` and the ledger's event is `Laplace(epsilon)`.
  """
  with jax.enable_x64(True):
    return np.asarray(host_release.release(mechanisms.LaplaceNoise(), key, np.asarray(means, np.float64),
                                         1.0 / epsilon, cap / n + scoring.MEAN_ERROR * cap))


def private_row(algorithm: algorithms.Algorithm, prepared: PublicPrepared, spec: PublicSpec, passes: int,
                preset: Preset) -> dict:
  """Runs `preset.seeds` independent private selections; their released models' relative errors."""
  problem = prepared.private
  n = problem.num_examples
  delta = 1.0 / n**2
  grid = candidates(algorithm, spec.feature_bound, spec.target_scale)
  mean = float(len(grid))
  k, noise, score_epsilon, report = calibrate(algorithm, problem, passes, delta, mean)
  algo_index = list(algorithms.ALGORITHMS).index(algorithm.name)
  data_index = zlib.crc32(prepared.dataset.name.encode())
  plans = []
  for s in range(preset.seeds):
    rng = np.random.default_rng([sweeps.ROOT_SEED, 2, s, int(passes), algo_index, data_index])
    reps = int(rng.geometric(1.0 / mean))
    chosen = rng.integers(len(grid), size=reps)
    root = jax.random.fold_in(sweeps.seed_keys(preset.seeds, stream=2)[s], int(passes) * 16 + algo_index)
    plans.append((rng, chosen, jax.random.split(root, reps), jax.random.fold_in(root, SCORE_STREAM)))
  pts = [grid[i] for _, chosen, _, _ in plans for i in chosen]
  keys = jnp.concatenate([kk for _, _, kk, _ in plans])
  w = sweeps.independent(algorithm, problem, pts, noise, keys, passes, preset.chunk, preset.seeds)
  means, public = capped_objective(prepared.exact, w, spec.score_cap, pad_to=preset.chunk * preset.seeds)
  errors: list[float] = []
  released: list[list[float]] = []
  repetitions: list[int] = []
  start = 0
  for _, chosen, _, score_key in plans:
    block = slice(start, start + len(chosen))
    start += len(chosen)
    noisy = -(private_scores(score_key, means[block], spec.score_cap, n, score_epsilon) + public[block])
    i = int(np.argmax(noisy))
    errors.append(float(prepared_lib.relative_error(prepared, w[block][i])))
    released.append(list(grid[int(chosen[i])]))
    repetitions.append(len(chosen))
  errs = np.asarray(errors)
  return dict(dataset=prepared.dataset.name.removesuffix("_public"), algorithm=algorithm.name,
              passes=int(passes), mean=float(errs.mean()), std=float(errs.std()), min=float(errs.min()),
              max=float(errs.max()), median=float(np.median(errs)), errors=errs.tolist(), selected=released,
              repetitions=repetitions,
              mean_repetitions=mean, candidates=len(grid), scale=float(k), noise=sweeps.json_noise(noise),
              score_epsilon=float(score_epsilon), score_cap=spec.score_cap, feature_bound=spec.feature_bound,
              epsilon=float(report.epsilon), delta=float(report.delta), route=report.route, report=str(report))


def defaults_row(prepared: PublicPrepared, spec: PublicSpec, preset: Preset) -> dict:
  """The library's estimator with its default hyperparameters, end to end, on the public-bound data.

  [`DPGCDClassifier`][dpgcd_jax.DPGCDClassifier] (logistic sets, labels {-1, 1}) or
  [`DPGCDRegressor`][dpgcd_jax.DPGCDRegressor] (least squares, public `target_bound = 3 t`,
  `t` the a priori target scale of `spec`), `feature_bound = B` declared, no intercept (the
  paper's model), the problem's penalty (l1 at its strength, else its ridge), epsilon = 1,
  delta = 1/n^2, every other hyperparameter "auto": DP-GCD with the selected features'
  curvature released and `T` greedy steps by the public rule in `(n, epsilon)`. Nothing is
  tuned on the data; the ledger is the estimator's own (`epsilon` reported). The relative
  error of each seed's model is measured (NOT privately) on the paper's objective.
  """
  import dpgcd_jax as dg  # the estimators need scikit-learn: imported when the column runs

  public = prepared.dataset
  n = public.n
  kwargs: dict[str, Any] = dict(epsilon=algorithms.EPSILON, delta=1.0 / n**2, feature_bound=spec.feature_bound,
                                fit_intercept=False)
  strength = public.penalty_strength
  if strength:
    kwargs.update(penalty=type(public.penalty).__name__.lower(), alpha=strength)
  elif public.l2:
    kwargs.update(penalty="l2", alpha=public.l2)
  X, y = public.X, np.asarray(public.y)
  errors: list[float] = []
  epsilons: list[float] = []
  steps = 0
  for s in range(preset.seeds):
    if public.loss.name == "logistic":
      model = dg.DPGCDClassifier(classes=[-1, 1], random_state=s, **kwargs).fit(X, y)
    else:
      model = dg.DPGCDRegressor(target_bound=3.0 * spec.target_scale, random_state=s, **kwargs).fit(X, y)
    w = np.ravel(model.coef_)
    errors.append(float(prepared_lib.relative_error(prepared, w)))
    steps = int(model.n_iter_)
    epsilons.append(float(model.privacy_.epsilon))
  errs = np.asarray(errors)
  return dict(dataset=public.name.removesuffix("_public"), steps=steps, median=float(np.median(errs)),
              min=float(errs.min()), max=float(errs.max()), errors=errors, epsilon=max(epsilons),
              penalty=kwargs.get("penalty"), alpha=kwargs.get("alpha"))

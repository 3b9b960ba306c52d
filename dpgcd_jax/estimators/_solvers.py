"""The private solvers an estimator can run (`solver=`), as records of what each one can do.

An [`Adapter`][dpgcd_jax.estimators._solvers.Adapter] declares a solver's public capabilities
(its `solver_params` keys, whether it has a floating-point-safe mode, the clipping modes it
takes, whether it masks padded features, whether the CV search accounts for its runs), its
"auto" rules, its run through its own `fit` (the one path from a budget to a run:
[`dpgcd_jax.solvers.budget.private_fit`][], which composes the fit's earlier releases, `prior`,
and its runs, `targets`, in one ledger calibrated once) and its line in `privacy_`. The
estimators read these records; they never branch on a solver's name. A new solver is one
more record in `ADAPTERS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from dpgcd_jax import _validate
from dpgcd_jax import curvature as curvature_lib
from dpgcd_jax.estimators import _diagnostics
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._defaults import AUTO_CURVATURE
from dpgcd_jax.estimators._defaults import AUTO_SELECTION_SHARE
from dpgcd_jax.estimators._defaults import AUTO_SPARSITY
from dpgcd_jax.estimators._defaults import Hyper
from dpgcd_jax.estimators._defaults import auto_greedy_steps
from dpgcd_jax.estimators._defaults import auto_max_iter
from dpgcd_jax.estimators._defaults import auto_step_size
from dpgcd_jax.estimators._released import PER_STEP
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_fw
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_iht
from dpgcd_jax.solvers import two_stage

CLIPPINGS = ("derivative", "coordinate")
SELECTION, UPDATE = "gumbel", "gaussian"


@dataclasses.dataclass(frozen=True)
class Adapter:
  """One private solver as the estimators see it.

  Attributes:
    name: the `solver=` value.
    params: the keys of `solver_params` it takes (defaults:
      [`solver_params`][dpgcd_jax.estimators._solvers.solver_params]).
    defaults: `(key, value)` pairs, its public defaults of `solver_params` that do not depend
      on the problem.
    secure: it has a floating-point-safe (discrete) noise (`secure_noise=True`).
    clippings: the `clipping=` modes it takes.
    padded: it masks padded features, so the estimators pad `n` and `p` to public buckets
      (one compiled program per bucket).
    searchable: the CV estimators' repeat-and-select accounts for its runs.
    released_curvature: it can step by the released curvature (`solver_params["curvature"]`).
    scale_free: it can select scale-free, with per-step bounds (`scaling="per-step"`).
    unit_features: it runs on features in units of their bounds (the l1 ball of DP-FW is not
      equivariant to per-coordinate scaling).
    streams: it runs over row chunks (`fit_chunks`, [`dpgcd_jax.solvers.streamed`][]).
    steps: the "auto" `max_iter` from public `(n, width, epsilon, unit)` (`width`: features
      plus the intercept; `unit`: the estimator's steps unit).
    step: the "auto" step size from `(clip, beta, params)` with steps from the public bounds.
    run: `run(estimator, problem, key, targets, hyper, *, n, epsilon, delta, prior, prelude)`,
      the runs through the solver's `fit`: `(result, hyper as run)`.
    note: `note(estimator, num_targets, hyper)`, its line in `privacy_`.
    check: `check(penalty, step_size)`, raising a ValueError naming the argument it cannot honour.
  """

  name: str
  params: tuple[str, ...]
  run: Callable[..., tuple[Any, Hyper]]
  note: Callable[[Any, int, Hyper], str]
  defaults: tuple[tuple[str, Any], ...] = ()
  secure: bool = False
  clippings: tuple[str, ...] = CLIPPINGS
  padded: bool = False
  searchable: bool = False
  released_curvature: bool = False
  scale_free: bool = False
  unit_features: bool = False
  streams: bool = False
  steps: Callable[[int, int, float, float], int] = lambda n, width, epsilon, unit: auto_max_iter(n, width, epsilon)
  step: Callable[[float, float, Mapping[str, Any]], float] = lambda clip, beta, params: auto_step_size(clip, beta)
  check: Callable[[Any, Any], None] = lambda penalty, step_size: None


def _units(estimator: Any) -> str:
  return "the feature bounds" + (" and the target bound" if estimator._noise_cap is not None else "")


def _run_dp_gcd(estimator: Any, problem: Any, key: Any, targets: Any, hyper: Hyper, *, n: int, epsilon: float,
                delta: float, prior: ledger_lib.Ledger, prelude: Any) -> tuple[Any, Hyper]:
  selection, update = estimator._mechanisms()
  steps = hyper.max_iter
  step_size = dp_gcd_step_size(estimator, hyper, n)
  per_step = getattr(getattr(prelude, "features", None), "how", None) == PER_STEP
  # the intercept's column (index p) keeps its public bound
  fixed = (int(prelude.features.num_features),) if per_step and estimator.fit_intercept else ()
  result = dp_gcd.fit(problem, key, epsilon=epsilon, delta=delta, passes=steps, step_size=step_size,
                      clip=hyper.clip, selection=selection, update=update, prior=prior, targets=targets,
                      prelude=prelude, clipping_mode=estimator.clipping, curvature=estimator._curvature_option(),
                      selection_share=estimator._selection_share(), scale=PER_STEP if per_step else "public",
                      fixed=fixed)
  if callable(step_size):  # the step the run used, from the multipliers it returns
    hyper = hyper._replace(step_size=float(result.params.step_size))
  return result, hyper


def dp_gcd_step_size(estimator: Any, hyper: Hyper, n: int) -> float | Callable[[float], float]:
  """DP-GCD's step: `hyper.step_size`, or with "auto" and the regressor's `_noise_cap` a function
  of the noise multiplier `s` capping the noise a run may add to a prediction at `_noise_cap`
  (in units of the target): a function of public values only."""
  cap = estimator._noise_cap
  if cap is None or estimator.step_size != AUTO:
    return hyper.step_size
  return lambda s: min(hyper.step_size, cap / _diagnostics.prediction_noise(
      s, step_size=1.0, clip=hyper.clip, curvature=estimator._curvature, n=n, steps=hyper.max_iter))


def _note_dp_gcd(estimator: Any, num_targets: int, hyper: Hyper) -> str:
  selection, update = estimator._mechanisms()
  return (f"DP-GCD: {num_targets} run(s) x {hyper.max_iter} steps, {selection} selection and {update} updates "
          f"with equal noise multipliers" + (
              f", the selected feature's curvature released at each step ({update}, "
              f"{dp_gcd.CURVATURE_RATIO:g} x the update multiplier)"
              if estimator._curvature_option() == "released" else ", steps from the public bounds"))


def _common(estimator: Any, problem: Any, targets: Any, hyper: Hyper, *, n: int, epsilon: float, delta: float,
            prior: ledger_lib.Ledger, prelude: Any) -> tuple[dict[str, Any], dict[str, Any]]:
  """The solver's params as completed for this problem, and the `fit` arguments every solver takes."""
  del n
  return estimator._solver_params(problem.num_features), dict(
      epsilon=epsilon, delta=delta, passes=hyper.max_iter, prior=prior, targets=targets, prelude=prelude)


def _run_dp_fw(estimator: Any, problem: Any, key: Any, targets: Any, hyper: Hyper, **kw: Any) -> tuple[Any, Hyper]:
  params, common = _common(estimator, problem, targets, hyper, **kw)
  return dp_fw.fit(problem, key, radius=params["radius"], clip=hyper.clip, clipping_mode=estimator.clipping,
                   secure_noise=bool(estimator.secure_noise), **common), hyper


def _run_dp_iht(estimator: Any, problem: Any, key: Any, targets: Any, hyper: Hyper, **kw: Any) -> tuple[Any, Hyper]:
  params, common = _common(estimator, problem, targets, hyper, **kw)
  return dp_iht.fit(problem, key, sparsity=params["sparsity"], step_size=hyper.step_size, clip=hyper.clip,
                    selection_share=params.get("selection_share", 0.5), clipping_mode=estimator.clipping,
                    secure_noise=bool(estimator.secure_noise), **common), hyper


def _run_two_stage(estimator: Any, problem: Any, key: Any, targets: Any, hyper: Hyper,
                   **kw: Any) -> tuple[Any, Hyper]:
  params, common = _common(estimator, problem, targets, hyper, **kw)
  selection, update = estimator._mechanisms()
  return two_stage.fit(problem, key, sparsity=params["sparsity"], step_size=hyper.step_size, clip=hyper.clip,
                       selection=selection, update=update, support_share=params.get("support_share", 0.25),
                       clipping_mode=estimator.clipping, **common), hyper


def _run_dp_cd(estimator: Any, problem: Any, key: Any, targets: Any, hyper: Hyper, **kw: Any) -> tuple[Any, Hyper]:
  _, common = _common(estimator, problem, targets, hyper, **kw)
  return dp_cd.fit(problem, key, step_size=hyper.step_size, clip=hyper.clip,
                   secure_noise=bool(estimator.secure_noise), **common), hyper


def _check_dp_fw(penalty: Any, step_size: Any) -> None:
  if penalty not in (None, "l2"):
    raise ValueError(f"Expected penalty None or 'l2' with solver='dp_fw' (its constraint, the l1 ball of "
                     f"solver_params['radius'], replaces an l1 penalty), got penalty={penalty!r}.")
  if not (isinstance(step_size, str) and step_size == AUTO):
    raise ValueError(f"Expected step_size={AUTO!r} with solver='dp_fw' (Frank-Wolfe steps by 2 / (t + 2); "
                     f"the l1 radius is solver_params['radius']), got step_size={step_size!r}.")


ADAPTERS: dict[str, Adapter] = {a.name: a for a in (
    Adapter("dp_gcd", ("curvature", "selection_share"), _run_dp_gcd, _note_dp_gcd,
            defaults=(("curvature", AUTO_CURVATURE), ("selection_share", AUTO_SELECTION_SHARE)),
            secure=True, padded=True, searchable=True,
            released_curvature=True, scale_free=True, streams=True,
            steps=lambda n, width, epsilon, unit: auto_greedy_steps(n, epsilon, unit)),
    Adapter("dp_fw", ("radius",), _run_dp_fw, lambda estimator, num_targets, hyper: (
        f"solver dp_fw (DP Frank-Wolfe): {num_targets} run(s) x {hyper.max_iter} steps on the l1 ball of radius "
        f"{estimator.solver_params_['radius']:g} (in units of {_units(estimator)}), one "
        f"{'discrete report-noisy-max' if estimator.secure_noise else 'exponential-mechanism'} vertex selection "
        f"per step"), secure=True, unit_features=True, check=_check_dp_fw),
    # s coordinates move at once: DP-GCD's step divided by s keeps the margin move per step at
    # most about AUTO_MARGIN_STEP (measured in AUTO_RADIUS's setting: step 1 / 0.5 / 0.25 / auto
    # gave R^2 -2.7 / -0.17 / 0.25 / 0.56 at epsilon = 1, 0.44 / 0.78 / 0.85 / 0.90 at 5).
    Adapter("dp_iht", ("sparsity", "selection_share"), _run_dp_iht, lambda estimator, num_targets, hyper: (
        f"solver dp_iht (private hard thresholding): {num_targets} run(s) x {hyper.max_iter} steps keeping "
        f"{estimator.solver_params_['sparsity']} coordinates, "
        f"{'secure peeling and discrete Gaussian' if estimator.secure_noise else 'peeling and Gaussian'} values"),
        secure=True, step=lambda clip, beta, params: auto_step_size(clip, beta) / params["sparsity"]),
    Adapter("two_stage", ("sparsity", "support_share"), _run_two_stage, lambda estimator, num_targets, hyper: (
        "solver two_stage: {} run(s), each a {}peeling of {} coordinates then {} DP-GCD steps on them "
        "({} selection, {} updates)").format(num_targets, "secure " if estimator.secure_noise else "",
                                              estimator.solver_params_["sparsity"], hyper.max_iter,
                                              *estimator._mechanisms()), secure=True),
    # passes of p coordinate updates: about as many updates as the other solvers' T
    Adapter("dp_cd", (), _run_dp_cd, lambda estimator, num_targets, hyper: (
        f"solver dp_cd (randomized coordinate descent): {num_targets} run(s) x {hyper.max_iter} passes of "
        f"{estimator.n_features_in_ + bool(estimator.fit_intercept)} Gaussian coordinate updates"),
        secure=True, clippings=("coordinate",),
        steps=lambda n, width, epsilon, unit: max(1, round(auto_max_iter(n, width, epsilon) / width))),
)}
SOLVERS = tuple(ADAPTERS)


def check_solver(solver: Any, given: Any, *, penalty: Any, step_size: Any, clipping: str,
                 secure_noise: Any) -> None:
  """Validates `solver` and `solver_params` (`given`) against the other arguments (public,
  before any work), from the solver's record.

  Raises:
    ValueError: naming the argument: an unknown `solver`; `solver_params` not a dict, with a
      key the solver does not take or a bad value; an argument the solver cannot honour
      (`secure_noise` without a secure mode, a `clipping` it does not take, and the record's
      own checks: a non-smooth `penalty` or a `step_size` with DP-FW).
  """
  _validate.check_choice("solver", solver, SOLVERS)
  adapter = ADAPTERS[solver]
  if given is not None:
    if not isinstance(given, Mapping):
      raise ValueError(f"Expected solver_params to be None or a dict, got solver_params={given!r}.")
    for name, value in given.items():
      if name not in adapter.params:
        raise ValueError(f"Expected solver_params keys for solver={solver!r} in {adapter.params}, "
                         f"got solver_params={dict(given)!r} (key {name!r}).")
      if name == "radius":
        _validate.check_number("solver_params['radius']", value, low=0.0, low_open=True)
      elif name == "curvature":
        _validate.check_choice("solver_params['curvature']", value, curvature_lib.OPTIONS)
      elif name == "sparsity":
        _validate.check_int("solver_params['sparsity']", value, low=1)
      else:  # a share of the budget
        _validate.check_number(f"solver_params[{name!r}]", value, low=0.0, high=1.0, low_open=True,
                               high_open=True)
  if secure_noise and not adapter.secure:
    raise ValueError(f"Expected secure_noise=False with solver={solver!r}: floating-point-safe noise "
                     f"exists for {tuple(a.name for a in ADAPTERS.values() if a.secure)} only, "
                     f"got secure_noise={secure_noise!r}.")
  if clipping not in adapter.clippings:
    raise ValueError(f"Expected clipping in {adapter.clippings} with solver={solver!r}, got clipping={clipping!r}.")
  adapter.check(penalty, step_size)


def solver_params(solver: str, given: Mapping[str, Any] | None, *, num_coordinates: int,
                  radius: float) -> dict[str, Any]:
  """The solver's hyperparameters: `given`, completed by public defaults.

  `radius` (DP-FW): the default is `AUTO_RADIUS`, in units of the feature
  bounds (and of the target bound for a regressor): every score `|<clip_B(x), w> + b|` is then
  at most `radius`. `sparsity` (DP-IHT, two-stage): `min(AUTO_SPARSITY, num_coordinates)`,
  the coordinates counting the intercept (it competes for the support like any feature);
  more than `num_coordinates` is a ValueError naming it. The shares: DP-GCD's selection share
  `AUTO_SELECTION_SHARE`, the other solvers' own defaults. DP-GCD's `curvature`: `AUTO_CURVATURE`.
  """
  params = ADAPTERS[solver].params
  given = dict(given or {})
  for name, value in ADAPTERS[solver].defaults:
    given.setdefault(name, value)
  if "radius" in params:
    given.setdefault("radius", float(radius))
  if "sparsity" in params:
    given.setdefault("sparsity", min(AUTO_SPARSITY, num_coordinates))
    if given["sparsity"] > num_coordinates:
      raise ValueError(f"Expected solver_params['sparsity'] <= the number of coordinates {num_coordinates} "
                       f"(features, plus the intercept), got solver_params['sparsity']={given['sparsity']}.")
  return given

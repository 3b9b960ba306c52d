"""`dpgcd_jax.solvers.base`: the solver protocol, the same for every solver. SOLVERS below has an entry
for each name of `dpgcd_jax.solvers.REGISTRY` (a test checks it), and variants of their options.

``step(key, state, problem, params, **options) -> (State, Info)`` is pure and jittable; a
hand-written loop of ``init`` / ``step`` equals ``run``; ``run(problem, key, params, *, passes)``
and ``fit(problem, key, *, epsilon, delta, passes)``; the argument orders of version 0.1 and
``steps=`` are gone (the package was never released with them).
"""

import dataclasses
import importlib
import inspect
import itertools
import logging
import pathlib
import pkgutil
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax.solvers import base

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

PASSES = 2


def _problem(loss="squared", n=40, p=6):
  X = jax.random.normal(jax.random.key(0), (n, p))
  y = X[:, 0] - 0.5 * X[:, 1] if loss == "squared" else jnp.sign(X[:, 0] + 0.1)
  return dg.make_problem(X, y, loss, l2=0.01, feature_bound=4.0)


# name: (module, params, run options, step options)
SOLVERS = {
    "dp_gcd": (dg.dp_gcd, dg.dp_gcd.Params(0.8, 1.0, 4.0, 4.0), {}, {}),
    "dp_gcd_gumbel": (dg.dp_gcd, dg.dp_gcd.Params(0.8, 1.0, 4.0, 4.0),
                      dict(selection="gumbel", update="gaussian", rule="gs-r"),
                      dict(selection="gumbel", update="gaussian", rule="gs-r")),
    "dp_gcd_released_curvature": (dg.dp_gcd, dg.dp_gcd.Params(0.8, 1.0, 4.0, 4.0, 4.0), dict(curvature="released"),
                                  dict(curvature="released")),
    "dp_cd": (dg.dp_cd, dg.dp_cd.Params(0.8, 1.0, 2.0), {}, {}),
    "dp_sgd": (dg.dp_sgd, dg.dp_sgd.Params(0.1, 1.0, 1.0), dict(batch_size=8),
               dict(sampling_rate=8 / 40)),
    "dp_fw": (dg.dp_fw, dg.dp_fw.Params(2.0, 1.0, 2.0), {}, {}),
    "dp_iht": (dg.dp_iht, dg.dp_iht.Params(0.5, 1.0, 2.0, 2.0), dict(sparsity=2), dict(sparsity=2)),
    "two_stage": (dg.two_stage, dg.two_stage.Params(1.0, 1.0, 2.0, 2.0, 2.0), dict(sparsity=3), dict(sparsity=3)),
}
FIT_ONLY = {"dp_fw": dict(radius=2.0)}  # fit's arguments that are Params fields in run


def _records_coordinates(module):
  return "coordinate" in module.Info._fields


def _assert_same(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _deprecations(caught):
  return [w for w in caught if issubclass(w.category, DeprecationWarning)]


def test_public_modules_and_result_types():
  assert set(dg.solvers.__all__) == {"base", "budget", "reference", "streamed", "Result", "Trace", "fit", "REGISTRY",
                                     *dg.solvers.REGISTRY}
  assert dg.fit is dg.solvers.fit is dg.solvers.budget.fit
  assert dg.Result is dg.solvers.Result is base.Result
  assert dg.Trace is dg.solvers.Trace is base.Trace
  for name in dg.solvers.REGISTRY:  # one registry line exports the module here and at the top level
    module = getattr(dg, name)
    assert module is getattr(dg.solvers, name) and module.__name__ == f"dpgcd_jax.solvers.{name}"
    assert module.SOLVER.params is module.Params and module.SOLVER.init is module.init


def test_the_registry_holds_every_solver_module_and_this_suite_covers_each():
  """A module of `dpgcd_jax.solvers` that defines a `SOLVER` record is in `REGISTRY`, every registered
  solver has an entry in `SOLVERS` (so every protocol test runs on it), and the API page documents it."""
  defined = {info.name for info in pkgutil.iter_modules(dg.solvers.__path__)
             if isinstance(getattr(importlib.import_module(f"dpgcd_jax.solvers.{info.name}"), "SOLVER", None),
                           base.Solver)}
  assert defined == set(dg.solvers.REGISTRY)
  assert {module.__name__.rsplit(".", 1)[1] for module in MODULES.values()} == set(dg.solvers.REGISTRY)
  api = (pathlib.Path(__file__).parents[2] / "docs" / "api" / "solvers.md").read_text()
  assert all(f"::: dpgcd_jax.{name}\n" in api for name in dg.solvers.REGISTRY), api


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOLVERS))
def test_step_returns_its_state_and_info_and_jits(name):
  module, params, _, step_options = SOLVERS[name]
  problem = _problem()
  state = module.init(problem)
  assert isinstance(state, module.State)
  new_state, info = module.step(jax.random.key(1), state, problem, params, **step_options)
  assert type(new_state) is module.State and type(info) is module.Info
  assert new_state.w.shape == state.w.shape and not np.array_equal(new_state.w, state.w)
  for field, leaf in zip(info._fields, info, strict=True):
    if field == "support":  # DP-IHT: the s indices peeling kept, distinct
      assert jnp.shape(leaf) == (step_options["sparsity"],) and len(set(np.asarray(leaf).tolist())) == len(leaf)
      assert np.all((0 <= np.asarray(leaf)) & (np.asarray(leaf) < problem.num_features))
    else:
      assert jnp.shape(leaf) == (), field
  if module is dg.dp_sgd:
    assert 0 <= int(info.batch_size) <= problem.num_examples
  elif _records_coordinates(module):
    assert 0 <= int(info.coordinate) < problem.num_features
  jitted = jax.jit(module.step, static_argnames=tuple(step_options))
  jit_state, jit_info = jitted(jax.random.key(1), state, problem, params, **step_options)
  assert type(jit_state) is module.State and type(jit_info) is module.Info
  np.testing.assert_allclose(jit_state.w, new_state.w, rtol=1e-10, atol=1e-12)
  _assert_same(jit_info, info)


def test_dp_sgd_info_counts_the_poisson_batch():
  problem = _problem(n=400)
  q = 0.05
  step = jax.jit(lambda k: dg.dp_sgd.step(k, dg.dp_sgd.init(problem), problem, dg.dp_sgd.Params(),
                                          sampling_rate=q)[1].batch_size)
  keys = jax.random.split(jax.random.key(3), 20)
  sizes = np.array([int(step(k)) for k in keys])
  capacity = dg.dp_sgd.max_batch_size(400, q)
  sampled = jax.jit(lambda k: dg.dp_sgd.sample_batch(jax.random.split(k)[0], 400, q, capacity)[1].sum())
  expected = [int(sampled(k)) for k in keys]
  np.testing.assert_array_equal(sizes, expected)  # the same sample as the step's


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_loop_of_init_and_step_equals_run(name):
  module, params, run_options, step_options = SOLVERS[name]
  problem = _problem()
  key = jax.random.key(5)
  result = module.run(problem, key, params, passes=PASSES, **run_options)
  cast = base.cast_params(module.SOLVER, problem, params)
  steps = PASSES * module.SOLVER.steps_per_pass(problem, **run_options)
  step = jax.jit(module.step, static_argnames=tuple(step_options))
  state, coordinates = module.init(problem), []
  for t in range(steps):
    state, info = step(jax.random.fold_in(key, t), state, problem, cast, **step_options)
    coordinates.append(getattr(info, "coordinate", None))
  np.testing.assert_allclose(result.w, state.w, rtol=1e-10, atol=1e-12)
  if not _records_coordinates(module):
    assert result.trace.coordinates is None
  else:
    np.testing.assert_array_equal(result.trace.coordinates, np.array(coordinates))


@pytest.mark.slow
def test_new_conventions_do_not_warn():
  problem, key = _problem(), jax.random.key(2)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for module, params, run_options, step_options in SOLVERS.values():
      module.run(problem, key, params, passes=1, **run_options)
      module.run(problem, key=key, params=params, passes=1, **run_options)
      module.step(key, module.init(problem), problem, params, **step_options)
    dg.dp_gcd.fit(problem, key, epsilon=1.0, delta=1e-5, passes=2)
    dg.dp_cd.fit(problem, key, epsilon=1.0, delta=1e-5, passes=1)
    dg.dp_sgd.fit(problem, key, epsilon=1.0, delta=1e-5, passes=1, batch_size=8)
  ours = [w for w in _deprecations(caught) if w.filename == __file__ or "dpgcd_jax" in w.filename]
  assert not ours, [str(w.message) for w in ours]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOLVERS))
def test_vmapped_run_over_keys_and_params_does_not_recompile(name):
  module, params, run_options, _ = SOLVERS[name]
  traces = []

  def counting_logistic(z, y):
    traces.append(1)
    return jnp.logaddexp(0.0, -y * z)

  X = jax.random.normal(jax.random.key(0), (40, 6))
  problem = dg.make_problem(X, jnp.sign(X[:, 0] + 0.1), dg.glm_loss(counting_logistic, curvature=0.25),
                            feature_bound=4.0)
  sweep = jax.jit(jax.vmap(jax.vmap(lambda prm, k: module.run(problem, k, prm, passes=1, **run_options).w,
                                    in_axes=(None, 0)), in_axes=(0, None)))
  grid = jax.tree.map(lambda x: jnp.array([x, 0.5 * x]), params)
  keys = jax.random.split(jax.random.key(0), 3)
  first = sweep(grid, keys)
  assert first.shape == (2, 3, 6) and np.all(np.isfinite(first))
  for i, k in itertools.product(range(2), range(3)):  # each entry is the run of its own key and values
    alone = module.run(problem, keys[k], jax.tree.map(lambda x: x[i], grid), passes=1, **run_options).w  # noqa: B023
    np.testing.assert_allclose(first[i, k], alone, rtol=1e-10, atol=1e-12)
  after_first = len(traces)
  assert after_first > 0
  sweep(jax.tree.map(lambda x: 1.5 * x, grid), jax.random.split(jax.random.key(1), 3))
  assert len(traces) == after_first
  module.run(problem, jax.random.key(2), params, passes=1, **run_options)
  after_run = len(traces)
  module.run(problem, jax.random.key(3), jax.tree.map(lambda x: 0.7 * x, params), passes=1, **run_options)
  assert len(traces) == after_run  # new values of the key and the hyperparameters: no retrace
  module.run(problem, jax.random.key(3), params, passes=2, **run_options)
  assert len(traces) == after_run  # the number of passes is a runtime value: no retrace either


@pytest.mark.parametrize("name", [n for n in SOLVERS if n in dg.solvers.REGISTRY])
def test_fit_accounts_for_exactly_the_steps_it_runs(name):
  module, _, options, _ = SOLVERS[name]
  problem = _problem()
  result = module.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=3, **options,
                      **FIT_ONLY.get(name, {}))
  ran = base.total_steps(module.SOLVER, problem, 3, **options)
  if _records_coordinates(module):
    assert result.trace.coordinates.shape == (ran,)
  assert ran == {"dp_gcd": 3, "dp_cd": 3 * 6, "dp_sgd": 3 * (40 // 8), "dp_fw": 3, "dp_iht": 3, "two_stage": 3}[name]
  per_step = {"selection": ran, "update": ran, "step": ran, "vertex selection": ran,
              # DP-IHT peels `s` indices every step; two-stage selects its support of `s` once
              "support selection": ran * options.get("sparsity", 0) if name == "dp_iht" else options.get("sparsity")}
  counts = {e.label: e.count for e in result.privacy.entries if e.label in per_step}  # DP-SGD's sampling apart
  assert counts and counts == {label: per_step[label] for label in counts}, counts
  # The result carries the hyperparameters it ran with: the calibrated multipliers, rounded up.
  assert type(result.params) is module.Params
  noises = [getattr(result.params, f) for f in module.SOLVER.noises]
  assert any(float(v) > 0 for v in noises if v is not None)
  if module is dg.dp_gcd:
    event = next(e.event for e in result.privacy.entries if e.label == "update")  # Laplace(1 / s)
    accounted = 1.0 / event.epsilon
    assert accounted * (1 - 1e-12) <= float(result.params.update_noise) <= accounted * (1 + 1e-6)


MODULES = {name: entry[0] for name, entry in SOLVERS.items() if name in dg.solvers.REGISTRY}  # variants apart
FIT_ARGUMENTS = {"problem", "key", "epsilon", "delta", "passes", "bound_share", "store_objective", "prior", "targets",
                 "prelude"}  # the generic fit's own; the rest are the solver's hyperparameters


@pytest.mark.parametrize("name", list(MODULES))
def test_each_solver_record_carries_its_plan_and_fit_forwards_the_plans_defaults(name):
  module = MODULES[name]
  assert module.SOLVER.private_plan is module.private_plan
  fit = inspect.signature(module.fit).parameters
  plan = inspect.signature(module.private_plan).parameters
  hyper = {k: v.default for k, v in plan.items() if k not in ("problem", "passes", "runs", "epsilon")}
  assert {k: v.default for k, v in fit.items() if k not in FIT_ARGUMENTS} == hyper
  for k in set(fit) & FIT_ARGUMENTS:  # the budget arguments have the generic fit's defaults
    assert fit[k].default == inspect.signature(dg.fit).parameters[k].default, k


@pytest.mark.parametrize("name", list(MODULES))
def test_the_generic_fit_is_every_solvers_fit(name):
  module, _, options, _ = SOLVERS[name]
  problem, key = _problem(), jax.random.key(4)
  hyper = dict(options, **FIT_ONLY.get(name, {}))
  own = module.fit(problem, key, epsilon=1.0, delta=1e-5, passes=2, **hyper)
  generic = dg.fit(module, problem, key, epsilon=1.0, delta=1e-5, passes=2, **hyper)
  _assert_same(own.w, generic.w)
  _assert_same(own.params, generic.params)
  assert own.privacy == generic.privacy
  with pytest.raises(TypeError, match="no_such_option"):
    dg.fit(module, problem, key, epsilon=1.0, delta=1e-5, passes=2, no_such_option=1, **hyper)


def test_the_generic_fit_names_a_bad_solver():
  with pytest.raises(ValueError, match="got solver=.*losses"):
    dg.fit(dg.losses, _problem(), jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2)


@pytest.mark.parametrize("name", list(MODULES))
def test_the_plans_ledger_charges_every_multiplier_the_run_draws(name):
  """The ledger is read from the run's own Params: each noise field the run draws is charged
  (more noise on any one field, strictly less epsilon), and the fit's rounded-up multipliers meet
  the budget, tightly."""
  module, _, options, _ = SOLVERS[name]
  problem = _problem()
  hyper = dict(options, **FIT_ONLY.get(name, {}))
  result = module.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2, **hyper)
  plan = module.private_plan(problem, passes=2, runs=1, epsilon=1.0, **hyper)
  params = jax.tree.map(float, result.params)
  epsilon = plan.ledger_of(params).epsilon(1e-5)
  assert 0.99 < epsilon <= 1.0 + 1e-9, epsilon
  drawn = [f for f in module.SOLVER.noises if getattr(params, f) is not None and getattr(params, f) > 0]
  assert drawn
  for field in drawn:
    more = params._replace(**{field: 2.0 * getattr(params, field)})
    assert plan.ledger_of(more).epsilon(1e-5) < epsilon, field


@pytest.mark.parametrize("name", list(MODULES))
def test_the_calibration_key_is_derived_from_the_plan(name):
  """No hand-written key: equal plans share it, and a plan whose ledger differs (more passes, another
  mechanism, two runs) gets another; the key is the ledger at two scales."""
  module, _, options, _ = SOLVERS[name]
  problem = _problem()
  hyper = dict(options, **FIT_ONLY.get(name, {}))
  plan = lambda **changes: module.private_plan(problem, **dict(dict(passes=2, runs=1, epsilon=1.0), **changes),
                                               **hyper)
  assert plan().cache_key == plan().cache_key
  assert plan().cache_key == ("plan", plan().ledger(1.0), plan().ledger(2.0))
  assert plan(passes=3).cache_key != plan().cache_key
  assert plan(runs=2).cache_key != plan().cache_key


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dp_cd", "dp_sgd"])
def test_every_solver_fit_takes_a_prior_and_targets(name):
  """DP-CD and DP-SGD gained prior and targets from the generic fit: K runs are K times the steps."""
  module, _, options, _ = SOLVERS[name]
  problem = _problem("logistic")
  targets = np.stack([np.asarray(problem.y), -np.asarray(problem.y)])
  prior = dg.privacy.Ledger.of(("feature scales", dg.privacy.events.PureDp(0.1), 1))
  result = module.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2, prior=prior, targets=targets,
                      **options)
  assert result.w.shape == (2, problem.num_features)
  ran = base.total_steps(module.SOLVER, problem, 2, **options)
  label = {"dp_cd": "update", "dp_sgd": "step"}[name]
  counts = {e.label: e.count for e in result.privacy.entries}
  assert counts["feature scales"] == 1 and counts[label] == 2 * ran, counts
  assert result.privacy.epsilon <= 1.0
  alone = module.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2, **options)
  assert float(result.params.noise) > float(alone.params.noise)  # two runs, less budget each


def test_a_callable_step_size_is_called_once_at_the_calibrated_multiplier():
  """The calibration's probes read only the ledger: DP-GCD's step size as a function of the update
  multiplier (the estimators' regressor caps the noise a step adds with one) is evaluated once."""
  calls = []

  def step_size(update_noise):
    calls.append(float(update_noise))
    return 0.5

  result = dg.dp_gcd.fit(_problem(), jax.random.key(0), epsilon=1.0, delta=1e-5, passes=3, step_size=step_size)
  assert len(calls) == 1, calls
  assert calls[0] == pytest.approx(float(result.params.update_noise), rel=1e-6)
  assert float(result.params.step_size) == 0.5


@pytest.mark.slow
def test_dp_sgd_maps_its_runs_and_each_equals_a_separate_run(caplog):
  """DP-SGD's runs of `targets` go one after the other (a vmap would run every branch of its
  sampler); run k is the run of target k with key fold_in(key, k)."""
  assert dg.dp_sgd.SOLVER.sequential_runs and not dg.dp_gcd.SOLVER.sequential_runs
  problem = _problem("logistic")
  targets = np.stack([np.asarray(problem.y), -np.asarray(problem.y)])
  key = jax.random.key(2)
  result = dg.fit(dg.dp_sgd, problem, key, epsilon=1.0, delta=1e-5, passes=2, targets=targets, batch_size=8)
  for k in range(2):
    alone = base.run(dg.dp_sgd.SOLVER, dataclasses.replace(problem, y=jnp.asarray(targets[k], problem.y.dtype)),
                     jax.random.fold_in(key, k), result.params, passes=2, batch_size=8)
    np.testing.assert_allclose(result.w[k], alone.w, rtol=1e-6, atol=1e-9)
  keys = jax.random.split(jax.random.key(3), 2)  # a batch of keys: mapped too, each the run of its key
  batch = dg.dp_sgd.fit(problem, keys, epsilon=1.0, delta=1e-5, passes=2, batch_size=8)
  one = dg.dp_sgd.fit(problem, keys[1], epsilon=1.0, delta=1e-5, passes=2, batch_size=8)
  np.testing.assert_allclose(batch.w[1], one.w, rtol=1e-6, atol=1e-9)
  caplog.clear()
  with jax.log_compiles(), caplog.at_level(logging.WARNING):  # a new budget with a batch of keys compiles nothing
    dg.dp_sgd.fit(problem, keys, epsilon=1.5, delta=1e-5, passes=2, batch_size=8)
  assert "XLA compilation" not in caplog.text, caplog.text[-500:]


@pytest.mark.parametrize("solver, kwargs, match", [
    (dg.dp_cd, dict(targets=np.zeros((0, 40))), "targets"),
    (dg.dp_gcd, dict(targets=np.zeros(40)), "targets"),
    (dg.dp_iht, dict(prior="spent", sparsity=2), "prior"),
    (dg.dp_sgd, dict(prelude=dg.solvers.budget.FeatureBoundRelease(0.1)), "prelude"),
])
def test_the_generic_fit_names_bad_targets_prior_and_prelude_before_any_work(monkeypatch, solver, kwargs, match):
  monkeypatch.setattr(dg.solvers.budget, "private_fit", lambda *a, **k: pytest.fail("work before validation"))
  with pytest.raises(ValueError, match=match):
    dg.fit(solver, _problem(), jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2, **kwargs)


def test_another_solvers_params_are_rejected_by_name():
  problem = _problem()
  with pytest.raises(ValueError, match="params"):
    dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_cd.Params(1.0, 1.0, 5.0), passes=PASSES)
  with pytest.raises(ValueError, match="params"):
    dg.dp_cd.run(problem, jax.random.key(0), dg.dp_sgd.Params(0.1, 1.0, 5.0), passes=PASSES)


def test_old_conventions_are_gone():
  problem, key, params = _problem(), jax.random.key(0), SOLVERS["dp_gcd"][1]
  with pytest.raises(ValueError, match="key"):  # a tuple of keys is not read as (problem, params, key)
    dg.dp_gcd.fit(problem, (jax.random.key(0), jax.random.key(1)), epsilon=1.0, delta=1e-5, passes=2)
  with pytest.raises(TypeError, match="steps"):
    dg.dp_gcd.run(problem, key, params, steps=5)  # pylint: disable=unexpected-keyword-arg
  with pytest.raises(ValueError, match="key"):
    dg.dp_gcd.run(problem, params, key, passes=2)  # the order of version 0.1
  assert not hasattr(base, "accepts_old_run_conventions") and not hasattr(base, "caller_stacklevel")


def test_privacy_warning_blames_the_caller_of_run():
  X = jax.random.normal(jax.random.key(0), (30, 4))
  problem = dg.make_problem(X, X[:, 0], "squared")  # smoothness from the raw data: not public
  with pytest.warns(dg.PrivacyLeakWarning) as caught:
    dg.dp_gcd.run(problem, jax.random.key(0), SOLVERS["dp_gcd"][1], passes=1)
  assert [w.filename for w in caught if issubclass(w.category, dg.PrivacyLeakWarning)] == [__file__]


@pytest.mark.parametrize("name", list(MODULES))
def test_an_invalid_traced_hyperparameter_fails_closed_under_vmap(name):
  """Host validation cannot see traced values: a negative or NaN value of any `Params` field, mapped
  by `vmap`, gives a NaN model for that entry, never a run with less noise than asked (one program: row
  0 valid, then each field at -1, then each at NaN)."""
  module, params, run_options, _ = SOLVERS[name]
  fields = [f for f in module.Params._fields if getattr(params, f) is not None]
  assert fields
  rows = [params] + [params._replace(**{f: bad}) for bad in (-1.0, np.nan) for f in fields]
  batch = jax.tree.map(lambda *values: jnp.asarray(values, jnp.float32), *rows)
  out = jax.vmap(lambda prm: module.run(_problem(), jax.random.key(0), prm, passes=1, **run_options).w)(batch)
  assert np.all(np.isfinite(out[0]))
  bad = [f"{f}={v}" for (v, f), row in zip(itertools.product((-1.0, np.nan), fields), out[1:], strict=True)
         if not np.all(np.isnan(row))]
  assert not bad, bad


@pytest.mark.parametrize("name", list(MODULES))
@pytest.mark.parametrize("change, match", [
    (dict(passes=0), "passes"), (dict(passes=1.5), "passes"), (dict(key=0), "key"),
    (dict(epsilon=-1.0), "epsilon"), (dict(epsilon="1"), "epsilon"), (dict(delta=1.0), "delta"),
])
def test_bad_input_is_rejected_by_name_before_any_work(monkeypatch, name, change, match):
  """Every solver's `run` and `fit` name a bad argument (the shared ones: passes, key, the budget)
  in a `ValueError` (a `TypeError` too for a non-number) raised before any program is built."""
  module, params, options, _ = SOLVERS[name]
  monkeypatch.setattr(base, "_compiled_passes", lambda *a, **k: pytest.fail("work before validation"))
  arguments = dict(dict(key=jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2), **change)
  with pytest.raises(ValueError, match=match):
    module.fit(_problem(), arguments["key"], epsilon=arguments["epsilon"], delta=arguments["delta"],
               passes=arguments["passes"], **options, **FIT_ONLY.get(name, {}))
  if match not in ("epsilon", "delta"):
    with pytest.raises(ValueError, match=match):
      module.run(_problem(), arguments["key"], params, passes=arguments["passes"], **options)

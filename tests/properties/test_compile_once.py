"""`dpgcd_jax.solvers.driver`, `dpgcd_jax._config`: compile once: the number of passes is a runtime value, and compiled
programs persist on disk.

Compilations are counted with the public counter ``dg.count_compilations`` (JAX's own monitoring:
``/jax/core/compile/backend_compile_duration`` fires once per XLA compilation;
``/jax/compilation_cache/cache_hits`` once per program loaded from the persistent cache instead)
and with the jitted program's ``_cache_size()``.
"""

import functools
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import _config
from dpgcd_jax import kernels
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import driver
from dpgcd_jax.solvers import guards

counting_compilations = dg.count_compilations  # the public counter, tested below


def test_the_public_counter_counts_each_new_program_once_and_changes_no_setting():
  before = {name: getattr(jax.config, name) for name in ("jax_compilation_cache_dir", "jax_enable_x64")}
  f = jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)
  x7, x9, x11 = np.ones(7, np.float32), np.ones(9, np.float32), np.ones(11, np.float32)
  with dg.count_compilations() as outer:
    f(x7)
    with dg.count_compilations() as inner:
      f(x7)  # cached: nothing compiled
      f(x9)  # a new shape: one program
    assert inner == ["jit(<lambda>)"]
  assert outer == ["jit(<lambda>)"] * 2
  f(x11)  # outside every block: not counted, the listeners are gone
  assert len(outer) == 2
  assert {name: getattr(jax.config, name) for name in before} == before


def _problem(n=40, p=6):
  X = jax.random.normal(jax.random.key(0), (n, p))
  return dg.make_problem(X, jnp.sign(X[:, 0] + 0.1), "logistic", l2=0.01, feature_bound=4.0)


# name: (module, params, run options)
SOLVERS = {
    "dp_gcd": (dg.dp_gcd, dg.dp_gcd.Params(0.8, 1.0, 4.0, 4.0), {}),
    "dp_gcd_gumbel": (dg.dp_gcd, dg.dp_gcd.Params(0.8, 1.0, 4.0, 4.0),
                      dict(selection="gumbel", update="gaussian", rule="gs-r")),
    "dp_cd": (dg.dp_cd, dg.dp_cd.Params(0.8, 1.0, 2.0), {}),
    "dp_sgd": (dg.dp_sgd, dg.dp_sgd.Params(0.1, 1.0, 1.0), dict(batch_size=8)),
}


@functools.partial(jax.jit, static_argnames=("solver", "passes", "options"))
def _static_run(solver, problem, key, params, *, passes, options):
  """The driver before passes became a runtime value (a scan over a static number of passes), as the reference."""
  options = dict(options)
  per_pass = solver.steps_per_pass(problem, **options)
  step_options = solver.step_options(problem, **options)

  def one_step(state, t):
    state, info = solver.step(driver.step_key(key, t), state, problem, params, **step_options)
    return state, getattr(info, "coordinate", None)

  def record(state):
    return kernels.objective(problem, state.w, getattr(state, "margins", None))

  def one_pass(state, pass_index):
    state, outputs = jax.lax.scan(one_step, state, pass_index * per_pass + jnp.arange(per_pass))
    return state, (outputs, record(state))

  state = solver.init(problem)
  first = record(state)
  state, (outputs, records) = jax.lax.scan(one_pass, state, jnp.arange(passes))
  coordinates = None if outputs is None else outputs.reshape(-1)
  return guards.fail_closed(params, state.w), coordinates, jnp.concatenate([first[None], records])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOLVERS))
def test_same_result_as_the_static_scan_for_the_same_key(name):
  module, params, options = SOLVERS[name]
  problem, key = _problem(), jax.random.key(3)
  cast = base.cast_params(module.SOLVER, problem, params)
  for passes in (1, 3):
    result = module.run(problem, key, params, passes=passes, store_objective=True, **options)
    w, coordinates, objective = _static_run(module.SOLVER, problem, key, cast, passes=passes,
                                            options=tuple(sorted(options.items())))
    np.testing.assert_array_equal(result.w, w)
    np.testing.assert_array_equal(result.trace.nonprivate_objective, objective)
    if coordinates is None:
      assert result.trace.coordinates is None
    else:
      np.testing.assert_array_equal(result.trace.coordinates, coordinates)
      assert result.trace.coordinates.shape == (base.total_steps(module.SOLVER, problem, passes, **options),)
    assert result.trace.nonprivate_objective.shape == (passes + 1,)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dp_gcd", "dp_cd", "dp_sgd"])
def test_new_passes_compile_nothing(name):
  module, params, options = SOLVERS[name]
  problem = _problem(n=48, p=7)  # shapes no other test uses: the first run compiles here
  runs = []
  with counting_compilations() as compiled:
    for passes, store in ((5, False), (7, False), (9, False), (5, True), (7, True), (9, True)):
      before = len(compiled)
      result = module.run(problem, jax.random.key(passes), params, passes=passes,
                          store_objective=store, **options)
      jax.block_until_ready(result)
      runs.append(len(compiled) - before)
      if store:
        assert result.trace.nonprivate_objective.shape == (passes + 1,)
  programs = [n for n in compiled if "_compiled_passes" in n]
  assert len(programs) == 2, compiled  # one program without the objective, one with it
  assert runs[1:3] == [0, 0] and runs[4:] == [0, 0], (runs, compiled)  # nothing at all: no slices either


@pytest.mark.slow
@pytest.mark.parametrize("keys", [1, 3], ids=["one key", "a batch of keys"])
@pytest.mark.parametrize("declared", [True, False], ids=["declared bound", "released bound"])
def test_fit_at_new_epsilons_and_passes_compiles_nothing(keys, declared):
  """Also with a batch of keys and with the feature bound released inside the fit (a batch was
  jitted as a new closure, compiled at every call; the release ran op by op)."""
  problem = _problem(n=56, p=5)
  if not declared:
    problem = dg.make_problem(np.asarray(problem.XT).T, problem.y, "squared")
  key = (lambda k: k) if keys == 1 else (lambda k: jax.random.split(k, keys))  # noqa: E731
  kwargs = dict(delta=1e-5)
  with counting_compilations() as first:
    dg.dp_gcd.fit(problem, key(jax.random.key(0)), epsilon=1.0, passes=5, **kwargs)
  assert len(first) <= 2 + (keys > 1), first  # the keys, the release, the run
  size = base._compiled_passes._cache_size()  # pylint: disable=protected-access
  with counting_compilations() as compiled:
    for epsilon, passes in ((0.5, 7), (2.0, 9), (5.0, 40), (1.0, 5)):
      result = dg.dp_gcd.fit(problem, key(jax.random.key(1)), epsilon=epsilon, passes=passes, **kwargs)
      jax.block_until_ready(result.w)
      assert result.trace.coordinates.shape == ((passes,) if keys == 1 else (keys, passes))
  assert compiled == [] and base._compiled_passes._cache_size() == size  # pylint: disable=protected-access


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")  # the raw-data diagnostics of small n
@pytest.mark.parametrize("bound, scaling", [(3.0, "auto"), (None, "auto"), (None, "private")],
                         ids=["declared", "released", "private-scales"])
def test_new_sizes_within_a_bucket_and_cross_validation_compile_nothing(bound, scaling):
  """Shape buckets: the estimator lays X out padded to public buckets
  (problem.bucket, dense.columns), and the releases read the padded layout with the true n
  and p, so new row counts, a few more or fewer columns, a new epsilon and the folds of a
  cross-validation compile nothing at all: not the run, not a release, not a small operation."""
  from sklearn.model_selection import cross_val_score  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  X = rng.normal(size=(700, 29))
  y = (X[:, 0] - X[:, 1] > 0).astype(int)
  make = lambda **kw: dg.estimators.DPGCDClassifier(classes=[0, 1], feature_bound=bound, scaling=scaling,
                                                    random_state=0, **kw)
  make(epsilon=2.0).fit(X[:600], y[:600])  # bucket (1024, 32): compiles (the typical size's search too)
  with counting_compilations() as compiled:
    for rows, columns in ((520, 29), (700, 29), (600, 27), (600, 30), (540, 28)):
      # per-feature scales too: their noise has one entry per row of the layout, p traced
      make(epsilon=2.0).fit(X[:rows, :columns], y[:rows])
  assert compiled == [], compiled
  with counting_compilations() as compiled:
    cross_val_score(make(), X[:450], y[:450], cv=5)  # folds of 360 rows: bucket 512, compiled once
  assert len(compiled) == 1 and "_compiled_passes" in compiled[0], compiled  # the releases and the runs
  with counting_compilations() as compiled:
    cross_val_score(make(), X[:440], y[:440], cv=5)  # folds of 352 rows: the same bucket
  assert compiled == [], compiled


def test_vmap_and_jit_over_keys_with_a_python_passes():
  module, params, _ = SOLVERS["dp_gcd"]
  problem = _problem()
  keys = jax.random.split(jax.random.key(0), 3)
  batched = jax.jit(jax.vmap(lambda k: module.run(problem, k, params, passes=4, store_objective=True)))(keys)
  assert batched.trace.coordinates.shape == (3, 4) and batched.trace.nonprivate_objective.shape == (3, 5)
  one = module.run(problem, keys[1], params, passes=4, store_objective=True)
  np.testing.assert_allclose(batched.w[1], one.w, rtol=1e-12)
  np.testing.assert_array_equal(batched.trace.coordinates[1], one.trace.coordinates)


def test_a_mapped_run_trimmed_outside_compiles_nothing_new():
  """The private driver's pattern: vmap over keys (or targets), padded records, cut on the host."""
  module, params, _ = SOLVERS["dp_gcd"]
  problem = _problem(n=44, p=6)
  cast = base.cast_params(module.SOLVER, problem, params)
  options = (("rule", "gs-s"), ("selection", "laplace"), ("update", "laplace"))
  keys = jax.random.split(jax.random.key(0), 2)

  def mapped(passes):
    run = lambda k: base.compiled_run(module.SOLVER, problem, k, cast, passes=passes, store_objective=True,
                                      options=options, trim=False)
    return base.trim_trace(jax.vmap(run)(keys), steps=passes, passes=passes)

  jax.block_until_ready(mapped(5))
  with counting_compilations() as compiled:
    for passes in (7, 9):
      result = mapped(passes)
      assert result.trace.coordinates.shape == (2, passes)
      assert result.trace.nonprivate_objective.shape == (2, passes + 1)
  assert compiled == []
  one = module.run(problem, keys[1], params, passes=9, store_objective=True)
  np.testing.assert_array_equal(result.trace.coordinates[1], one.trace.coordinates)


def test_pass_capacity_is_a_public_power_of_two_bucket():
  assert driver.pass_capacity(5, 1) == driver.pass_capacity(1000, 1) == 1024
  assert driver.pass_capacity(1025, 1) == 2048
  assert {driver.pass_capacity(p, 6) for p in (5, 7, 9)} == {256}
  assert driver.pass_capacity(3, 10**6) == 4 and driver.pass_capacity(4, 10**6) == 4
  for passes, per_pass in ((1, 1), (17, 3), (300, 40), (9, 5000)):
    capacity = driver.pass_capacity(passes, per_pass)
    assert capacity >= passes and capacity & (capacity - 1) == 0


# ----------------------------------------------------------------------------------------
# The persistent compilation cache: a second process loads what the first compiled.
# ----------------------------------------------------------------------------------------

CACHE_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax
    import numpy as np
    counts = dict(compiles=0, hits=0, writes=0)
    def on_duration(event, duration, **kwargs):
      if event == "/jax/core/compile/backend_compile_duration":
        counts["compiles"] += 1
    def on_event(event, **kwargs):
      if event == "/jax/compilation_cache/cache_hits":
        counts["hits"] += 1
      elif event == "/jax/compilation_cache/cache_misses":  # JAX's name for a write after a compile
        counts["writes"] += 1
    import dpgcd_jax as dg
    from dpgcd_jax import _config
    dg.enable_compilation_cache()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5))
    problem = dg.make_problem(X, np.sign(X[:, 0]), "logistic", feature_bound=3.0)
    keys = jax.random.key(0), jax.random.key(1)  # compiled before the first run: not counted
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    params = dg.dp_gcd.Params(1.0, 1.0, 3.0, 3.0)
    w = dg.dp_gcd.run(problem, keys[0], params, passes=5, store_objective=True).w
    fit = dg.dp_gcd.fit(problem, keys[1], epsilon=1.0, delta=1e-5, passes=6)
    counts["dir"] = _config.compilation_cache_dir()
    counts["w"] = np.asarray(w).tolist() + np.asarray(fit.w).tolist()
    print(json.dumps(counts))
""")


def _run_script(script, env):
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_compiles_nothing_new(tmp_path):
  env = {k: v for k, v in os.environ.items() if k not in (_config.OPT_OUT_ENV, _config.DIR_ENV)
         and not k.startswith("JAX_COMPILATION_CACHE")}
  env.update(JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(tmp_path))
  first = _run_script(CACHE_SCRIPT, env)
  second = _run_script(CACHE_SCRIPT, env)
  cache_dir = os.path.join(str(tmp_path), "dpgcd_jax", "jax")
  assert first["dir"] == second["dir"] == cache_dir and os.listdir(cache_dir)
  assert first["compiles"] > 0 and first["writes"] == first["compiles"] and first["hits"] == 0
  # The second process: every program comes from disk, nothing is compiled or written.
  assert second["hits"] == second["compiles"] == first["compiles"] and second["writes"] == 0
  assert first["w"] == second["w"]


CONFIG_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import jax
    from dpgcd_jax import _config
    out = {}
    os.environ[_config.OPT_OUT_ENV] = "1"
    out["opted_out"] = _config.enable_compilation_cache()
    _config._reset_for_tests()
    del os.environ[_config.OPT_OUT_ENV]
    jax.config.update("jax_enable_compilation_cache", False)
    out["disabled"] = _config.enable_compilation_cache()
    jax.config.update("jax_enable_compilation_cache", True)
    _config._reset_for_tests()
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.0)
    out["user"] = _config.enable_compilation_cache(sys.argv[2])
    out["user_after"] = jax.config.jax_compilation_cache_dir
    out["min_time"] = jax.config.jax_persistent_cache_min_compile_time_secs
    print(json.dumps(out))
""")


def test_the_cache_respects_opt_outs_and_the_users_own_directory(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != _config.OPT_OUT_ENV}
  env.update(JAX_PLATFORMS="cpu")
  mine, ours = str(tmp_path / "mine"), str(tmp_path / "ours")
  out = subprocess.run([sys.executable, "-c", CONFIG_SCRIPT, mine, ours], capture_output=True, text=True,
                       env=env, timeout=120)
  assert out.returncode == 0, out.stderr[-3000:]
  got = json.loads(out.stdout.strip().splitlines()[-1])
  assert got == dict(opted_out=None, disabled=None, user=mine, user_after=mine, min_time=2.0)
  assert not os.path.exists(ours)


def test_the_test_suite_opts_out():
  assert os.environ.get(_config.OPT_OUT_ENV) == "1"
  _config._reset_for_tests()  # pylint: disable=protected-access
  try:
    _config.enable_compilation_cache()
    assert _config.compilation_cache_dir() is None  # the opt-out decides: no user cache is written
  finally:
    _config._reset_for_tests()  # pylint: disable=protected-access


UNTOUCHED_SCRIPT = textwrap.dedent("""
    import json
    import jax
    import numpy as np
    from dpgcd_jax.estimators import DPGCDClassifier
    X = np.random.default_rng(0).normal(size=(80, 3))
    DPGCDClassifier(classes=[0, 1], feature_bound=3.0, random_state=0).fit(X, (X[:, 0] > 0).astype(int))
    print(json.dumps(dict(dir=jax.config.jax_compilation_cache_dir,
                          min_time=jax.config.jax_persistent_cache_min_compile_time_secs)))
""")


@pytest.mark.slow
def test_a_fit_leaves_jaxs_configuration_alone(tmp_path):
  """The cache is opt-in (`dpgcd_jax.enable_compilation_cache`): importing the library and
  fitting change no process-wide JAX setting and write nothing to the user's cache."""
  env = {k: v for k, v in os.environ.items() if k != _config.OPT_OUT_ENV and not k.startswith("JAX_COMPILATION")
         and k != "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"}
  env.update(JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(tmp_path))
  got = _run_script(UNTOUCHED_SCRIPT, env)
  assert got == dict(dir=None, min_time=1.0)
  assert not os.listdir(tmp_path)


def test_an_estimator_fit_at_a_new_epsilon_compiles_nothing():
  """Epsilon (hence the number of steps and every noise scale) is a runtime value."""
  from sklearn.datasets import load_breast_cancer  # pylint: disable=import-outside-toplevel

  from dpgcd_jax.estimators import DPGCDClassifier  # pylint: disable=import-outside-toplevel
  X, y = load_breast_cancer(return_X_y=True)
  DPGCDClassifier(classes=[0, 1], epsilon=1.0, random_state=0).fit(X, y)
  with counting_compilations() as names:
    for epsilon in (0.5, 2.0, 5.0):
      model = DPGCDClassifier(classes=[0, 1], epsilon=epsilon, random_state=0).fit(X, y)
  assert names == [], names
  assert model.n_iter_ != DPGCDClassifier(classes=[0, 1], epsilon=0.5).fit(X, y).n_iter_


FIT_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax
    from sklearn.datasets import load_breast_cancer
    from dpgcd_jax.estimators import DPGCDClassifier, DPGCDRegressor
    X, y = load_breast_cancer(return_X_y=True)
    names = []
    def on_duration(event, duration, **kwargs):
      if event == "/jax/core/compile/backend_compile_duration":
        names.append(kwargs.get("fun_name", "?"))
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    eval(sys.argv[1])  # the default random_state: a fresh key
    print(json.dumps(names))
""")


@pytest.mark.slow
@pytest.mark.parametrize("fit", [
    "DPGCDClassifier(epsilon=1.0).fit(X, y)",  # a released bound, one run
    "DPGCDRegressor(epsilon=1.0).fit(X, X[:, 0])",  # and a released target bound
    "DPGCDClassifier(epsilon=1.0, scaling='private', solver='dp_fw').fit(X, y)",  # per-feature scales, units
])
def test_a_first_estimator_fit_compiles_one_program(fit):
  """The first fit with default arguments on raw breast_cancer (a fresh key,
  released bounds, the runs) compiles ONE program (24 before: key splits, conversions, pads and
  transposes, each its own program; then 6, then 4): the releases are the prelude of the runs'
  program (`_released.Releases`), the layout is clipped in place inside it, the fresh key is
  made on the host, and host values go to the device by `device_put`, which compiles nothing."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
  env.update({_config.OPT_OUT_ENV: "1", "JAX_PLATFORMS": "cpu"})
  out = subprocess.run([sys.executable, "-c", FIT_SCRIPT, fit], capture_output=True, text=True, env=env,
                       timeout=300, check=True)
  names = json.loads(out.stdout.strip().splitlines()[-1])
  assert len(names) == 1 and "_compiled_passes" in names[0], names

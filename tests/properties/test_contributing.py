"""`dpgcd_jax.solvers`, `dpgcd_jax.mechanisms`, `dpgcd_jax.data` (their extension points): docs/contributing.md,
followed literally: its worked example is code that runs as the page says.

The page's code blocks titled with a path (``dpgcd_jax/solvers/noisy_gd.py``, ...) are complete
files. They are written into a temporary package ``toy_dp`` (the same paths, ``dpgcd_jax/``
replaced by ``toy_dp/``, the exports declared the way the page says), imported, and mounted
where the page puts them (``dpgcd_jax.solvers.noisy_gd``, ``dpgcd_jax.mechanisms``, the data set
registry); then the page's last block runs as written, with its stated outputs checked, and the
toy solver, mechanism and data set get the tests the page asks of a new one. So the page cannot
drift from the code: a renamed helper, a new protocol field or a wrong sentence about ``fit``
breaks this file.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import pathlib
import re
import sys
import textwrap
import tokenize

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpgcd_jax as dg
from dpgcd_jax import data
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import costs
from dpgcd_jax.privacy import events
from dpgcd_jax.solvers import driver

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "contributing.md"
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
FILES = {"dpgcd_jax/solvers/noisy_gd.py", "dpgcd_jax/mechanisms.py", "dpgcd_jax/data/_synthetic.py"}
PACKAGE = "toy_dp"
DATASET = "my_tiny_set"


def _page_blocks() -> tuple[dict[str, str], str]:
  """``({title: body} of the titled python blocks, the last untitled python block)``."""
  text = PAGE.read_text()
  section = text[text.index("## A worked example"):]
  section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
  files, untitled = {}, []
  for m in FENCE.finditer(section):
    if m.group("lang") != "python":
      continue
    title = re.search(r'title="([^"]+)"', m.group("attrs"))
    if title:
      files[title.group(1)] = m.group("body")
    else:
      untitled.append(m.group("body"))
  assert untitled, "the worked example has no usage block"
  return files, untitled[-1]


def _lazy_init(exports: dict[str, str]) -> str:
  """A package ``__init__`` whose exports are lazy, as in ``dpgcd_jax/__init__.py``."""
  return textwrap.dedent(f"""\
      from dpgcd_jax import _lazy

      _EXPORTS = {exports!r}
      __all__ = sorted(_EXPORTS)
      __getattr__, __dir__ = _lazy.attach(__name__, _EXPORTS)
  """)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
  """The page's files in a temporary package, imported and mounted where the page puts them."""
  files, usage = _page_blocks()
  assert set(files) == FILES, sorted(files)
  root = tmp_path_factory.mktemp("contributing")
  for title, body in files.items():
    path = root / PACKAGE / pathlib.Path(title).relative_to("dpgcd_jax")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
  # "one line in each _EXPORTS table": "<name>": "<package>.solvers.<name>:" (the module itself).
  (root / PACKAGE / "__init__.py").write_text(_lazy_init({"noisy_gd": f"{PACKAGE}.solvers.noisy_gd:"}))
  (root / PACKAGE / "solvers" / "__init__.py").write_text(
      _lazy_init({"noisy_gd": f"{PACKAGE}.solvers.noisy_gd:"}))
  (root / PACKAGE / "data" / "__init__.py").write_text("")
  from dpgcd_jax.data import _registry  # pylint: disable=g-import-not-at-top
  with pytest.MonkeyPatch.context() as mp:
    mp.syspath_prepend(str(root))
    package = importlib.import_module(PACKAGE)
    solver = package.noisy_gd  # through the lazy export line
    assert solver is importlib.import_module(f"{PACKAGE}.solvers").noisy_gd
    toy_mechanisms = importlib.import_module(f"{PACKAGE}.mechanisms")
    dataset_module = importlib.import_module(f"{PACKAGE}.data._synthetic")  # registers the set
    try:
      # Mount the files where the page puts them.
      mp.setitem(sys.modules, "dpgcd_jax.solvers.noisy_gd", solver)
      mp.setattr(dg.solvers, "noisy_gd", solver, raising=False)
      mp.setattr(mechanisms, "ExponentialNoisyMax", toy_mechanisms.ExponentialNoisyMax, raising=False)
      # "then ExponentialNoisyMax() in the tuple of SELECTIONS": its name becomes sugar.
      mp.setitem(mechanisms.SELECTIONS, "exponential", toy_mechanisms.ExponentialNoisyMax())
      # "and Cost("exponential", lambda b: PureDp(2 / b), 2.0) in SELECTIONS of privacy/costs.py".
      mp.setitem(costs.SELECTIONS, "exponential",
                 costs.Cost("exponential", lambda b: events.PureDp(2.0 / b), 2.0))
      yield dict(solver=solver, mechanisms=toy_mechanisms, data=dataset_module, usage=usage, root=root)
    finally:
      _registry._REGISTRY.pop(DATASET, None)  # pylint: disable=protected-access
      for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def _stated_outputs(source: str) -> dict[int, str]:
  found = {}
  for tok in tokenize.generate_tokens(io.StringIO(source).readline):
    if tok.type == tokenize.COMMENT and tok.string.startswith("# ->"):
      found[tok.start[0]] = tok.string[len("# ->"):].strip()
  return found


def _run_checked(source: str) -> dict:
  """Runs ``source`` statement by statement in a fresh namespace; checks ``# -> expected``.

  The convention of ``tests/properties/test_docs.py``: what a statement prints (then its value, for an
  expression whose value is not None) must match, with doctest's ELLIPSIS and whitespace rules.
  """
  import ast  # pylint: disable=g-import-not-at-top
  namespace = {"__name__": "__main__"}
  expected, checker = _stated_outputs(source), doctest.OutputChecker()
  tree = ast.parse(source)
  spans = [(stmt.lineno, stmt.end_lineno) for stmt in tree.body]
  assert all(any(a <= ln <= b for a, b in spans) for ln in expected), "a '# ->' is not on a statement"
  for stmt in tree.body:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
      if isinstance(stmt, ast.Expr):
        value = eval(compile(ast.Expression(stmt.value), PAGE.name, "eval"), namespace)  # noqa: S307
        if value is not None:
          print(value)
      else:
        exec(compile(ast.Module([stmt], []), PAGE.name, "exec"), namespace)  # noqa: S102
    for ln in [ln for ln in expected if stmt.lineno <= ln <= stmt.end_lineno]:
      want, got = expected[ln].strip() + "\n", buf.getvalue().strip() + "\n"
      assert checker.check_output(want, got, doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE), (
          f"line {ln}: expected {want!r}, got {got!r}")
  return namespace


# ----------------------------------------------------------------------------------------------
# The page as written.
# ----------------------------------------------------------------------------------------------


def test_every_file_the_page_cites_exists():
  text = PAGE.read_text()
  cited = set(re.findall(r"`((?:dpgcd_jax|tests|docs)/[\w/.<>]+\.(?:py|md))`", text)) - FILES
  assert {"dpgcd_jax/solvers/<name>.py", "dpgcd_jax/solvers/__init__.py", "docs/api/solvers.md",
          "tests/solvers/test_<name>.py", "tests/solvers/test_solver_protocol.py"} <= cited  # a solver's sites
  missing = sorted(path for path in cited if not (ROOT / path.replace("<name>", "dp_fw")).exists())
  assert not missing, f"contributing.md cites missing files: {missing}"
  from dpgcd_jax.solvers import dp_fw  # pylint: disable=g-import-not-at-top
  assert dp_fw.SOLVER.params is dp_fw.Params and callable(dp_fw.fw_ledger)  # the page's model
  assert {"SELECTIONS", "UPDATES"} <= set(vars(mechanisms))


@pytest.mark.slow
def test_the_usage_block_runs_as_written(toy):
  namespace = _run_checked(toy["usage"])
  assert namespace["result"].privacy.epsilon <= 1.0
  entries = {e.label: e.event for e in namespace["result"].privacy.entries}
  assert isinstance(entries["selection"], events.PureDp)  # the toy mechanism's event, in the ledger


# ----------------------------------------------------------------------------------------------
# What the page asks of a new solver, on the toy one.
# ----------------------------------------------------------------------------------------------


def _problem(penalty=None, n=60, p=5, bound=5.0):
  X = np.random.default_rng(0).normal(size=(n, p))
  y = X @ np.r_[1.0, -2.0, np.zeros(p - 2)] + 0.1 * np.random.default_rng(1).normal(size=n)
  return dg.make_problem(X, y, "squared", penalty=penalty, feature_bound=bound)


def test_toy_solver_follows_the_protocol(toy):
  module, problem = toy["solver"], _problem()
  assert module.SOLVER.params is module.Params and module.SOLVER.init is module.init
  params = module.Params(1.0, 1.0, 2.0)
  state, info = jax.jit(module.step)(jax.random.key(0), module.init(problem), problem,
                                     jax.tree.map(jnp.asarray, params))
  assert isinstance(state, module.State) and isinstance(info, module.Info) and state.w.shape == (5,)
  key, passes = jax.random.key(1), 4
  state = module.init(problem)
  cast = dg.solvers.base.cast_params(module.SOLVER, problem, params)
  for t in range(passes):
    state, _ = module.step(driver.step_key(key, t), state, problem, cast)
  result = module.run(problem, key, params, passes=passes)
  np.testing.assert_allclose(result.w, state.w, rtol=1e-12)
  assert result.trace.coordinates is None  # no `coordinate` in Info


def test_toy_solver_noise_free_limit_is_proximal_gradient_descent(toy):
  lam, bound, passes = 0.05, 5.0, 30
  problem = _problem(dg.penalties.L1(lam), bound=bound)
  result = toy["solver"].run(problem, jax.random.key(0), toy["solver"].Params(), passes=passes)
  X, y = np.asarray(problem.X), np.asarray(problem.y)
  assert np.max(np.abs(X)) < bound  # no feature clipped: the reference sees the same data
  gamma, w = 1.0 / bound**2, np.zeros(X.shape[1])  # M_j = beta B^2, public
  for _ in range(passes):
    v = w - gamma * X.T @ (X @ w - y) / len(y)
    w = np.sign(v) * np.maximum(np.abs(v) - gamma * lam, 0.0)
  np.testing.assert_allclose(result.w, w, rtol=1e-10, atol=1e-12)


def test_toy_solver_noise_has_the_calibrated_scale(toy):
  module, problem = toy["solver"], _problem(bound=5.0)
  n, p, clip, noise = 60, 5, 0.3, 2.0
  delta = np.sqrt(p) * 2.0 * clip * 5.0 / n  # ||(2 C_j / n)_j||_2 with C_j = clip B
  gamma = 1.0 / 25.0
  cast = dg.solvers.base.cast_params(module.SOLVER, problem, module.Params(1.0, clip, noise))
  clean = dg.solvers.base.cast_params(module.SOLVER, problem, module.Params(1.0, clip, 0.0))
  one = jax.jit(jax.vmap(lambda k, prm: module.step(k, module.init(problem), problem, prm)[0].w, (0, None)))
  keys = jax.random.split(jax.random.key(2), 1000)
  eta = (np.asarray(one(keys, clean)) - np.asarray(one(keys, cast))).ravel() / gamma
  assert stats.kstest(eta, "norm", args=(0.0, noise * delta)).pvalue > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert stats.kstest(eta, "norm", args=(0.0, wrong * noise * delta)).pvalue < 1e-6


def test_toy_solver_fit_accounts_for_every_step_within_the_budget(toy):
  module, problem = toy["solver"], _problem()
  result = module.fit(problem, jax.random.key(0), epsilon=0.5, delta=1e-6, passes=7)
  (entry,) = result.privacy.entries  # a declared feature bound: nothing else released
  assert entry.label == "step" and entry.count == 7 and isinstance(entry.event, events.Gaussian)
  assert result.privacy.epsilon <= 0.5 and result.privacy.delta == 1e-6
  assert result.privacy.epsilon >= 0.49  # the smallest noise meeting the budget, not a loose one
  assert np.all(np.isfinite(result.w))
  keys = jax.random.split(jax.random.key(0), 3)  # a batch of keys: independent private runs
  assert module.fit(problem, keys, epsilon=0.5, delta=1e-6, passes=7).w.shape == (3, 5)
  with pytest.raises(ValueError, match="epsilon"):
    module.fit(problem, jax.random.key(0), epsilon=-1.0, delta=1e-6, passes=7)
  with pytest.raises(ValueError, match="passes"):
    module.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-6, passes=0)


def test_toy_solver_fails_closed_on_invalid_traced_noise(toy):
  module, problem = toy["solver"], _problem()
  run = jax.vmap(lambda s: dg.solvers.base.compiled_run(
      module.SOLVER, problem, jax.random.key(0), module.Params(jnp.asarray(1.0), jnp.asarray(1.0), s),
      passes=2).w)
  w = np.asarray(run(jnp.asarray([1.0, -1.0, jnp.nan])))
  assert np.all(np.isfinite(w[0])) and np.all(np.isnan(w[1:]))


# ----------------------------------------------------------------------------------------------
# What the page asks of a new mechanism and a new data set, on the toy ones.
# ----------------------------------------------------------------------------------------------


def test_toy_mechanism_selection_probabilities_and_event(toy):
  mech = toy["mechanisms"].ExponentialNoisyMax()
  score = lambda g, w, M, penalty: g
  scores, scale = jnp.asarray([1.0, 0.4]), 0.5
  draw = jax.jit(jax.vmap(lambda k: mech.select(k, score, scores, None, None, None, scale, "gs-s")))
  picks = np.asarray(draw(jax.random.split(jax.random.key(0), 40_000)))
  # P(second) = P(E_2 - E_1 > d) = exp(-d) / 2, d = (s_1 - s_2) / scale (difference of exponentials).
  p_second = 0.5 * np.exp(-0.6 / scale)
  assert abs(np.mean(picks == 1) - p_second) < 4 * np.sqrt(p_second * (1 - p_second) / picks.size)
  assert int(mech.select(jax.random.key(0), score, scores, None, None, None, 0.0, "gs-s")) == 0
  assert mech.event(4.0) == events.PureDp(0.5) and mech.event(0.0) == events.PureDp(np.inf)
  assert mechanisms.selection(mech) is mech and mechanisms.selection("exponential") == mech


def test_toy_mechanism_plugs_into_dp_gcd_by_object_and_by_name(toy):
  problem = _problem()
  by_object = dg.dp_gcd.fit(problem, jax.random.key(3), epsilon=1.0, delta=1e-5, passes=6,
                            selection=toy["mechanisms"].ExponentialNoisyMax(), update="gaussian",
                            selection_share=0.3)  # zcdp_per_unit splits the budget
  by_name = dg.dp_gcd.fit(problem, jax.random.key(3), epsilon=1.0, delta=1e-5, passes=6,
                          selection="exponential", update="gaussian", selection_share=0.3)
  np.testing.assert_array_equal(by_object.w, by_name.w)
  assert by_object.privacy.entries == by_name.privacy.entries
  entries = {e.label: e for e in by_object.privacy.entries}
  assert isinstance(entries["selection"].event, events.PureDp) and entries["selection"].count == 6
  assert by_object.privacy.epsilon <= 1.0


def test_toy_data_set_is_registered_and_deterministic(toy):
  assert DATASET in data.names("generator")
  ds = data.get(DATASET, seed=1)
  again, other = data.get(DATASET, seed=1), data.get(DATASET, seed=2)
  assert (ds.n, ds.p, ds.true_nnz) == (200, 50, 5)
  np.testing.assert_array_equal(ds.X, again.X)
  assert not np.array_equal(ds.X, other.X)
  assert data.spec(DATASET).description == "A tiny sparse regression (this paragraph becomes the description)."
  assert toy["data"].my_tiny_set(seed=1, n=30).n == 30  # the decorated function returns the Dataset
  np.testing.assert_allclose(np.mean(ds.X**2, axis=0), 1.0)  # standardized columns
  result = toy["solver"].fit(dg.make_problem(ds.X, ds.y, ds.loss, penalty=ds.penalty), jax.random.key(0),
                             epsilon=2.0, delta=1e-5, passes=5)
  assert [e.label for e in result.privacy.entries] == ["feature bound", "sampler draws", "step"]  # 130 draws
  assert result.privacy.epsilon <= 2.0


def test_the_page_files_pass_lint(toy):
  import subprocess  # pylint: disable=g-import-not-at-top
  files = [str(p) for p in sorted((toy["root"] / PACKAGE).rglob("*.py")) if p.name != "__init__.py"]
  out = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(ROOT / "pyproject.toml"),
                        "--no-cache", *files], capture_output=True, text=True)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-1000:]

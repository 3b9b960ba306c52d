"""`dpgcd_jax.mechanisms`: the noise each solver's steps actually draw, observed at the mechanism layer, against the
ledger its plan charges: which mechanisms draw, with which multipliers, and how many values the secure samplers draw
per step (the plan's `DiscreteDraws`) and once per run (two-stage's peeling).

Every draw goes through the mechanism layer (`tests/privacy/test_mechanism_layer.py`), so wrapping its entry points
observes them all: the mechanism objects' noisy methods (role, name, values drawn, multiplier) and, underneath, the
samplers themselves (`mechanisms.draw`, `mechanisms._iid`, `discrete_noise.discrete_laplace` /
`discrete_gaussian`), whose totals must match the methods' (no draw goes around a recorded method). The steps run
eagerly under `jax.disable_jit()` from the solver's `init`: every `lax.scan` iteration, the `lax.cond` branch
taken and every sampler call happen as in the compiled run, so what is recorded is what the run draws."""

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import discrete_noise
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax import solvers
from dpgcd_jax.privacy import events
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import two_stage

PASSES, RUNS, STEPS_OBSERVED = 3, 2, 2
CASES = [  # (solver, hyperparameters of its private_plan besides the noise mode)
    ("dp_gcd", {}),
    ("dp_gcd", dict(curvature="released")),
    ("dp_cd", {}),
    ("dp_sgd", dict(batch_size=10)),
    ("dp_fw", dict(radius=1.0)),
    ("dp_iht", dict(sparsity=2)),
    ("two_stage", dict(sparsity=2)),
]


class Draw(NamedTuple):
  """One call of a mechanism's noisy method: `size` values drawn at `multiplier` (None: not passed as such)."""

  role: str  # "selection" or "update"
  name: str
  size: int
  multiplier: float | None


@dataclasses.dataclass
class Recorder:
  draws: list = dataclasses.field(default_factory=list)
  sampled: dict = dataclasses.field(default_factory=dict)  # sampler family -> values drawn

  def sample(self, family, size):
    self.sampled[family] = self.sampled.get(family, 0) + int(size)


_FAMILIES = {jax.random.laplace: "laplace", jax.random.gumbel: "gumbel", jax.random.normal: "gaussian"}


def _concrete(x):
  return None if isinstance(x, jax.core.Tracer) else float(np.asarray(x))


def _observe(monkeypatch, recorder):
  """Wraps every noisy entry point of `dpgcd_jax.mechanisms` to record into `recorder`."""

  def method(cls, name, role, size_of, multiplier_of=lambda args: None):
    original = getattr(cls, name)

    @functools.wraps(original)
    def wrapped(self, *args, **kwargs):
      recorder.draws.append(Draw(role, self.name, int(size_of(args)), multiplier_of(args)))
      return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, wrapped)

  size = lambda i: lambda args: np.size(args[i])  # noqa: E731
  method(mechanisms.LaplaceNoisyMax, "noisy_scores", "selection", size(2))  # (key, score, g, ...)
  method(mechanisms.GumbelMax, "noisy", "selection", size(1))  # (key, scores, scale)
  for cls in (mechanisms.LaplaceNoise, mechanisms.GaussianNoise):  # (key, shape, dtype, scale)
    method(cls, "noise", "update", lambda args: math.prod(args[1]))
  method(mechanisms.DiscreteLaplaceNoisyMax, "noisy_max", "selection", size(1),
         lambda args: _concrete(args[2]))  # (key, scores, multiplier, sensitivity)
  for cls in (mechanisms.DiscreteLaplaceNoise, mechanisms.DiscreteGaussianNoise):
    method(cls, "perturb", "update", size(1), lambda args: _concrete(args[2]))  # (key, value, multiplier, ...)
    method(cls, "perturb_integers", "update", size(1))  # (key, queries, integer scale)

  draw, iid = mechanisms.draw, mechanisms._iid

  def counted_draw(sampler, key, shape, dtype):
    recorder.sample(_FAMILIES[sampler], math.prod(shape))
    return draw(sampler, key, shape, dtype)

  def counted_iid(sampler, key, shape, dtype):
    if shape == ():  # an array goes through `draw`, counted there
      recorder.sample(_FAMILIES[sampler], 1)
    return iid(sampler, key, shape, dtype)

  monkeypatch.setattr(mechanisms, "draw", counted_draw)
  monkeypatch.setattr(mechanisms, "_iid", counted_iid)
  for family in ("discrete_laplace", "discrete_gaussian"):
    sampler = getattr(discrete_noise, family)

    def counted(key, scale, shape=(), sampler=jax.jit(sampler, static_argnums=2), family=family):
      recorder.sample(family, math.prod(shape))
      with jax.disable_jit(False):  # the sampler's own rejection loops, compiled: the steps run eagerly
        return sampler(key, scale, shape)

    monkeypatch.setattr(discrete_noise, family, counted)


def _problem(n=40, p=3):
  rng = np.random.default_rng(0)
  X = rng.normal(size=(n, p))
  return dg.make_problem(X, np.sign(X[:, 0] + 0.1), loss="logistic", feature_bound=4.0)


def _plan(name, hyper, secure, problem):
  if name == "two_stage":  # its noise mode is its mechanisms
    hyper = dict(hyper, **(dict(selection="discrete_laplace", update="discrete_laplace") if secure else {}))
  else:
    hyper = dict(hyper, secure_noise=secure)
  return getattr(solvers, name).private_plan(problem, passes=PASSES, runs=RUNS, **hyper)


def _run_steps(solver, problem, params, options, steps, recorder):
  """`steps` steps from `init`, eagerly: returns the draws recorded by each step."""
  problem = kernels.prepared(problem, options.get("clipping_mode", "coordinate"))
  step_options = solver.step_options(problem, **options)
  key = jax.random.key(0)
  per_step = []
  with jax.disable_jit():
    state = solver.init(problem)
    for t in range(steps):
      start = len(recorder.draws)
      state, _ = solver.step(jax.random.fold_in(key, t), state, problem, params, **step_options)
      per_step.append(recorder.draws[start:])
  return per_step


def _mechanism(role, name):
  return (mechanisms.SELECTIONS if role == "selection" else mechanisms.UPDATES)[name]


_SAMPLED = {events.PoissonSampledGaussian: "gaussian", events.PoissonSampledDiscreteGaussian: "discrete_gaussian"}


def _charged_by(event):
  """The (role, name) of the mechanisms whose use the ledger's `event` can describe."""
  if type(event) in _SAMPLED:  # DP-SGD's step: its update under Poisson sampling
    return {("update", _SAMPLED[type(event)])}
  return {(role, m.name) for role, table in (("selection", mechanisms.SELECTIONS), ("update", mechanisms.UPDATES))
          for m in table.values() if type(m.event(1.0)) is type(event)}


def _ledger_side(ledger, steps):
  """(per-step events, per-run events, sampler draws per step, sampler draws per run) of a plan's ledger for
  `RUNS` runs of `steps` steps in all: an entry counted a multiple of `steps` times is charged per step."""
  step_events, run_events, step_draws, run_draws = [], [], 0, 0
  for e in ledger:
    per_step = e.count % steps == 0
    if isinstance(e.event, events.DiscreteDraws):
      if per_step:
        step_draws += e.event.draws * e.count // steps
      else:
        assert e.count % RUNS == 0, e
        run_draws += e.event.draws * e.count // RUNS
    elif not isinstance(e.event, events.TotalVariation):  # DP-SGD's Poisson sampler: no mechanism draw
      (step_events if per_step else run_events).append(e.event)
  return step_events, run_events, step_draws, run_draws


def _same_event(a, b):
  return type(a) is type(b) and dataclasses.astuple(a) == pytest.approx(dataclasses.astuple(b), rel=1e-5)


def _check(observed, charged, per_entry):
  """The draws of a step (or of a run's first draws) against the ledger's events of that step (or run);
  `per_entry`: `(role, name) -> f`, an update of a vector whose event is that of multiplier `m / f` on each entry."""
  used = {(d.role, d.name) for d in observed}
  explained = set().union(*[_charged_by(e) for e in charged]) if charged else set()
  assert used <= explained, (used, charged)  # every mechanism that draws is charged
  for e in charged:  # every charged event is a mechanism that draws
    assert used & _charged_by(e), (e, used)
  for d in observed:  # a multiplier the step passes as such is the one the ledger charges
    if d.multiplier is not None:
      multiplier = d.multiplier / per_entry.get((d.role, d.name), 1.0)
      assert any(_same_event(_mechanism(d.role, d.name).event(multiplier), e) for e in charged), (d, charged)


def _discrete(draws):
  return sum(d.size for d in draws if mechanisms.is_discrete(_mechanism(d.role, d.name)))


def observe(name, hyper, secure, monkeypatch):
  """The plan of `name` and the draws of its first `STEPS_OBSERVED` steps at the plan's multipliers."""
  problem = _problem()
  plan = _plan(name, hyper, secure, problem)
  solver = getattr(solvers, name).SOLVER
  params = base.cast_params(solver, problem, plan.run_params(1.5))
  recorder = Recorder()
  _observe(monkeypatch, recorder)
  per_step = _run_steps(solver, problem, params, plan.options, STEPS_OBSERVED, recorder)
  steps = base.total_steps(solver, problem, PASSES, **plan.options) * RUNS
  return plan.ledger(1.5), steps, per_step, recorder


def test_the_cases_cover_every_solver():
  assert {name for name, _ in CASES} == set(solvers.REGISTRY)


@pytest.mark.parametrize("secure", [False, True], ids=["float", "secure"])
@pytest.mark.parametrize(("name", "hyper"), CASES, ids=[f"{n}-{'-'.join(map(str, h.values()))}" if h else n for n, h in CASES])
def test_each_step_draws_what_the_ledger_charges(name, hyper, secure, monkeypatch):
  ledger, steps, per_step, recorder = observe(name, hyper, secure, monkeypatch)
  step_events, run_events, step_draws, run_draws = _ledger_side(ledger, steps)
  first, *later = per_step
  # DP-IHT's secure values: s released entries, each drawn at sigma sqrt(s) (rounded up by 2^-20), charged as
  # one DiscreteGaussian(sigma) for the vector.
  per_entry = {("update", "discrete_gaussian"): math.sqrt(hyper["sparsity"])} if name == "dp_iht" else {}
  # The first step of a run also makes the run's one-off draws (two-stage's support); the later ones do not.
  once = [d for d in first if d not in later[0]] if run_events else []
  for draws in later:
    assert sorted(draws) == sorted(later[0])
    _check(draws, step_events, per_entry)
    assert _discrete(draws) == step_draws
  _check(once, run_events, per_entry)
  assert _discrete(first) == step_draws + run_draws
  # No draw goes around a recorded method: the samplers drew as many values as the methods say.
  by_family = {}
  for d in (d for draws in per_step for d in draws):
    by_family[d.name] = by_family.get(d.name, 0) + d.size
  assert recorder.sampled == by_family
  # Secure noise draws no float noise, and float noise no discrete noise (nor any charge for it).
  kinds = {mechanisms.is_discrete(_mechanism(d.role, d.name)) for draws in per_step for d in draws}
  assert kinds == {secure}
  assert (step_draws + run_draws > 0) == secure

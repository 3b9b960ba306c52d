"""`dpgcd_jax.mechanisms`: the noise each solver's steps actually draw, observed at the mechanism layer, against the
ledger its plan charges: which mechanisms draw, how many uses of each a step makes, with which multipliers, and how
many values the secure samplers draw per step (the plan's `DiscreteDraws`) and once per run (two-stage's peeling).

Every draw goes through the mechanism layer (`tests/privacy/test_mechanism_layer.py`), so wrapping its entry points
observes them all: the mechanism objects' noisy methods (role, name, values drawn, multiplier) and, underneath, the
samplers themselves (`mechanisms.draw`, `mechanisms._iid`, `discrete_noise.discrete_laplace` /
`discrete_gaussian`), whose totals must match the methods' (no draw goes around a recorded method). The steps run
eagerly under `jax.disable_jit()` from the solver's `init`: every `lax.scan` iteration and the `lax.cond` branch
taken run as in the compiled run, so what is recorded is what the run draws. The discrete samplers' values are
replaced by zeros of the drawn shape (their rejection loops, tested in `tests/privacy/test_noise.py`, are below the
layer observed here, and eager they would take a minute)."""

import collections
import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import discrete_noise
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax import peeling
from dpgcd_jax import solvers
from dpgcd_jax.privacy import events
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import greedy

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
  """One call of a mechanism's noisy method: `size` values drawn, `uses` uses of the mechanism (a peeling's one
  Gumbel draw is its `s` rounds, `dpgcd_jax.peeling.peel`), at `multiplier` (None: not passed as such)."""

  role: str  # "selection" or "update"
  name: str
  size: int
  multiplier: float | None
  uses: int = 1


@dataclasses.dataclass
class Recorder:
  draws: list = dataclasses.field(default_factory=list)
  sampled: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # sampler -> values
  peeling: tuple | None = None  # (rounds, multiplier) inside `peeling.peel`


_FAMILIES = {jax.random.laplace: "laplace", jax.random.gumbel: "gumbel", jax.random.normal: "gaussian"}


def _concrete(x):
  return None if isinstance(x, jax.core.Tracer) else float(np.asarray(x))


def _observe(monkeypatch, recorder):
  """Wraps every noisy entry point of `dpgcd_jax.mechanisms` to record into `recorder`."""

  def method(cls, name, role, size_of, multiplier_of=lambda args: None):
    original = getattr(cls, name)

    @functools.wraps(original)
    def wrapped(self, *args, **kwargs):
      uses, multiplier = recorder.peeling or (1, multiplier_of(args))
      recorder.draws.append(Draw(role, self.name, int(size_of(args)), multiplier, uses))
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

  peel = peeling.peel

  def observed_peel(key, scores, sparsity, multiplier, sensitivity):
    recorder.peeling = (sparsity, _concrete(multiplier))
    try:
      return peel(key, scores, sparsity, multiplier, sensitivity)
    finally:
      recorder.peeling = None

  monkeypatch.setattr(peeling, "peel", observed_peel)
  draw, iid = mechanisms.draw, mechanisms._iid

  def counted_draw(sampler, key, shape, dtype):
    recorder.sampled[_FAMILIES[sampler]] += math.prod(shape)
    return draw(sampler, key, shape, dtype)

  def counted_iid(sampler, key, shape, dtype):
    if shape == ():  # an array goes through `draw`, counted there
      recorder.sampled[_FAMILIES[sampler]] += 1
    return iid(sampler, key, shape, dtype)

  monkeypatch.setattr(mechanisms, "draw", counted_draw)
  monkeypatch.setattr(mechanisms, "_iid", counted_iid)
  for family in ("discrete_laplace", "discrete_gaussian"):

    def counted(key, scale, shape=(), family=family):
      recorder.sampled[family] += math.prod(shape)
      return jnp.zeros(shape, jnp.int32)  # the count is observed; the values (the rejection loops) need not be

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


def _run_steps(solver, problem, params, options, recorder):
  """`STEPS_OBSERVED` steps from `init`, eagerly: the draws recorded by each step."""
  problem = kernels.prepared(problem, options.get("clipping_mode", "coordinate"))
  step_options = solver.step_options(problem, **options)
  key = jax.random.key(0)
  per_step = []
  with jax.disable_jit():
    state = solver.init(problem)
    for t in range(STEPS_OBSERVED):
      start = len(recorder.draws)
      state, _ = solver.step(jax.random.fold_in(key, t), state, problem, params, **step_options)
      per_step.append(recorder.draws[start:])
  return per_step


def _mechanism(role, name):
  return (mechanisms.SELECTIONS if role == "selection" else mechanisms.UPDATES)[name]


_SAMPLED = {events.PoissonSampledGaussian: "gaussian", events.PoissonSampledDiscreteGaussian: "discrete_gaussian"}


def _charged_by(event):
  """The (role, name) of the mechanisms one use of which the ledger's `event` can describe."""
  if type(event) in _SAMPLED:  # DP-SGD's step: its update under Poisson sampling
    return {("update", _SAMPLED[type(event)])}
  return {(role, m.name) for role, table in (("selection", mechanisms.SELECTIONS), ("update", mechanisms.UPDATES))
          for m in table.values() if type(m.event(1.0)) is type(event)}


class Charged(NamedTuple):
  """What a plan's ledger charges one step (or one run) of `RUNS` runs of `steps` steps in all."""

  events: list  # (event, uses)
  draws: int  # the secure samplers' values (`DiscreteDraws`)


def _ledger_side(ledger, steps):
  """(per step, per run) of a plan's ledger: an entry counted a multiple of `steps` times is charged per step,
  one counted a multiple of `RUNS` times per run."""
  sides = {True: Charged([], 0), False: Charged([], 0)}
  for e in ledger:
    if isinstance(e.event, events.TotalVariation):  # DP-SGD's Poisson sampler: no mechanism draw
      continue
    per_step = e.count % steps == 0
    assert per_step or e.count % RUNS == 0, e
    uses = e.count // (steps if per_step else RUNS)
    if isinstance(e.event, events.DiscreteDraws):
      sides[per_step] = sides[per_step]._replace(draws=sides[per_step].draws + e.event.draws * uses)
    else:
      sides[per_step].events.append((e.event, uses))
  return sides[True], sides[False]


def _same_event(a, b):
  return type(a) is type(b) and dataclasses.astuple(a) == pytest.approx(dataclasses.astuple(b), rel=1e-5)


def _check(observed, charged, per_entry):
  """The draws of a step (or a run's one-off draws) against the ledger's charge for that step (or run);
  `per_entry`: `(role, name) -> f` for an update of a vector charged as one use of multiplier `m / f`."""
  used = collections.Counter()
  for d in observed:
    used[d.role, d.name] += d.uses
  charged_uses = collections.Counter()
  for event, uses in charged.events:
    (mechanism,) = _charged_by(event) & set(used) or [("nothing drawn", repr(event))]
    charged_uses[mechanism] += uses
  # the mechanisms that draw, each as many times as the ledger charges
  assert used == charged_uses, f"uses drawn {dict(used)} != uses charged {dict(charged_uses)}"
  drawn = sum(d.size for d in observed if mechanisms.is_discrete(_mechanism(d.role, d.name)))
  assert drawn == charged.draws, f"secure values drawn {drawn} != charged {charged.draws}"
  for d in observed:  # a multiplier the step passes as such is the one the ledger charges
    if d.multiplier is not None:
      multiplier = d.multiplier / per_entry.get((d.role, d.name), 1.0)
      assert any(_same_event(_mechanism(d.role, d.name).event(multiplier), e) for e, _ in charged.events), d


def observe(name, hyper, secure, monkeypatch):
  """(the plan's ledger, its steps in all, the draws of each of the first `STEPS_OBSERVED` steps, the recorder)."""
  problem = _problem()
  plan = _plan(name, hyper, secure, problem)
  solver = getattr(solvers, name).SOLVER
  params = base.cast_params(solver, problem, plan.run_params(1.5))
  recorder = Recorder()
  _observe(monkeypatch, recorder)
  per_step = _run_steps(solver, problem, params, plan.options, recorder)
  steps = base.total_steps(solver, problem, PASSES, **plan.options) * RUNS
  return plan.ledger(1.5), steps, per_step, recorder


def check_draws(name, hyper, secure, monkeypatch):
  """Runs the first steps of `name` with its draws observed and asserts they are what its ledger charges."""
  ledger, steps, per_step, recorder = observe(name, hyper, secure, monkeypatch)
  per_step_charge, per_run_charge = _ledger_side(ledger, steps)
  # DP-IHT's secure values: s released entries, each drawn at sigma sqrt(s) (rounded up by 2^-20), charged as one
  # DiscreteGaussian(sigma) for the vector.
  per_entry = {("update", "discrete_gaussian"): math.sqrt(hyper["sparsity"])} if name == "dp_iht" else {}
  first, *later = per_step
  for draws in later:  # a later step draws what the ledger charges each step
    _check(draws, per_step_charge, per_entry)
  # The first step also makes the run's one-off draws (two-stage's support), the same step draws besides.
  once = list((collections.Counter(first) - collections.Counter(later[0])).elements())
  assert collections.Counter(first) - collections.Counter(once) == collections.Counter(later[0])
  _check(once, per_run_charge, per_entry)
  # No draw goes around a recorded method: the samplers drew as many values as the methods say.
  by_name = collections.Counter()
  for d in (d for draws in per_step for d in draws):
    by_name[d.name] += d.size
  assert recorder.sampled == by_name, f"sampled {dict(recorder.sampled)} != drawn by the mechanisms {dict(by_name)}"
  # Secure noise draws no float noise.
  assert {mechanisms.is_discrete(_mechanism(d.role, d.name)) for draws in per_step for d in draws} == {secure}


def test_the_cases_cover_every_solver():
  assert {name for name, _ in CASES} == set(solvers.REGISTRY)


@pytest.mark.parametrize("secure", [False, True], ids=["float", "secure"])
@pytest.mark.parametrize(("name", "hyper"), CASES, ids=["-".join([n, *map(str, h.values())]) for n, h in CASES])
def test_each_step_draws_what_the_ledger_charges(name, hyper, secure, monkeypatch):
  check_draws(name, hyper, secure, monkeypatch)


@pytest.mark.parametrize("secure", [False, True], ids=["float", "secure"])
def test_an_extra_noise_vector_is_caught(secure, monkeypatch):
  # DP-GCD's update drawn twice (the second noise thrown away): one use and one draw more than charged.
  privatize = greedy.privatize

  def twice(key, *args, **kwargs):
    privatize(jax.random.fold_in(key, 1), *args, **kwargs)
    return privatize(key, *args, **kwargs)

  monkeypatch.setattr(greedy, "privatize", twice)
  with pytest.raises(AssertionError, match="uses drawn"):
    check_draws("dp_gcd", {}, secure, monkeypatch)


def test_a_ledger_charge_off_by_one_is_caught(monkeypatch):
  # The secure samplers' draws of a DP-GCD step charged as p + 2 instead of p + 1.
  step_draws = dp_gcd.step_draws
  monkeypatch.setattr(dp_gcd, "step_draws", lambda *args, **kwargs: step_draws(*args, **kwargs) + 1)
  with pytest.raises(AssertionError, match="secure values drawn 4 != charged 5"):
    check_draws("dp_gcd", {}, True, monkeypatch)


@pytest.mark.parametrize("secure", [False, True], ids=["float", "secure"])
def test_a_noise_vector_drawn_twice_inside_a_mechanism_is_caught(secure, monkeypatch):
  # DP-SGD's noise vector drawn twice by its mechanism's method (below the recorded calls): the samplers' totals.
  cls, name = (mechanisms.DiscreteGaussianNoise, "perturb_integers") if secure else (mechanisms.GaussianNoise, "noise")
  original = getattr(cls, name)

  def twice(self, key, *args):
    original(self, jax.random.fold_in(key, 1), *args)
    return original(self, key, *args)

  monkeypatch.setattr(cls, name, twice)
  with pytest.raises(AssertionError, match="sampled"):
    check_draws("dp_sgd", dict(batch_size=10), secure, monkeypatch)


def test_a_ledger_use_too_many_is_caught(monkeypatch):
  # A float DP-CD ledger charging one more update per step than the step draws.
  ledger = budget.Plan.ledger

  def one_more(plan, scale):
    spent = ledger(plan, scale)
    (update,) = [e for e in spent if e.label == "update"]
    return spent.add("update", update.event, update.count)

  monkeypatch.setattr(budget.Plan, "ledger", one_more)
  with pytest.raises(AssertionError, match="uses drawn"):
    check_draws("dp_cd", {}, False, monkeypatch)

"""Every mechanism of the registry (`dpgcd_jax.mechanisms.SELECTIONS`, `UPDATES`) meets one
contract: reproducible from its key, the same under jit and vmap as call by call, failing
closed on an invalid multiplier or sensitivity whatever the data, noise at the scale its event
is charged for, and (discrete mechanisms) a release that is a function of one integer on the
public grid. A mechanism added to the registry is checked here without a new test."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import discrete_grid
from dpgcd_jax import host_release
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import events
from dpgcd_jax.solvers import greedy

UPDATES = list(mechanisms.UPDATES)
SELECTIONS = list(mechanisms.SELECTIONS)
KEYS = jax.random.split(jax.random.key(11), 1000)


def _release(name, key, value, multiplier, sensitivity):
  return host_release.release(mechanisms.UPDATES[name], key, jnp.asarray(value, jnp.float32), multiplier,
                            sensitivity)


@functools.partial(jax.jit, static_argnums=0)
def _select(name, key, g, multiplier, sensitivity=0.01):
  p = g.shape[0]
  return greedy.select_checked(key, g, jnp.zeros(p), jnp.ones(p), dg.penalties.Zero(), multiplier, sensitivity,
                               selection=name, rule="gs-s")


@pytest.mark.slow
@pytest.mark.parametrize("name", UPDATES)
def test_an_update_is_its_key_and_the_same_under_vmap(name):
  draws = jax.vmap(lambda k: _release(name, k, 0.3, 2.0, 0.01))(KEYS[:64])
  one_by_one = np.array([float(_release(name, k, 0.3, 2.0, 0.01)) for k in KEYS[:64]])
  if mechanisms.is_discrete(mechanisms.UPDATES[name]):
    np.testing.assert_array_equal(np.asarray(draws), one_by_one)
  else:  # XLA may fuse value + scale z into one FMA in the batched program and not in the other:
    # the same draw up to the last rounding (at multiplier 3.0, 3 of 64 draws moved by 1 ulp)
    np.testing.assert_allclose(np.asarray(draws), one_by_one, rtol=2.0**-22, atol=0.0)
  assert len(np.unique(one_by_one)) > 32  # the key matters


@pytest.mark.parametrize("name", UPDATES)
@pytest.mark.parametrize(("multiplier", "sensitivity"), [(np.nan, 0.01), (-1.0, 0.01), (2.0, np.nan),
                                                         (2.0, -0.01)])
def test_an_update_fails_closed(name, multiplier, sensitivity):
  """NaN, never the value itself or a value with less noise than charged (an infinite
  multiplier releases noise alone: +-inf for the float ones, NaN for the discrete ones)."""
  for value in (0.3, -7.0):
    assert np.isnan(float(_release(name, KEYS[0], value, multiplier, sensitivity)))


@pytest.mark.slow
@pytest.mark.parametrize("name", UPDATES)
def test_update_noise_has_the_scale_its_event_is_charged_for(name):
  """The noise's standard deviation against the one of the event charged for `multiplier`
  (Laplace: `eps = 1 / b`, scale `Delta / eps`; Gaussian: `sigma Delta`), within sampling
  error; the discrete ones are at most `1 + (2 b + 1) / 8192` above it (their integer scale
  rounds up)."""
  mechanism, multiplier, sensitivity = mechanisms.UPDATES[name], 2.0, 0.01
  noise = np.asarray(jax.vmap(lambda k: _release(name, k, 0.3, multiplier, sensitivity))(KEYS)) - np.float32(0.3)
  event = mechanism.event(multiplier)
  if isinstance(event, (events.PureDp, events.DiscreteLaplace)) or "laplace" in name:
    charged = np.sqrt(2.0) * multiplier * sensitivity  # Laplace(b Delta): std sqrt(2) b Delta
  else:
    charged = multiplier * sensitivity
  ratio = np.std(noise) / charged
  assert 0.9 < ratio < 1.1 * (1 + (2 * multiplier + 1) / 8192), (name, ratio)  # 1000 draws: about 3 standard errors


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in UPDATES if mechanisms.is_discrete(mechanisms.UPDATES[n])])
def test_a_discrete_release_is_one_integer_on_the_public_grid(name):
  multiplier, sensitivity = 2.0, 0.01
  gran = float(discrete_grid.grid_step(jnp.asarray(multiplier * sensitivity, jnp.float32)))
  for value in (0.3, -1234.5678, 1e-9):
    out = np.asarray(jax.vmap(lambda k, v=value: _release(name, k, v, multiplier, sensitivity))(KEYS[:200]),
                     np.float64)
    k = out / gran
    np.testing.assert_array_equal(k, np.round(k))  # exactly k gran: no float residue of the value


@pytest.mark.slow
@pytest.mark.parametrize("name", SELECTIONS)
def test_a_selection_is_its_key_and_the_same_under_vmap(name):
  g = jnp.asarray(np.random.default_rng(0).normal(size=20) * 0.02, jnp.float32)
  picks = jax.vmap(lambda k: _select(name, k, g, 1.0))(KEYS[:64])
  one_by_one = [tuple(map(int, _select(name, k, g, 1.0))) for k in KEYS[:64]]
  assert [tuple(map(int, pair)) for pair in zip(*picks, strict=True)] == one_by_one
  assert len({j for j, _ in one_by_one}) > 3  # the key matters at this noise
  assert all(ok == 1 for _, ok in one_by_one)


@pytest.mark.parametrize("name", SELECTIONS)
@pytest.mark.parametrize("multiplier", [np.nan, -1.0, np.inf])
def test_a_selection_fails_closed_whatever_the_scores(name, multiplier):
  """An invalid multiplier: the index does not depend on the scores (or the draw says it
  failed, and the solvers release NaN)."""
  rng = np.random.default_rng(1)
  picks = set()
  for _ in range(5):
    g = jnp.asarray(rng.normal(size=20), jnp.float32)
    j, ok = _select(name, KEYS[3], g, multiplier)
    picks.add(int(j) if bool(ok) else "failed")
  assert len(picks) == 1, picks


@pytest.mark.slow
@pytest.mark.parametrize("name", SELECTIONS)
def test_a_selection_at_its_charged_epsilon_prefers_the_top_score(name):
  """One score `s Delta` above nine at 0: an `eps = 2 / b` selection picks it more often than
  each other one, by a frequency ratio of at most `exp(2 s / b)` (the DP bound for scores
  `s Delta` apart; the exponential mechanism's is `exp(s / b)`)."""
  b, s = 2.0, 1.0
  g = jnp.asarray([s * 0.01] + [0.0] * 9, jnp.float32)  # GS-s scores |g| / sqrt(M), Delta = 0.01
  picks = np.asarray(jax.vmap(lambda k: _select(name, k, g, b)[0])(KEYS))
  top, others = np.mean(picks == 0), np.mean(picks != 0) / 9
  assert 1.0 < top / others < np.exp(2 * s / b) * 1.15, (name, top, others)


def test_the_float_noise_scale_fails_closed():
  assert np.isnan(float(clipping.noise_scale(jnp.asarray(-1.0), jnp.asarray(0.1))))
  assert float(clipping.noise_scale(jnp.asarray(0.0), jnp.asarray(jnp.inf))) == 0.0  # the non-private limit


@pytest.mark.parametrize("name,table", [(n, mechanisms.UPDATES) for n in UPDATES]
                         + [(n, mechanisms.SELECTIONS) for n in SELECTIONS])
def test_a_mechanism_and_its_cost_agree_on_discrete_draws(name, table):
  # The accounting counts a mechanism's sampler draws from its cost (privacy.costs), the plans
  # from the mechanism: they must agree, or a discrete draw goes uncharged.
  mechanism = table[name]
  assert mechanisms.is_discrete(mechanism) == mechanism.cost.discrete == name.startswith("discrete_")

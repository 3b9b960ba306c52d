"""`dpgcd_jax.mechanisms`: mechanism objects: one object = a sampler and its privacy event; names are sugar."""

import dataclasses

import jax
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import events


def _problem():
  X = np.random.default_rng(0).normal(size=(40, 6))
  return dg.make_problem(X, X[:, 0], "squared", feature_bound=3.0)


@pytest.mark.parametrize("selection, update", [("laplace", "laplace"), ("gumbel", "gaussian")])
def test_objects_and_names_give_the_same_run_and_ledger(selection, update):
  problem, key = _problem(), jax.random.key(3)
  by_name = dg.dp_gcd.fit(problem, key, epsilon=1.0, delta=1e-5, passes=4, selection=selection,
                          update=update)
  by_object = dg.dp_gcd.fit(problem, key, epsilon=1.0, delta=1e-5, passes=4,
                            selection=mechanisms.SELECTIONS[selection],
                            update=mechanisms.UPDATES[update])
  np.testing.assert_array_equal(by_name.w, by_object.w)
  assert by_name.privacy.entries == by_object.privacy.entries


def test_events_of_the_built_in_mechanisms():
  assert mechanisms.LaplaceNoisyMax().event(4.0) == events.PureDp(0.5)
  assert mechanisms.GumbelMax().event(4.0) == events.BoundedRange(0.5)
  assert mechanisms.LaplaceNoise().event(4.0) == events.Laplace(0.25)
  assert mechanisms.GaussianNoise().event(4.0) == events.Gaussian(4.0)


@dataclasses.dataclass(frozen=True)
class _HalfGaussian(mechanisms.GaussianNoise):
  """A new update mechanism in one class: Gaussian noise, accounted as such."""

  name: str = "my_gaussian"


def test_a_new_mechanism_is_one_class():
  result = dg.dp_gcd.fit(_problem(), jax.random.key(0), epsilon=1.0, delta=1e-5, passes=3,
                         update=_HalfGaussian())
  entries = {entry.label: entry.event for entry in result.privacy.entries}
  assert isinstance(entries["update"], events.Gaussian)
  assert result.privacy.epsilon <= 1.0


@pytest.mark.parametrize("kwargs, match", [(dict(selection="exponential"), "selection"),
                                           (dict(update="uniform"), "update")])
def test_unknown_mechanisms_are_rejected_by_name(kwargs, match):
  with pytest.raises(ValueError, match=match):
    dg.dp_gcd.fit(_problem(), jax.random.key(0), epsilon=1.0, delta=1e-5, passes=3, **kwargs)


@pytest.mark.parametrize("sampler", [jax.random.laplace, jax.random.gumbel, jax.random.normal])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (8,)])
def test_noise_drawn_at_an_even_count_is_the_direct_draw(sampler, shape):
  """`mechanisms.draw` (an odd count is drawn at the next even count, 4-5x faster per entry on CPU)
  changes the time only: with JAX's default partitionable threefry the values are the direct draw's."""
  assert jax.config.jax_threefry_partitionable
  key = jax.random.key(11)
  got = mechanisms.draw(sampler, key, shape, np.float32)
  np.testing.assert_array_equal(got, sampler(key, shape, np.float32))

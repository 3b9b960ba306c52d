"""The one mechanism layer (`dpgcd_jax.mechanisms`): every privacy noise is drawn there.

An import rule on the package's code: outside `mechanisms.py` and the exact samplers it uses
(`discrete_noise.py`), no module names a noise sampler (`jax.random.normal / laplace /
gumbel / ...`, `discrete_noise.discrete_*`, `mechanisms.draw`, a NumPy generator's `laplace /
gumbel / exponential`). Randomness that is not privacy noise is listed with its reason.
Then the layer's new entry points are checked against the samplers they wrap.
"""

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpgcd_jax import discrete_noise
from dpgcd_jax import mechanisms

ROOT = pathlib.Path(__file__).resolve().parents[2] / "dpgcd_jax"
LAYER = {"mechanisms.py", "discrete_noise.py"}
JAX_NOISE = {"normal", "laplace", "gumbel", "exponential", "logistic", "truncated_normal", "t", "cauchy",
             "double_sided_maxwell", "weibull_min", "gamma", "beta", "generalized_normal", "pareto", "rademacher"}
DISCRETE_NOISE = {"discrete_laplace", "discrete_gaussian", "bernoulli_exp", "bernoulli_rational"}
NUMPY_NOISE = {"laplace", "gumbel", "exponential"}  # a NumPy Generator's noise (data generators draw normals)


def _chain(node):
  """`a.b.c` of an attribute access, as a tuple of names (empty if not a plain chain)."""
  names = []
  while isinstance(node, ast.Attribute):
    names.append(node.attr)
    node = node.value
  if isinstance(node, ast.Name):
    names.append(node.id)
    return tuple(reversed(names))
  return ()


def _noise_references(source):
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ImportFrom) and node.module in ("jax.random", "dpgcd_jax.discrete_noise"):
      found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names
                if a.name in JAX_NOISE | DISCRETE_NOISE]
    chain = _chain(node) if isinstance(node, ast.Attribute) else ()
    if len(chain) >= 2:
      base, name = chain[-2], chain[-1]
      if (base == "random" and name in JAX_NOISE) or (base == "discrete_noise" and name in DISCRETE_NOISE) \
          or (base == "mechanisms" and name == "draw") or (base != "random" and name in NUMPY_NOISE
                                                           and isinstance(node.ctx, ast.Load) and len(chain) == 2
                                                           and base not in ("mechanisms", "costs", "events")):
        found.append((node.lineno, ".".join(chain)))
  return found


def test_no_noise_is_drawn_outside_the_mechanism_layer():
  bad = [f"{path.relative_to(ROOT.parent)}:{line}: {what}"
         for path in sorted(ROOT.rglob("*.py")) if path.name not in LAYER or path.parent != ROOT
         for line, what in _noise_references(path.read_text())]
  assert not bad, "noise drawn outside dpgcd_jax.mechanisms:\n" + "\n".join(bad)


@pytest.mark.parametrize("snippet", [
    "z = jax.random.normal(key, (3,))",
    "z = random.laplace(key, (3,))",
    "from jax.random import gumbel",
    "z = discrete_noise.discrete_gaussian(key, 3, (2,))",
    "z = mechanisms.draw(jax.random.gumbel, key, (3,), dtype)",
    "z = rng.laplace(scale=1.0, size=3)",
])
def test_the_rule_catches_each_way_of_drawing_noise(snippet):
  assert _noise_references(snippet)


@pytest.mark.parametrize("snippet", [
    "X = rng.normal(size=(3, 2))",  # synthetic data, not noise
    "perm = jax.random.permutation(key, 10)",  # a public split
    "j = jax.random.randint(key, (), 0, 5)",  # DP-CD's coordinate, uniform and public
    "event = mechanisms.update('laplace').event(2.0)",
])
def test_the_rule_allows_randomness_that_is_not_privacy_noise(snippet):
  assert not _noise_references(snippet)


def test_vector_updates_are_the_iid_sampler():
  key, value, scale = jax.random.key(3), jnp.arange(7.0), jnp.float32(0.5)
  for mechanism, sampler in ((mechanisms.GaussianNoise(), jax.random.normal),
                             (mechanisms.LaplaceNoise(), jax.random.laplace)):
    got = mechanism.perturb(key, value, scale)
    np.testing.assert_allclose(got, value + scale * mechanisms.draw(sampler, key, (7,), jnp.float32), rtol=1e-6)
    assert mechanism.perturb(key, jnp.float32(1.0), scale) == 1.0 + scale * sampler(key, (), jnp.float32)
  noise = mechanisms.GaussianNoise().noise(jax.random.key(4), (40_000,), jnp.float32, 2.0)
  assert stats.kstest(np.asarray(noise), "norm", args=(0.0, 2.0)).pvalue > 1e-3
  assert stats.kstest(np.asarray(noise), "norm", args=(0.0, 2.4)).pvalue < 1e-6


def test_integer_releases_add_the_exact_discrete_noise():
  key, queries = jax.random.key(5), jnp.arange(-3, 5, dtype=jnp.int32)
  scales = jnp.arange(1, 9, dtype=jnp.int32)
  for mechanism, sampler in ((mechanisms.DiscreteLaplaceNoise(), discrete_noise.discrete_laplace),
                             (mechanisms.DiscreteGaussianNoise(), discrete_noise.discrete_gaussian)):
    noisy, ok = mechanism.perturb_integers(key, queries, scales)
    assert noisy.dtype == jnp.int32 and bool(jnp.all(ok))
    np.testing.assert_array_equal(noisy - queries, sampler(key, scales, (8,)))
  _, ok = mechanisms.DiscreteLaplaceNoise().perturb_integers(key, queries, jnp.int32(0))  # out of range: failed
  assert not bool(jnp.any(ok))


def test_peeling_rounds_are_the_gumbel_max_criteria():
  key, scores = jax.random.key(6), jnp.linspace(0.0, 1.0, 9)
  got = mechanisms.GumbelMax().noisy(key, scores, jnp.float32(0.3))
  np.testing.assert_allclose(got, scores + 0.3 * mechanisms.draw(jax.random.gumbel, key, (9,), jnp.float32),
                             rtol=1e-6)

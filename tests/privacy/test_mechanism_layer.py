"""The one mechanism layer (`dpgcd_jax.mechanisms`): every privacy noise is drawn there.

A rule on the package's code: outside `mechanisms.py` and the exact samplers it uses
(`discrete_noise.py`), no module uses a `jax.random` function other than keys, `permutation` and
`randint` (through any alias, `from` import or `getattr`), JAX's stateless `lax` generators
(`rng_uniform`, `rng_bit_generator`), a sampler of `discrete_noise`, a private name of `mechanisms`,
a NumPy generator's sampling method, or a SciPy distribution's `rvs`. The randomness that is
not privacy noise is listed file by file in `ALLOWED`, with its reason.
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
from dpgcd_jax import host_release
from dpgcd_jax import mechanisms
from dpgcd_jax import peeling
from dpgcd_jax.privacy import costs
from dpgcd_jax.solvers import dp_fw

ROOT = pathlib.Path(__file__).resolve().parents[2] / "dpgcd_jax"
LAYER = {"mechanisms.py", "discrete_noise.py"}
# jax.random functions that draw no noise (keys, and the public permutation / uniform index).
JAX_ALLOWED = {"split", "fold_in", "key", "PRNGKey", "key_data", "wrap_key_data", "key_impl", "clone",
               "permutation", "randint"}
LAX_RNG = {"rng_uniform", "rng_bit_generator"}  # jax.lax's generators: uniform floats, raw bits
SAMPLERS = {"discrete_laplace", "discrete_gaussian", "bernoulli_exp", "bernoulli_rational"}
NUMPY_SAMPLING = {"normal", "standard_normal", "laplace", "gumbel", "exponential", "standard_exponential",
                  "logistic", "uniform", "random", "integers", "choice", "geometric", "logseries",
                  "negative_binomial", "poisson", "binomial", "gamma", "beta", "multivariate_normal", "shuffle",
                  "standard_cauchy", "standard_t", "rayleigh", "weibull", "triangular", "bytes"}
# Randomness outside the layer that is not privacy noise, file by file, with its reason.
ALLOWED = {
    "sampling.py": ("jax.random.bits", "Poisson subsampling's uniform bits (amplification; law tested in "
                                       "tests/solvers/test_sampling.py)"),
    "privacy/tuning.py": ("numpy", "the number of repetitions K of repeat-and-select: data-independent, its law "
                                   "tested in tests/privacy/test_accounting.py"),
    "experiments/private.py": ("numpy", "the experiments' K and candidates of repeat-and-select"),
    "experiments/high_dim.py": ("numpy", "synthetic data"),
    "data/_synthetic.py": ("numpy", "synthetic data"),
    "estimators/_inputs.py": ("numpy", "a user's random_state Generator turned into a JAX key (key_from)"),
}


def _module_aliases(tree):
  """Local names bound to jax.random, to dpgcd_jax.discrete_noise and to dpgcd_jax.mechanisms."""
  aliases = {"random": set(), "discrete_noise": set(), "mechanisms": set()}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        for name in aliases:
          if a.name.endswith(name) and a.asname:
            aliases[name].add(a.asname)
    elif isinstance(node, ast.ImportFrom):
      for a in node.names:
        if a.name in aliases and (node.level or (node.module or "") in ("jax", "dpgcd_jax")):
          aliases[a.name].add(a.asname or a.name)
  return aliases


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


def _noise_references(source, allowed=()):
  """(line, what) of every way `source` could draw noise; `allowed`: "jax.random.bits" and/or "numpy"."""
  tree = ast.parse(source)
  aliases = _module_aliases(tree)
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom):
      module = node.module or ""
      for a in node.names:
        if (module.endswith("random") and a.name not in JAX_ALLOWED and a.name != "random") \
            or (module.endswith("discrete_noise") and (a.name in SAMPLERS or a.name.startswith("_"))) \
            or (module.endswith("mechanisms") and (a.name == "draw" or a.name.startswith("_"))) \
            or a.name in LAX_RNG:
          found.append((node.lineno, f"from {'.' * node.level}{module} import {a.name}"))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args:
      target = _chain(node.args[0])
      if target and (target[-1] == "random" or target[-1] in aliases["random"] | aliases["discrete_noise"]):
        found.append((node.lineno, "getattr(" + ".".join(target) + ", ...)"))
      if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in LAX_RNG:
        found.append((node.lineno, f"getattr(..., {node.args[1].value!r})"))
    chain = _chain(node) if isinstance(node, ast.Attribute) else ()
    if len(chain) >= 2:
      base, name = chain[-2], chain[-1]
      is_random = (base == "random" and (len(chain) == 2 or chain[-3] == "jax")) or base in aliases["random"]
      jax_draw = is_random and name not in JAX_ALLOWED and not (name == "bits" and "jax.random.bits" in allowed) \
          and not (base == "random" and chain[0] == "np")
      sampler = (base == "discrete_noise" or base in aliases["discrete_noise"]) \
          and (name in SAMPLERS or name.startswith("_"))
      private = (base == "mechanisms" or base in aliases["mechanisms"]) and (name == "draw" or name.startswith("_"))
      if jax_draw or sampler or private or name in LAX_RNG:
        found.append((node.lineno, ".".join(chain)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in NUMPY_SAMPLING \
        and "numpy" not in allowed:
      head = _chain(node.func)
      if not (head and (head[0] in ("jax", "jnp") or head[-2:-1] == ("random",) and head[0] != "np")):
        found.append((node.lineno, ast.unparse(node.func)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rvs":
      found.append((node.lineno, ast.unparse(node.func)))  # scipy.stats: a draw, whatever the file allows
  return sorted(set(found))


def test_no_noise_is_drawn_outside_the_mechanism_layer():
  bad = []
  for path in sorted(ROOT.rglob("*.py")):
    relative = path.relative_to(ROOT).as_posix()
    if relative in LAYER:
      continue
    allowed = (ALLOWED[relative][0],) if relative in ALLOWED else ()
    bad += [f"dpgcd_jax/{relative}:{line}: {what}" for line, what in _noise_references(path.read_text(), allowed)]
  assert not bad, "randomness drawn outside dpgcd_jax.mechanisms (or list it in ALLOWED with a reason):\n" + \
      "\n".join(bad)


@pytest.mark.parametrize("snippet", [
    "z = jax.random.normal(key, (3,))",
    "z = random.laplace(key, (3,))",
    "from jax.random import gumbel",
    "import jax.random as jr\nz = jr.normal(key, (3,))",
    "from jax import random as r\nz = r.normal(key, (3,))",
    "z = getattr(jax.random, 'laplace')(key)",
    "j = jax.random.categorical(key, logits)",
    "u = jax.random.uniform(key, (3,))",
    "z = jax.random.bits(key, (3,))",
    "z = discrete_noise.discrete_gaussian(key, 3, (2,))",
    "from .discrete_noise import discrete_laplace",
    "import dpgcd_jax.discrete_noise as dn\nz = dn.discrete_laplace(key, 3)",
    "z = discrete_noise._sampler(key)",
    "z = mechanisms.draw(jax.random.gumbel, key, (3,), dtype)",
    "from dpgcd_jax.mechanisms import draw",
    "z = mechanisms._iid(jax.random.normal, key, (), dtype)",
    "z = rng.laplace(scale=1.0, size=3)",
    "z = np.random.default_rng(0).laplace(size=3)",
    "z = self.rng.normal(size=3)",
    "k = rng.geometric(0.5)",
    "u = jax.lax.rng_uniform(0.0, 1.0, (3,))",
    "from jax import lax\nu = lax.rng_uniform(0.0, 1.0, (3,))",
    "from jax.lax import rng_uniform",
    "key, bits = jax.lax.rng_bit_generator(key, (3,))",
    "from jax.lax import rng_bit_generator as gen",
    "f = getattr(jax.lax, 'rng_bit_generator')",
    "z = stats.laplace.rvs(size=3, random_state=rng)",
    "z = scipy.stats.norm(0, 1).rvs(3)",
    "z = dist.rvs()",
])
def test_the_rule_catches_each_way_of_drawing_noise(snippet):
  assert _noise_references(snippet)


@pytest.mark.parametrize("snippet", [
    "perm = jax.random.permutation(key, 10)",  # a public split
    "j = jax.random.randint(key, (), 0, 5)",  # DP-CD's coordinate, uniform and public
    "keys = jax.random.split(key, 3)",
    "rng = np.random.default_rng(seed)",
    "event = mechanisms.update('laplace').event(2.0)",
    "x = jnp.linspace(0.0, 1.0, 5)",
])
def test_the_rule_allows_randomness_that_is_not_privacy_noise(snippet):
  assert not _noise_references(snippet)


# `dpgcd_jax/privacy/` is host-side accounting and the releases' statistics; its releases draw through
# the mechanism layer (`dpgcd_jax.release_mechanisms`). Only the audit tools, which run mechanisms to
# test them and release nothing, use the layer's objects directly.
AUDIT_TOOLS = {"auditing.py", "audit_neighbours.py", "distinguisher.py"}
DRAWING_METHODS = {"select", "noisy_scores", "noisy", "noisy_max", "perturb", "perturb_integers"}


def _layer_draws(source, allowed=()):
  """(line, what) of every draw `source` makes itself: `_noise_references` (with `allowed`), an import
  of the mechanism objects (`dpgcd_jax.mechanisms`), or a call to a drawing method of a mechanism object."""
  found = list(_noise_references(source, allowed))
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ImportFrom) and ((node.module or "").endswith("mechanisms")
                                             and not node.module.endswith("release_mechanisms")
                                             or any(a.name == "mechanisms" for a in node.names)):
      found.append((node.lineno, f"from {'.' * node.level}{node.module} import "
                                  + ", ".join(a.name for a in node.names)))
    elif isinstance(node, ast.Import) and any(a.name == "dpgcd_jax.mechanisms" for a in node.names):
      found.append((node.lineno, "import dpgcd_jax.mechanisms"))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DRAWING_METHODS:
      found.append((node.lineno, ast.unparse(node.func)))
  return sorted(set(found))


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "privacy").glob("*.py") if p.name not in AUDIT_TOOLS))
def test_the_privacy_package_draws_no_noise_itself(name):
  """`dpgcd_jax.privacy` (but its audit tools) draws every noise through `dpgcd_jax.release_mechanisms`."""
  allowed = (ALLOWED[f"privacy/{name}"][0],) if f"privacy/{name}" in ALLOWED else ()
  assert _layer_draws((ROOT / "privacy" / name).read_text(), allowed) == []


@pytest.mark.parametrize("snippet", [
    "from dpgcd_jax import mechanisms",
    "import dpgcd_jax.mechanisms",
    "from dpgcd_jax.mechanisms import DiscreteLaplaceNoise",
    "noisy, ok = mechanisms.DiscreteGaussianNoise().perturb_integers(key, query, sigma)",
    "m = mechanisms.update(noise).perturb(key, mean, scale)",
    "j = selection.select(key, score, g, w, M, penalty, scale, rule)",
])
def test_the_privacy_rule_catches_the_device_releases(snippet):
  """`dpgcd_jax.privacy` rule: the draws the privacy modules made before the layer took them."""
  assert _layer_draws(snippet)


def test_the_privacy_rule_allows_the_release_mechanisms():
  """`dpgcd_jax.privacy` rule: a release calls the layer's release mechanisms and reads their events."""
  assert not _layer_draws("from dpgcd_jax import release_mechanisms\n"
                          "i = release_mechanisms.AboveThreshold().run(key, queries, epsilon)\n"
                          "e = release_mechanisms.NoisySearch().event(2.0)")


def test_the_mechanism_and_cost_registries_agree():
  """`dpgcd_jax.mechanisms` and `dpgcd_jax.privacy.costs`: one registry. Each mechanism object is
  registered under its cost's name, the two tables hold the same names, each object's cost is the
  cost table's entry, and `discrete` agrees; the secure maps and the name tuples of peeling and
  DP-FW (non-secure, secure) name registered mechanisms, the secure ones discrete."""
  for objects, table in ((mechanisms.SELECTIONS, costs.SELECTIONS), (mechanisms.UPDATES, costs.UPDATES)):
    assert set(objects) == set(table)
    for name, mechanism in objects.items():
      assert mechanism.name == name and mechanism.cost is table[name]
      assert mechanisms.is_discrete(mechanism) is table[name].discrete
  for secure_map, objects in ((mechanisms.SECURE_SELECTIONS, mechanisms.SELECTIONS),
                              (mechanisms.SECURE_UPDATES, mechanisms.UPDATES)):
    assert set(secure_map) <= set(objects)
    assert all(mechanisms.is_discrete(objects[name]) for name in secure_map.values())
  for names in (peeling.SELECTIONS, dp_fw.SELECTIONS):
    plain, secure = (mechanisms.SELECTIONS[name] for name in names)
    assert not mechanisms.is_discrete(plain) and mechanisms.is_discrete(secure)
  assert peeling.SELECTIONS == (peeling.ROUND.name, peeling.SECURE_ROUND.name)
  assert dp_fw.SELECTIONS[0] == dp_fw.SELECTION.name


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_discrete_updates_draw_one_noise_per_entry_of_a_vector():
  """A vector released by a discrete update gets independent noise per entry (it shared one draw
  before: every entry moved by the same integer)."""
  values = jnp.zeros(2000, jnp.float32)
  for update in (mechanisms.DiscreteLaplaceNoise(), mechanisms.DiscreteGaussianNoise()):
    noisy = np.asarray(host_release.release(update, jax.random.key(2), values, jnp.float32(3.0), jnp.float32(1.0)))
    assert len(np.unique(noisy)) > 50
    assert 2.5 < np.std(noisy) < 5.0  # Gaussian: about 3; Laplace: about 3 sqrt(2)
    scalar = host_release.release(update, jax.random.key(2), jnp.float32(0.0), jnp.float32(3.0), jnp.float32(1.0))
    assert np.isfinite(float(scalar))

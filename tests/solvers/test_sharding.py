"""`dpgcd_jax.solvers.dp_gcd` (a sharded `fit`): data-parallel runs on JAX's SPMD engine: X sharded over examples on 4
host devices.

Runs in a subprocess (the device count is fixed when JAX starts).
"""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import dpgcd_jax as dg
    from dpgcd_jax.solvers import base, dp_gcd

    assert len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()), ("examples",))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 30)).astype(np.float32)
    y = (X[:, :3].sum(axis=1) + rng.normal(size=400)).astype(np.float32)
    X_sharded = jax.device_put(X, NamedSharding(mesh, P("examples", None)))
    y_sharded = jax.device_put(y, NamedSharding(mesh, P("examples")))
    for kwargs in (dict(feature_bound=3.0), dict()):  # declared bound; privately released bound
      sharded = dg.make_problem(X_sharded, y_sharded, "squared", **kwargs)
      assert sharded.XT.sharding.spec == P(None, "examples"), sharded.XT.sharding
      single = dg.make_problem(X, y, "squared", **kwargs)
      a = dg.dp_gcd.fit(sharded, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=20)
      b = dg.dp_gcd.fit(single, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=20)
      np.testing.assert_allclose(a.w, b.w, rtol=1e-5, atol=1e-6)
    # No gather of the features: the clipped sums reduce across devices (all-reduce) only.
    params = base.cast_params(dp_gcd.SOLVER, sharded, dp_gcd.Params(1.0, 1.0, 5.0, 5.0))
    run = lambda pb, k: base.compiled_run(dp_gcd.SOLVER, pb, k, params, passes=5,
                                          options=(("rule", "gs-s"), ("selection", "laplace"),
                                                   ("update", "laplace")))
    hlo = jax.jit(run).lower(sharded, jax.random.key(0)).compile().as_text()
    assert "all-gather" not in hlo and "all-reduce" in hlo
    print("ok")
""")


@pytest.mark.slow
def test_sharded_fit_equals_single_device_and_never_gathers_x():
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                       timeout=600)
  assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]

"""Data-parallel DP-GCD on 1, 2 and 4 host devices: time per iteration, X sharded over examples.

Run: python benchmarks/bench_sharded.py [--n 64000] [--p 1000] [--passes 50]

Each device count runs in its own subprocess (``--xla_force_host_platform_device_count`` is
fixed when JAX starts); the problem is built from a ``jax.Array`` sharded over examples and
``dp_gcd.run`` runs under XLA's SPMD partitioner. Host "devices" share this machine's cores,
so the figure measures the partitioning overhead (or gain) on CPU, not a multi-GPU speed-up.
"""

import argparse
import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, sys, json, time
    devices, n, p, passes = map(int, sys.argv[1:5])
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    import jax, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import dpgcd_jax as dg

    mesh = Mesh(np.array(jax.devices()), ("examples",))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = (X[:, :5].sum(axis=1) + rng.normal(size=n)).astype(np.float32)
    X = jax.device_put(X, NamedSharding(mesh, P("examples", None)))
    y = jax.device_put(y, NamedSharding(mesh, P("examples")))
    problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
    params = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=5.0, update_noise=5.0)
    run = lambda key: dg.dp_gcd.run(problem, key, params, passes=passes).w
    jax.block_until_ready(run(jax.random.key(0)))  # compile
    times = []
    for seed in range(3):
      start = time.perf_counter()
      jax.block_until_ready(run(jax.random.key(seed + 1)))
      times.append(time.perf_counter() - start)
    print(json.dumps(dict(devices=len(jax.devices()), ms=1e3 * min(times) / passes)))
""")


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--n", type=int, default=64000)
  parser.add_argument("--p", type=int, default=1000)
  parser.add_argument("--passes", type=int, default=50)
  args = parser.parse_args()
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  rows = []
  for devices in (1, 2, 4):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(devices), str(args.n), str(args.p), str(args.passes)],
                         capture_output=True, text=True, env=env, check=True)
    rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
  base = rows[0]["ms"]
  print(f"DP-GCD, {args.n} x {args.p} float32, X sharded over examples, {os.cpu_count()} cores")
  print("| host devices | ms per iteration | vs 1 device |")
  print("|---|---|---|")
  for r in rows:
    print(f"| {r['devices']} | {r['ms']:.2f} | {r['ms'] / base:.2f}x |")


if __name__ == "__main__":
  main()

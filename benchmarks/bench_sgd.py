"""DP-SGD per pass: dpgcd_jax.dp_sgd (exact Poisson sampling) vs optax.contrib.dpsgd (issue 10).

Three compiled loops on the same problem, each ``n // b`` steps per pass of per-example
gradients (``jax.vmap(jax.grad(loss))``), l2 clipping, Gaussian noise and an SGD update
under ``lax.scan``, float32:

- optax: ``optax.contrib.dpsgd`` on a fixed-size batch of ``b`` uniform indices per step
  (``jax.random.randint``; not Poisson sampling, so its privacy accounting would differ);
- optax loop + Poisson: the same loop and clipping, the batch an exact Poisson(``b / n``)
  sample from :func:`dpgcd_jax.sampling.subsample_sum` (isolates the sampler's cost);
- dp_sgd: ``dpgcd_jax.dp_sgd.run`` (the sampler, the library's fail-closed clipping, which
  zeroes non-finite per-example gradients, its driver and validation).

Per pass means the marginal cost of a pass: every loop is timed with 1 and with
``1 + --passes`` passes, interleaved (other processes share the CPU), and the per-pass
time is the median of the differences of runs timed side by side, divided by ``--passes``.
What is left of a 1-pass call is the per-call overhead: ``dp_sgd.run`` validates its
inputs and transposes ``X`` once per call, the optax loops take a row-major ``X``.

Run: python benchmarks/bench_sgd.py [--n 10000] [--p 100] [--loss logistic|squared]
     [--batches 1 10 100] [--repeats 11] [--passes 8]   (about 4 minutes on 2 busy cores)
"""

import argparse
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpgcd_jax as dg
from dpgcd_jax import sampling


def make_data(n, p, loss, seed=0):
  rng = np.random.default_rng(seed)
  X = (rng.normal(size=(n, p)) / np.sqrt(p)).astype(np.float32)
  z = X @ rng.normal(size=p)
  y = np.where(z > 0, 1.0, -1.0) if loss == "logistic" else z + 0.1 * rng.normal(size=n)
  return X, y.astype(np.float32)


def optax_runner(problem, batch, passes, step_size, clip, noise):
  """``passes`` passes of optax.contrib.dpsgd on uniform fixed-size batches, compiled."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the deprecated `seed` argument of dpsgd
    opt = optax.contrib.dpsgd(step_size, clip, noise, seed=0)
  n, p = problem.num_examples, problem.num_features
  per_example_grads = jax.vmap(jax.grad(problem.loss.fn), in_axes=(None, 0, 0))

  @jax.jit
  def run(key, X, y):
    w = jnp.zeros(p, X.dtype)

    def one_step(carry, t):
      w, state = carry
      idx = jax.random.randint(jax.random.fold_in(key, t), (batch,), 0, n)
      updates, state = opt.update(per_example_grads(w, X[idx], y[idx]), state, w)
      return (optax.apply_updates(w, updates), state), None

    (w, _), _ = jax.lax.scan(one_step, (w, opt.init(w)), jnp.arange(passes * (n // batch)))
    return w

  X = problem.XT.T.copy()  # row-major, built once outside the timing (ours does it inside)
  return lambda key: run(key, X, problem.y)


def poisson_runner(problem, batch, passes, step_size, clip, noise):
  """The optax loop with an exact Poisson(b / n) batch instead of b uniform indices."""
  n, p = problem.num_examples, problem.num_features
  plan = sampling.plan(n, batch / n)
  per_example_grads = jax.vmap(jax.grad(problem.loss.fn), in_axes=(None, 0, 0))

  def clipped(w, X, y, idx):
    grads = per_example_grads(w, X[idx], y[idx])
    norms = jnp.linalg.norm(grads, axis=-1, keepdims=True)
    return grads * jnp.minimum(1.0, clip / jnp.maximum(norms, jnp.finfo(norms.dtype).tiny))

  @jax.jit
  def run(key, X, y):
    def one_step(w, t):
      key_sample, key_noise = jax.random.split(jax.random.fold_in(key, t))
      total = sampling.subsample_sum(key_sample, plan, lambda idx: clipped(w, X, y, idx))
      noisy = total + clip * noise * jax.random.normal(key_noise, w.shape, w.dtype)
      return w - step_size * noisy / batch, None

    return jax.lax.scan(one_step, jnp.zeros(p, X.dtype), jnp.arange(passes * (n // batch)))[0]

  X = problem.XT.T.copy()
  return lambda key: run(key, X, problem.y)


def ours_runner(problem, batch, passes, step_size, clip, noise):
  params = dg.dp_sgd.Params(step_size, clip, noise)
  return lambda key: dg.dp_sgd.run(problem, key, params, passes=passes, batch_size=batch,
                                   store_objective=False).w


def paired_times(runners, repeats):
  """Times of interleaved runs (order alternating); returns per-runner lists, pair by pair."""
  for fn in runners.values():  # compile
    jax.block_until_ready(fn(jax.random.key(0)))
  times = {name: [] for name in runners}
  order = list(runners)
  for r in range(repeats):
    for name in (order if r % 2 == 0 else order[::-1]):
      start = time.perf_counter()
      jax.block_until_ready(runners[name](jax.random.key(r + 1)))
      times[name].append(time.perf_counter() - start)
  return {name: np.array(t) for name, t in times.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--n", type=int, default=10_000)
  parser.add_argument("--p", type=int, default=100)
  parser.add_argument("--loss", choices=("logistic", "squared"), default="logistic")
  parser.add_argument("--batches", type=int, nargs="+", default=[1, 10, 100])
  parser.add_argument("--repeats", type=int, default=11)
  parser.add_argument("--passes", type=int, default=8, help="extra passes of the long runs")
  args = parser.parse_args()

  X, y = make_data(args.n, args.p, args.loss)
  problem = dg.make_problem(X, y, args.loss, smoothness=np.ones(args.p))
  step_size, clip, noise = 0.05, 1.0, 1.0
  print(f"{args.loss}: n={args.n}, p={args.p}, float32, {jax.devices()[0].platform}; per pass: "
        f"median over {args.repeats} interleaved repeats of (time of {1 + args.passes} passes - "
        f"time of 1 pass) / {args.passes}\n")
  print("| b | tiers (rows) | P(overflow) | steps / pass | optax.contrib.dpsgd | optax loop + Poisson | "
        "dp_sgd | dp_sgd / optax | optax loop + Poisson / optax | per-call overhead (optax, dp_sgd) |")
  print("|---|---|---|---|---|---|---|---|---|---|")
  makers = {"optax": optax_runner, "poisson": poisson_runner, "ours": ours_runner}
  for batch in args.batches:
    runners = {}
    for name, make in makers.items():
      for passes in (1, 1 + args.passes):
        runners[name, passes] = make(problem, batch, passes, step_size, clip, noise)
    t = paired_times(runners, args.repeats)
    per_pass = {name: np.median(t[name, 1 + args.passes] - t[name, 1]) / args.passes for name in makers}
    per_call = {name: np.median(t[name, 1]) - per_pass[name] for name in makers}
    plan = sampling.plan(args.n, batch / args.n)
    print(f"| {batch} | {', '.join(map(str, plan.tiers))} | {plan.overflow_probability:.1e} | "
          f"{args.n // batch} | {per_pass['optax'] * 1e3:.2f} ms | {per_pass['poisson'] * 1e3:.2f} ms | "
          f"{per_pass['ours'] * 1e3:.2f} ms | {per_pass['ours'] / per_pass['optax']:.2f}x | "
          f"{per_pass['poisson'] / per_pass['optax']:.2f}x | {per_call['optax'] * 1e3:.1f} ms, "
          f"{per_call['ours'] * 1e3:.1f} ms |")


if __name__ == "__main__":
  main()

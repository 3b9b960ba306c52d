"""optax composition: the private greedy coordinate update as a `GradientTransformation`.

`dp_greedy_coordinate` takes per-example gradients (a leading batch axis of size n on every
leaf), clips them coordinate-wise, and returns the noisy greedy single-coordinate update of
DP-GCD, computed by the same private kernel as the solver
([`dpgcd_jax.solvers.greedy.private_coordinate_step`][]: any penalty, any greedy rule):
the gradient mapping on the selected coordinate (`g~_j / M_j` without penalty), zero
elsewhere. Chained with `optax.scale(-gamma)` (and `step_size=gamma`) it gives exactly the
iterates of [`dpgcd_jax.dp_gcd.run`][] for the same key: step `t` uses `fold_in(key, t)`
in both.

```pycon
>>> import jax, jax.numpy as jnp, optax, dpgcd_jax as dg
>>> X = jax.random.normal(jax.random.key(0), (64, 5)); y = X @ jnp.arange(5.0)
>>> per_example_loss = lambda w, x, y: 0.5 * (x @ w - y) ** 2
>>> tx = optax.chain(dg.dp_greedy_coordinate(jnp.mean(X**2, axis=0), key=jax.random.key(1),
...                  clip=5.0, selection_noise=2.0, update_noise=2.0), optax.scale(-1.0))
>>> w = jnp.zeros(5); state = tx.init(w)
>>> for _ in range(20):
...   grads = jax.vmap(jax.grad(per_example_loss), (None, 0, 0))(w, X, y)
...   updates, state = tx.update(grads, state, w)
...   w = optax.apply_updates(w, updates)

```

Keys: the transformation holds its key, and its noise is a deterministic function of that key
and the step count. `init` does not and cannot check how often it is called (under
`jax.jit` a Python-side check runs only once, at trace time), so nothing in the
transformation stops a reuse: reusing one transformation, or one initial state, for two
trainings on neighbouring data sets replays the same noise, and the two results then differ by
exactly their noise-free difference (the guarantee is void). What protects you is the key:
build a NEW transformation with a fresh key for every training run, e.g.
`dp_greedy_coordinate(..., key=dpgcd_jax.seeding.fresh_key())` (the key's whole state from the OS), and
keep an explicit integer key for reproducing one run only.

Privacy: as one DP-GCD iteration per `update` call (see [`dpgcd_jax.solvers.dp_gcd`][]),
with `n` the batch size of the per-example gradients (the whole data set: no subsampling
amplification is claimed). Account for the number of calls with
[`dpgcd_jax.privacy.calibrate_gcd`][].
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import mechanisms
from dpgcd_jax import penalties
from dpgcd_jax.solvers import driver
from dpgcd_jax.solvers import greedy
from dpgcd_jax.solvers import guards


class DPGreedyCoordinateState(NamedTuple):
  # int32: number of updates so far (the step index of the key). Shadows tuple.count, as optax's own
  # states' `count` does (a public field name; mypy flags any NamedTuple field named like a tuple method).
  count: jax.Array  # type: ignore[assignment]
  key: jax.Array


def dp_greedy_coordinate(
    smoothness: Any,
    *,
    key: jax.Array,
    clip: Any,
    selection_noise: Any,
    update_noise: Any,
    l2: Any = 0.0,
    curvature: float = 1.0,
    penalty: Any = None,
    step_size: Any = 1.0,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    secure_noise: bool = False,
) -> optax.GradientTransformation:
  """Private greedy single-coordinate update from per-example gradients.

  $$
  g = \\frac1n \\sum_i \\mathrm{clip}(\\nabla l_i, -C, C) + \\lambda_2 w, \\quad
  j = \\text{private argmax}_j |g_j| / \\sqrt{M_j}, \\quad
  u = e_j \\frac{w_j - \\mathrm{prox}_{\\gamma_j \\psi_j}(w_j - \\gamma_j (g_j + \\eta))}{\\gamma},
  \\quad \\gamma_j = \\gamma / M_j
  $$

  (`u_j = (g_j + eta) / M_j` without penalty), the gradient mapping of the same private kernel
  as [`dpgcd_jax.dp_gcd.step`][]: chained with `optax.scale(-step_size)` (the same
  `step_size`) it moves exactly as the solver.

  Args:
    smoothness: public coordinate smoothness `M` of the data term: a pytree like the
      parameters or a flat vector of their total size.
    key: PRNG key, carried in the state: a fresh one for every training run
      (`dpgcd_jax.seeding.fresh_key`); the same key replays the same noise.
    clip: `C` (scalar: DP-CD rule; or a flat vector of thresholds).
    selection_noise: `b`, in units of `Delta_bar` (see [`dpgcd_jax.solvers.greedy`][]).
    update_noise: `s`, in units of `Delta_j`.
    l2: public ridge strength added to the gradient (needs `params` in `update`).
    curvature: the loss's curvature bound `beta`, the unit of a scalar `clip`
      (`C_j = clip sqrt(M_j / beta)`, see [`dpgcd_jax.clipping`][]).
    penalty: a separable penalty ([`dpgcd_jax.penalties`][], over the flattened parameters);
      default none. Needs `params` in `update`.
    step_size: `gamma`; the prox step uses `gamma / M_j`. Chain with
      `optax.scale(-step_size)` of the same value.
    selection: "laplace" or "gumbel".
    update: "laplace" or "gaussian".
    rule: greedy rule "gs-s", "gs-r" or "gs-q".
    secure_noise: floating-point-safe noise: `selection` and `update` become their discrete
      counterparts on a public grid ("laplace" -> "discrete_laplace", "gaussian" ->
      "discrete_gaussian"; `dpgcd_jax.discrete_noise`), accounted with the same
      multipliers, whose ledger charges the discrete draws
      (`calibrate_gcd(..., selection="discrete_laplace", update="discrete_laplace", features=p)`,
      `p` the total number of parameters, every leaf flattened).

  Returns:
    An `optax.GradientTransformation`; chain it with `optax.scale(-step_size)`.
  """
  _validate.check_key("key", key)
  if not isinstance(secure_noise, bool):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  if secure_noise:
    selection, update = mechanisms.secure(selection, update)
  mechanisms.selection(selection)
  mechanisms.update(update)
  _validate.check_choice("rule", rule, tuple(greedy.RULES))
  _validate.check_positive("step_size", step_size)
  penalty = penalties.Zero() if penalty is None else penalty
  _validate.check_positive("clip", clip, allow_inf=True)
  _validate.check_positive("selection_noise", selection_noise, allow_zero=True)
  _validate.check_positive("update_noise", update_noise, allow_zero=True)
  greedy.check_private_rule(rule, selection_noise, update_noise)
  _validate.check_positive("l2", l2, allow_zero=True)
  flat_smoothness = ravel_pytree(smoothness)[0]
  _validate.check_positive("smoothness", flat_smoothness, allow_zero=True)
  _validate.check_positive("smoothness + l2", flat_smoothness + l2)
  if jnp.shape(clip) not in ((), flat_smoothness.shape):
    raise ValueError(f"Expected clip of shape () or {flat_smoothness.shape}, got clip.shape={jnp.shape(clip)}.")
  guards.check_finite_clip_with_noise(clip, [selection_noise, update_noise])

  def init_fn(params):
    del params  # the state is the key and a step count: the same for every init (see above)
    return DPGreedyCoordinateState(jnp.zeros((), jnp.int32), key)

  def update_fn(per_example_grads, state, params=None):
    leaves = jax.tree.leaves(per_example_grads)
    if not leaves or any(leaf.ndim < 1 for leaf in leaves):
      raise ValueError("Expected per_example_grads with a leading batch axis on every leaf.")
    n = leaves[0].shape[0]
    if params is not None:
      for leaf, p in zip(leaves, jax.tree.leaves(params), strict=False):
        if leaf.shape != (n,) + jnp.shape(p):
          raise ValueError(
              f"Expected per_example_grads with a leading batch axis: leaves of shape (batch,) + "
              f"param shape, got "
              f"{leaf.shape} for a parameter of shape {jnp.shape(p)}.")
    example = jax.tree.map(lambda x: x[0], per_example_grads)
    _, unravel = ravel_pytree(example)
    G = jax.vmap(lambda g: ravel_pytree(g)[0])(per_example_grads)
    given = G.dtype
    G = G.astype(_validate.compute_dtype(given))  # half precision: the exact sums need float32
    w = (jnp.zeros(G.shape[1], G.dtype) if params is None else ravel_pytree(params)[0]).astype(G.dtype)
    M = flat_smoothness.astype(G.dtype) + l2
    step = jnp.asarray(step_size, G.dtype)
    thresholds = clipping.coordinate_thresholds(clip, M, curvature)
    g = clipping.clipped_mean(G, thresholds[None, :], axis=0) + l2 * w
    j, new_wj = greedy.private_coordinate_step(
        driver.step_key(state.key, state.count), g, w, M, thresholds, n, penalty, step,
        clipping.rounded_up(selection_noise, G.dtype), clipping.rounded_up(update_noise, G.dtype),
        public_gradient=l2 * w, selection=selection, update=update, rule=rule)
    # The gradient mapping (w_j - prox(...)) / step: optax.scale(-step) turns it into the move.
    updates = jnp.where(jnp.arange(w.shape[0]) == j, (w[j] - new_wj) / step, 0.0)
    return unravel(updates.astype(given)), DPGreedyCoordinateState(state.count + 1, state.key)

  return optax.GradientTransformation(init_fn, update_fn)

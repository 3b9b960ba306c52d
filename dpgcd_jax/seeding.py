"""Keys the library makes for the user: fresh OS entropy, never NumPy's global state.

A private run's noise is a deterministic function of its JAX key. A key derived from a
guessable seed (a small integer, NumPy's global `RandomState` after `np.random.seed`)
lets anyone who knows or searches the seed subtract the noise: two fits with the same key on
neighbouring data sets differ by exactly the noise-free difference. So wherever the library
creates a key on the user's behalf (`random_state=None` in the estimators), it draws the
key's whole state from the operating system (`secrets.randbits`, 32 bits per word of the
default implementation's key data) and wraps it into a JAX key on the host (no device program).

What this does and does not protect:

- The default `threefry2x32` key holds 64 bits of state, all of them drawn (a search over
  2^64 seeds, against 2^31 for NumPy's `randint`); an implementation with a larger state
  (`"rbg"`: 128 bits) gets as many.
- JAX's generator is not a cryptographic generator: an attacker who can observe many outputs
  of one key is outside the threat model (see the README's "What is private").
- An integer seed (`random_state=0`) is for reproducibility only: it replays the same
  noise, and a fit repeated with that seed on a neighbouring data set is not private with
  respect to someone who knows the seed.
"""

from __future__ import annotations

import math
import secrets

import jax
import numpy as np


def fresh_key() -> jax.Array:
  """A new JAX key whose whole state is drawn from the operating system's entropy (`secrets`).

  Returns:
    A typed JAX key of the default implementation (`jax.random.key`), different at every
    call with overwhelming probability and independent of NumPy's and Python's global
    random state. Made on the host: no device program is compiled. Call it on the host, once per
    release: inside `jax.jit` the key would be a constant of the compiled program, replayed by
    every call.

  Examples:
    >>> import jax
    >>> from dpgcd_jax.seeding import fresh_key
    >>> a, b = fresh_key(), fresh_key()
    >>> bool((jax.random.key_data(a) != jax.random.key_data(b)).any())
    True
  """
  shape = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))).shape  # traced, not run
  words = np.array([secrets.randbits(32) for _ in range(math.prod(shape))], np.uint32).reshape(shape)
  return jax.random.wrap_key_data(jax.device_put(words))

"""Keys the library makes for the user: fresh OS entropy, never NumPy's global state.

A private run's noise is a deterministic function of its JAX key. A key derived from a
guessable seed (a small integer, NumPy's global `RandomState` after `np.random.seed`)
lets anyone who knows or searches the seed subtract the noise: two fits with the same key on
neighbouring data sets differ by exactly the noise-free difference. So wherever the library
creates a key on the user's behalf (`random_state=None` in the estimators), it draws the
seed from the operating system (`secrets.randbits`, 128 bits) and folds it into a JAX key.

What this does and does not protect:

- The default `threefry2x32` key holds 64 bits of state, so a fresh key carries 64 bits of
  the 128 drawn (a search over 2^64 seeds, against 2^31 for NumPy's `randint`).
- JAX's generator is not a cryptographic generator: an attacker who can observe many outputs
  of one key is outside the threat model (see the README's "What is private").
- An integer seed (`random_state=0`) is for reproducibility only: it replays the same
  noise, and a fit repeated with that seed on a neighbouring data set is not private with
  respect to someone who knows the seed.
"""

from __future__ import annotations

import secrets

import jax
import jax.numpy as jnp

ENTROPY_BITS = 128


def fresh_key() -> jax.Array:
  """A new JAX key seeded from the operating system's entropy (`secrets`, 128 bits).

  Returns:
    A typed JAX key (`jax.random.key`), different at every call with overwhelming
    probability and independent of NumPy's and Python's global random state.

  Examples:
    >>> import jax
    >>> from dpgcd_jax.seeding import fresh_key
    >>> a, b = fresh_key(), fresh_key()
    >>> bool((jax.random.key_data(a) != jax.random.key_data(b)).any())
    True
  """
  words = [secrets.randbits(32) for _ in range(ENTROPY_BITS // 32)]
  # The key's 64-bit state is set directly from two words (``jax.random.key(seed)`` would keep
  # only 32 bits of an integer seed when x64 is off); the other words are folded in.
  key = jax.random.wrap_key_data(jnp.asarray(words[:2], jnp.uint32))
  for word in words[2:]:
    key = jax.random.fold_in(key, word)
  return key

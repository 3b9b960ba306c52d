"""Test configuration: float64 for tight comparisons, strict rank promotion, no disk cache.

float32 (the dtype most users and the experiments run) is tested by ``test_float32.py``,
whose tests turn x64 off for their body (``jax.enable_x64(False)``).

The suite never writes to the user's persistent compilation cache (``DPGCD_JAX_NO_COMPILATION_CACHE``,
inherited by the tests' subprocesses); ``test_compile_once.py`` tests the cache in a temporary
directory.
"""

import os

os.environ["DPGCD_JAX_NO_COMPILATION_CACHE"] = "1"

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

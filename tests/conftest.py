"""Test configuration: float64 for tight comparisons, strict rank promotion.

float32 (the dtype most users and the experiments run) is tested by ``test_float32.py``,
whose tests turn x64 off for their body (``jax.enable_x64(False)``).
"""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

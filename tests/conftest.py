"""Test configuration: float64 for tight comparisons, strict rank promotion."""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

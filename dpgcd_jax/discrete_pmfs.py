"""The closed-form laws of the exact samplers of `dpgcd_jax.discrete_noise` (host side, NumPy).

What the tests and the documentation compare the samplers' draws with: `discrete_laplace_pmf`
for `discrete_noise.discrete_laplace` (CKS Algorithm 2), `discrete_gaussian_pmf` for
`discrete_noise.discrete_gaussian` (CKS Algorithm 3). No JAX, no randomness.
"""

from __future__ import annotations

import numpy as np


def discrete_laplace_pmf(z: np.ndarray, scale: float) -> np.ndarray:
  """`P(Z = z) = tanh(1 / (2 t)) exp(-|z| / t)` (normalized: `sum_z exp(-|z|/t) = coth(1/(2t))`)."""
  z = np.asarray(z, dtype=float)
  return np.tanh(0.5 / scale) * np.exp(-np.abs(z) / scale)


def discrete_gaussian_pmf(z: np.ndarray, sigma: float) -> np.ndarray:
  """`P(Z = z) = exp(-z^2 / (2 sigma^2)) / sum_k exp(-k^2 / (2 sigma^2))` (sum truncated at 60 sigma)."""
  z = np.asarray(z, dtype=float)
  k = np.arange(-int(60 * sigma) - 1, int(60 * sigma) + 2, dtype=float)
  norm = np.sum(np.exp(-k**2 / (2.0 * sigma**2)))
  return np.exp(-z**2 / (2.0 * sigma**2)) / norm

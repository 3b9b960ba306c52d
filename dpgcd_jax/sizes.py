"""Public sizes: the bucket a size is padded to, so that new sizes within a bucket compile nothing.

A function of public sizes only (`n`, `p`, a declared or bucketed `nnz`); imported by
`dpgcd_jax.problem` (which exports it as `dpgcd_jax.problem.bucket`) and `dpgcd_jax.sparse`.
"""

from __future__ import annotations

import operator


def bucket(size: int, *, exact_up_to: int = 0, octave_steps_from: int = 1 << 14) -> int:
  """The public bucket of a size: the smallest `m 2^k >= size`, `m` a power of two below
  `octave_steps_from`, `m` in {4, 5, 6, 7} above (at most 1.25x).

  A bucket never crosses a power of two (`ceil(log2 bucket) = ceil(log2 size)`), so the
  public grid of the exact clipped sums ([`dpgcd_jax.exact_sums.grid_bits`][]) is the same for
  the padded and the true `n`: a padded run gives the same bits as the unpadded one.
  """
  size = operator.index(size)
  if size <= max(exact_up_to, 1):
    return size
  power = 1 << (size - 1).bit_length()
  if power <= octave_steps_from:
    return power
  step = power // 8
  return -(-size // step) * step

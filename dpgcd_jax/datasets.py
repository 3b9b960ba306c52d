"""Deprecated: renamed :mod:`dpgcd_jax.data`; this alias keeps old code working.

``from dpgcd_jax import datasets; datasets.get("square")`` and ``python -m
dpgcd_jax.datasets ...`` still work; every public name is looked up in
:mod:`dpgcd_jax.data` at access time.
"""

import warnings

from dpgcd_jax import data as _data

warnings.warn("dpgcd_jax.datasets is deprecated; use dpgcd_jax.data", DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
  return getattr(_data, name)


def __dir__() -> list[str]:
  return dir(_data)


if __name__ == "__main__":
  _data.main()

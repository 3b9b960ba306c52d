"""Solvers: one module each (``Params``, ``State``, ``Info``, ``init``, ``step``, ``run``, ``fit``).

The protocol they share, the scan driver and the result format are in :mod:`.base`.
"""

from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_sgd
from dpgcd_jax.solvers import reference
from dpgcd_jax.solvers.base import Result, Trace

__all__ = ["Result", "Trace", "base", "dp_cd", "dp_gcd", "dp_sgd", "reference"]

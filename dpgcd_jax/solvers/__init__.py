"""Solvers: one module each (`Params`, `State`, `Info`, `init`, `step`, `run`, `fit`).

The protocol they share and the result format are in [`base`][dpgcd_jax.solvers.base], the scan driver in
[`driver`][dpgcd_jax.solvers.driver], the checks of a run's inputs in [`guards`][dpgcd_jax.solvers.guards]. Exports
are imported on first use (`dpgcd_jax._lazy`): one line in `_EXPORTS` per name.

`REGISTRY` names the private solvers, one line each: a solver module listed there is exported here
and at the top level (`dpgcd_jax.<name>`), and the protocol suite (`tests/solvers/test_solver_protocol.py`)
fails until it covers it.
"""

from typing import TYPE_CHECKING

from dpgcd_jax import _lazy

REGISTRY = (
    "dp_gcd",
    "dp_cd",
    "dp_sgd",
    "dp_fw",
    "dp_iht",
    "two_stage",
)
SOLVER_EXPORTS = {name: f"dpgcd_jax.solvers.{name}:" for name in REGISTRY}  # also exported by `dpgcd_jax`

_EXPORTS = {
    **SOLVER_EXPORTS,
    "base": "dpgcd_jax.solvers.base:",
    "reference": "dpgcd_jax.solvers.reference:",
    "streamed": "dpgcd_jax.solvers.streamed:",
    "Result": "dpgcd_jax.solvers.base",
    "Trace": "dpgcd_jax.solvers.base",
    "budget": "dpgcd_jax.solvers.budget:",
    "fit": "dpgcd_jax.solvers.budget",
}

__all__ = sorted([*_EXPORTS, "REGISTRY"])
__getattr__, __dir__ = _lazy.attach(__name__, _EXPORTS)

if TYPE_CHECKING:
  from dpgcd_jax.solvers import base  # noqa: F401
  from dpgcd_jax.solvers import budget  # noqa: F401
  from dpgcd_jax.solvers import dp_cd  # noqa: F401
  from dpgcd_jax.solvers import dp_fw  # noqa: F401
  from dpgcd_jax.solvers import dp_gcd  # noqa: F401
  from dpgcd_jax.solvers import dp_iht  # noqa: F401
  from dpgcd_jax.solvers import dp_sgd  # noqa: F401
  from dpgcd_jax.solvers import reference  # noqa: F401
  from dpgcd_jax.solvers import streamed  # noqa: F401
  from dpgcd_jax.solvers import two_stage  # noqa: F401
  from dpgcd_jax.solvers.base import Result  # noqa: F401
  from dpgcd_jax.solvers.base import Trace  # noqa: F401
  from dpgcd_jax.solvers.budget import fit  # noqa: F401

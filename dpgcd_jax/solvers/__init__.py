"""Solvers: one module each (`Params`, `State`, `Info`, `init`, `step`, `run`, `fit`).

The protocol they share and the result format are in [`base`][dpgcd_jax.solvers.base], the scan driver in
[`driver`][dpgcd_jax.solvers.driver], the checks of a run's inputs in [`guards`][dpgcd_jax.solvers.guards]. Exports
are imported on first use (`dpgcd_jax._lazy`): one line in `_EXPORTS` per name.
"""

from typing import TYPE_CHECKING

from dpgcd_jax import _lazy

_EXPORTS = {
    "base": "dpgcd_jax.solvers.base:",
    "dp_cd": "dpgcd_jax.solvers.dp_cd:",
    "dp_fw": "dpgcd_jax.solvers.dp_fw:",
    "dp_gcd": "dpgcd_jax.solvers.dp_gcd:",
    "dp_iht": "dpgcd_jax.solvers.dp_iht:",
    "dp_sgd": "dpgcd_jax.solvers.dp_sgd:",
    "reference": "dpgcd_jax.solvers.reference:",
    "streamed": "dpgcd_jax.solvers.streamed:",
    "two_stage": "dpgcd_jax.solvers.two_stage:",
    "Result": "dpgcd_jax.solvers.base",
    "Trace": "dpgcd_jax.solvers.base",
    "budget": "dpgcd_jax.solvers.budget:",
    "fit": "dpgcd_jax.solvers.budget",
}

__all__ = sorted(_EXPORTS)
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

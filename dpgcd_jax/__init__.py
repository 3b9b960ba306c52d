"""dpgcd_jax: differentially private greedy coordinate descent (and DP-CD, DP-SGD) in JAX.

Every export is imported on first use (PEP 562, `dpgcd_jax._lazy`): `import dpgcd_jax`
loads neither JAX nor SciPy, dp_accounting or scikit-learn. To export a name, add one line
to `_EXPORTS` (and to the `TYPE_CHECKING` block for type checkers). The private solvers come from
`dpgcd_jax.solvers.REGISTRY`.
"""

from typing import TYPE_CHECKING

from dpgcd_jax import _lazy
from dpgcd_jax.solvers import SOLVER_EXPORTS

__version__ = "0.1.0"

# name -> the module defining it ("module:" for a module itself).
_EXPORTS = {
    # Modules.
    "clipping": "dpgcd_jax.clipping:",
    "discrete_noise": "dpgcd_jax.discrete_noise:",
    "estimators": "dpgcd_jax.estimators:",
    "losses": "dpgcd_jax.losses:",
    "mechanisms": "dpgcd_jax.mechanisms:",
    "penalties": "dpgcd_jax.penalties:",
    "privacy": "dpgcd_jax.privacy:",
    "row_chunks": "dpgcd_jax.row_chunks:",
    **SOLVER_EXPORTS,
    "reference": "dpgcd_jax.solvers.reference:",
    "streamed": "dpgcd_jax.solvers.streamed:",
    "scoring": "dpgcd_jax.scoring:",
    "seeding": "dpgcd_jax.seeding:",
    # Names.
    "Accountant": "dpgcd_jax.privacy.accountant",
    "private_accuracy": "dpgcd_jax.scoring",
    "private_log_loss": "dpgcd_jax.scoring",
    "private_r2": "dpgcd_jax.scoring",
    "PrivacyLeakWarning": "dpgcd_jax._validate",
    "Loss": "dpgcd_jax.losses",
    "custom_loss": "dpgcd_jax.losses",
    "glm_loss": "dpgcd_jax.losses",
    "Problem": "dpgcd_jax.problem",
    "make_problem": "dpgcd_jax.problem",
    "objective": "dpgcd_jax.kernels",
    "kernels": "dpgcd_jax.kernels:",
    "Result": "dpgcd_jax.solvers.base",
    "Trace": "dpgcd_jax.solvers.base",
    "fit": "dpgcd_jax.solvers.budget",
    "dp_greedy_coordinate": "dpgcd_jax.transforms",
    "fresh_key": "dpgcd_jax.seeding",
    "enable_compilation_cache": "dpgcd_jax._config",
    "count_compilations": "dpgcd_jax._config",
    "transforms": "dpgcd_jax.transforms:",
    # scikit-learn estimators.
    "DPGCDClassifier": "dpgcd_jax.estimators",
    "DPGCDClassifierCV": "dpgcd_jax.estimators",
    "DPGCDRegressor": "dpgcd_jax.estimators",
    "DPGCDRegressorCV": "dpgcd_jax.estimators",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = _lazy.attach(__name__, _EXPORTS)

if TYPE_CHECKING:  # what the lazy exports are, for type checkers and IDEs
  from dpgcd_jax import clipping  # noqa: F401
  from dpgcd_jax import discrete_noise  # noqa: F401
  from dpgcd_jax import estimators  # noqa: F401
  from dpgcd_jax import kernels  # noqa: F401
  from dpgcd_jax import losses  # noqa: F401
  from dpgcd_jax import mechanisms  # noqa: F401
  from dpgcd_jax import penalties  # noqa: F401
  from dpgcd_jax import privacy  # noqa: F401
  from dpgcd_jax import row_chunks  # noqa: F401
  from dpgcd_jax import scoring  # noqa: F401
  from dpgcd_jax import seeding  # noqa: F401
  from dpgcd_jax import transforms  # noqa: F401
  from dpgcd_jax._config import count_compilations  # noqa: F401
  from dpgcd_jax._config import enable_compilation_cache  # noqa: F401
  from dpgcd_jax._validate import PrivacyLeakWarning  # noqa: F401
  from dpgcd_jax.estimators import DPGCDClassifier  # noqa: F401
  from dpgcd_jax.estimators import DPGCDClassifierCV  # noqa: F401
  from dpgcd_jax.estimators import DPGCDRegressor  # noqa: F401
  from dpgcd_jax.estimators import DPGCDRegressorCV  # noqa: F401
  from dpgcd_jax.kernels import objective  # noqa: F401
  from dpgcd_jax.losses import Loss  # noqa: F401
  from dpgcd_jax.losses import custom_loss  # noqa: F401
  from dpgcd_jax.losses import glm_loss  # noqa: F401
  from dpgcd_jax.privacy.accountant import Accountant  # noqa: F401
  from dpgcd_jax.problem import Problem  # noqa: F401
  from dpgcd_jax.problem import make_problem  # noqa: F401
  from dpgcd_jax.scoring import private_accuracy  # noqa: F401
  from dpgcd_jax.scoring import private_log_loss  # noqa: F401
  from dpgcd_jax.scoring import private_r2  # noqa: F401
  from dpgcd_jax.seeding import fresh_key  # noqa: F401
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
  from dpgcd_jax.transforms import dp_greedy_coordinate  # noqa: F401

"""dpgcd_jax: differentially private greedy coordinate descent (and DP-CD, DP-SGD) in JAX."""

from dpgcd_jax import clipping
from dpgcd_jax import losses
from dpgcd_jax import penalties
from dpgcd_jax import privacy
from dpgcd_jax import mechanisms  # after privacy: its events module
from dpgcd_jax._validate import PrivacyLeakWarning
from dpgcd_jax.losses import Loss, custom_loss, glm_loss
from dpgcd_jax.problem import Problem, make_problem, objective
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_sgd
from dpgcd_jax.solvers import reference
from dpgcd_jax.solvers.base import Result, Trace
from dpgcd_jax.transforms import dp_greedy_coordinate

__all__ = [
    "DPGCDClassifier", "DPGCDClassifierCV", "DPGCDRegressor", "DPGCDRegressorCV", "estimators",
    "Loss", "PrivacyLeakWarning", "Problem", "Result", "Trace", "clipping", "custom_loss", "dp_cd", "dp_gcd", "dp_sgd",
    "dp_greedy_coordinate", "glm_loss",
    "losses", "make_problem", "mechanisms", "objective", "penalties", "privacy", "reference",
]
__version__ = "0.1.0"

_ESTIMATORS = ("DPGCDClassifier", "DPGCDRegressor", "DPGCDClassifierCV", "DPGCDRegressorCV")


def __getattr__(name):
  """Lazy access to the scikit-learn estimators (scikit-learn is imported only when asked)."""
  if name == "estimators" or name in _ESTIMATORS:
    import importlib  # pylint: disable=g-import-not-at-top
    module = importlib.import_module("dpgcd_jax.estimators")
    return module if name == "estimators" else getattr(module, name)
  raise AttributeError(f"module 'dpgcd_jax' has no attribute {name!r}")

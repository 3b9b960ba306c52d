"""Host-side privacy accounting: epsilon of a run, and noise calibration for a budget.

See :mod:`dpgcd_jax.privacy.accounting` for the mechanisms, the sensitivities the noise
multipliers refer to, and the composition routes.
"""

from dpgcd_jax.privacy.accounting import Calibration
from dpgcd_jax.privacy.accounting import calibrate_cd
from dpgcd_jax.privacy.accounting import calibrate_gcd
from dpgcd_jax.privacy.accounting import calibrate_sgd
from dpgcd_jax.privacy.accounting import cd_epsilon
from dpgcd_jax.privacy.accounting import gcd_epsilon
from dpgcd_jax.privacy.accounting import sgd_epsilon

__all__ = [
    "Calibration", "calibrate_cd", "calibrate_gcd", "calibrate_sgd", "cd_epsilon",
    "gcd_epsilon", "sgd_epsilon",
]

"""Privacy: host-side accounting and calibration, a private smoothness estimate, an audit.

See :mod:`dpgcd_jax.privacy.accounting` for the mechanisms, the sensitivities the noise
multipliers refer to, and the composition routes; :mod:`dpgcd_jax.privacy.auditing` for the
empirical audit; :mod:`dpgcd_jax.privacy.smoothness` for the private estimate of ``M``.
"""

from dpgcd_jax.privacy.accounting import Calibration
from dpgcd_jax.privacy.accounting import calibrate_cd
from dpgcd_jax.privacy.accounting import calibrate_gcd
from dpgcd_jax.privacy.accounting import calibrate_sgd
from dpgcd_jax.privacy.accounting import cd_epsilon
from dpgcd_jax.privacy.accounting import gcd_epsilon
from dpgcd_jax.privacy.accounting import sgd_epsilon
from dpgcd_jax.privacy.auditing import AuditResult
from dpgcd_jax.privacy.auditing import adversarial_neighbour
from dpgcd_jax.privacy.auditing import adversarial_pair
from dpgcd_jax.privacy.auditing import audit
from dpgcd_jax.privacy.smoothness import private_smoothness

__all__ = [
    "AuditResult", "Calibration", "adversarial_neighbour", "adversarial_pair", "audit",
    "calibrate_cd", "calibrate_gcd", "calibrate_sgd", "cd_epsilon", "gcd_epsilon",
    "private_smoothness", "sgd_epsilon",
]

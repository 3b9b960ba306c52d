"""Privacy: events, one ledger, calibration, a private smoothness estimate, an audit.

* :mod:`dpgcd_jax.privacy.events`: what one release of a mechanism costs (``PureDp``,
  ``BoundedRange``, ``Laplace``, ``Gaussian``, ``ZCdp``, ``PoissonSampledGaussian``,
  ``DeltaSlack``).
* :mod:`dpgcd_jax.privacy.ledger`: :class:`Ledger` composes ``(label, event, count)`` entries by
  the best valid route, :class:`PrivacyReport` is what a fit spent, :func:`calibrate` bisects
  any noise scale.
* :mod:`dpgcd_jax.privacy.selection`: private hyperparameter selection (Papernot & Steinke 2022),
  ``RepeatAndSelect``.
* :mod:`dpgcd_jax.privacy.accounting`: the solvers' calibrations (``calibrate_gcd`` ...), thin
  wrappers over the ledger.
* :mod:`dpgcd_jax.privacy.auditing`: the empirical audit; :mod:`dpgcd_jax.privacy.smoothness`:
  the private estimate of ``M``.
"""

from dpgcd_jax.privacy.accounting import Calibration
from dpgcd_jax.privacy.accounting import calibrate_cd
from dpgcd_jax.privacy.accounting import calibrate_gcd
from dpgcd_jax.privacy.accounting import calibrate_sgd
from dpgcd_jax.privacy.accounting import cd_epsilon
from dpgcd_jax.privacy.accounting import cd_ledger
from dpgcd_jax.privacy.accounting import gcd_epsilon
from dpgcd_jax.privacy.accounting import gcd_ledger
from dpgcd_jax.privacy.accounting import sgd_epsilon
from dpgcd_jax.privacy.accounting import sgd_ledger
from dpgcd_jax.privacy.auditing import AuditResult
from dpgcd_jax.privacy.auditing import adversarial_neighbour
from dpgcd_jax.privacy.auditing import adversarial_pair
from dpgcd_jax.privacy.auditing import audit
from dpgcd_jax.privacy.events import BoundedRange
from dpgcd_jax.privacy.events import DeltaSlack
from dpgcd_jax.privacy.events import Gaussian
from dpgcd_jax.privacy.events import Laplace
from dpgcd_jax.privacy.events import PoissonSampledGaussian
from dpgcd_jax.privacy.events import PrivacyEvent
from dpgcd_jax.privacy.events import PureDp
from dpgcd_jax.privacy.events import ZCdp
from dpgcd_jax.privacy.ledger import Entry
from dpgcd_jax.privacy.ledger import Ledger
from dpgcd_jax.privacy.ledger import PrivacyReport
from dpgcd_jax.privacy.ledger import calibrate
from dpgcd_jax.privacy.selection import RepeatAndSelect
from dpgcd_jax.privacy.selection import calibrate_repeat_and_select
from dpgcd_jax.privacy.selection import repeat_and_select_ledger
from dpgcd_jax.privacy.smoothness import private_smoothness

__all__ = [
    "AuditResult", "BoundedRange", "Calibration", "DeltaSlack", "Entry", "Gaussian", "Laplace",
    "Ledger", "PoissonSampledGaussian", "PrivacyEvent", "PrivacyReport", "PureDp",
    "RepeatAndSelect", "ZCdp", "calibrate_repeat_and_select", "repeat_and_select_ledger",
    "adversarial_neighbour", "adversarial_pair", "audit", "calibrate", "calibrate_cd",
    "calibrate_gcd", "calibrate_sgd", "cd_epsilon", "cd_ledger", "gcd_epsilon", "gcd_ledger",
    "private_smoothness", "sgd_epsilon", "sgd_ledger",
]

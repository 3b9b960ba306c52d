"""Privacy: events, one ledger, calibration, a private smoothness estimate, an audit.

* [`dpgcd_jax.privacy.events`][]: what one release of a mechanism costs (`PureDp`,
  `BoundedRange`, `Laplace`, `Gaussian`, `ZCdp`, `PoissonSampledGaussian`,
  `DeltaSlack`, `DiscreteDraws`: the secure samplers' draws, a delta charge, `TotalVariation`:
  another mechanism's distance to the accounted one, charged the same way).
* [`dpgcd_jax.privacy.ledger`][]: [`Ledger`][dpgcd_jax.privacy.Ledger] composes `(label, event, count)` entries by
  the best valid route, [`PrivacyReport`][dpgcd_jax.privacy.PrivacyReport] is what a fit spent,
  [`calibrate`][dpgcd_jax.privacy.calibrate] bisects
  any noise scale.
* [`dpgcd_jax.privacy.tuning`][]: private hyperparameter tuning (Papernot & Steinke 2022),
  `RepeatAndSelect`.
* [`dpgcd_jax.privacy.accountant`][]: [`Accountant`][dpgcd_jax.privacy.Accountant], one total
  `(epsilon, delta)` across every private step on one data set (refuses a step before it
  reads the data).
* [`dpgcd_jax.privacy.accounting`][]: the solvers' calibrations (`calibrate_gcd` ...), thin
  wrappers over the ledger.
* [`dpgcd_jax.privacy.scales`][]: private per-feature scales (a noisy binary search on a
  public log grid), what the estimators' private scaling releases;
  [`dpgcd_jax.privacy.scales_budget`][]: what they cost and from what `n` they pay.
* [`dpgcd_jax.privacy.auditing`][]: the empirical audit, on neighbours from
  [`dpgcd_jax.privacy.audit_neighbours`][]; [`dpgcd_jax.privacy.distinguisher`][]: the
  per-mechanism likelihood-ratio audit; [`dpgcd_jax.privacy.smoothness`][]: the private
  estimate of `M`.

Exports are imported on first use (`dpgcd_jax._lazy`): `from dpgcd_jax.privacy import
bounds` does not load dp_accounting or the PLD accountants. One line in `_EXPORTS` per name.
"""

from typing import TYPE_CHECKING

from dpgcd_jax import _lazy

# name -> the module defining it.
_EXPORTS = {
    "Accountant": "dpgcd_jax.privacy.accountant",
    "BudgetError": "dpgcd_jax.privacy.accountant",
    "current_accountant": "dpgcd_jax.privacy.accountant",
    "Calibration": "dpgcd_jax.privacy.accounting",
    "calibrate_cd": "dpgcd_jax.privacy.baseline_accounting",
    "calibrate_gcd": "dpgcd_jax.privacy.accounting",
    "calibrate_sgd": "dpgcd_jax.privacy.baseline_accounting",
    "cd_epsilon": "dpgcd_jax.privacy.baseline_accounting",
    "cd_ledger": "dpgcd_jax.privacy.baseline_accounting",
    "gcd_draws": "dpgcd_jax.privacy.accounting",
    "gcd_epsilon": "dpgcd_jax.privacy.accounting",
    "gcd_ledger": "dpgcd_jax.privacy.accounting",
    "sgd_epsilon": "dpgcd_jax.privacy.baseline_accounting",
    "sgd_ledger": "dpgcd_jax.privacy.baseline_accounting",
    "AuditResult": "dpgcd_jax.privacy.auditing",
    "adversarial_neighbour": "dpgcd_jax.privacy.audit_neighbours",
    "adversarial_pair": "dpgcd_jax.privacy.audit_neighbours",
    "audit": "dpgcd_jax.privacy.auditing",
    "BoundedRange": "dpgcd_jax.privacy.events",
    "DeltaSlack": "dpgcd_jax.privacy.events",
    "DiscreteDraws": "dpgcd_jax.privacy.events",
    "TotalVariation": "dpgcd_jax.privacy.events",
    "DiscreteGaussian": "dpgcd_jax.privacy.events",
    "DiscreteLaplace": "dpgcd_jax.privacy.events",
    "Gaussian": "dpgcd_jax.privacy.events",
    "Laplace": "dpgcd_jax.privacy.events",
    "PoissonSampledGaussian": "dpgcd_jax.privacy.events",
    "PrivacyEvent": "dpgcd_jax.privacy.events",
    "PureDp": "dpgcd_jax.privacy.events",
    "ZCdp": "dpgcd_jax.privacy.events",
    "Entry": "dpgcd_jax.privacy.ledger",
    "Ledger": "dpgcd_jax.privacy.ledger",
    "PrivacyReport": "dpgcd_jax.privacy.ledger",
    "calibrate": "dpgcd_jax.privacy.calibration",
    "RepeatAndSelect": "dpgcd_jax.privacy.tuning",
    "repeat_and_select_ledger": "dpgcd_jax.privacy.tuning",
    "private_smoothness": "dpgcd_jax.privacy.smoothness",
    "scales": "dpgcd_jax.privacy.scales:",
    "calibrate_scales": "dpgcd_jax.privacy.scales_budget",
    "min_informative_n": "dpgcd_jax.privacy.scales_budget",
    "private_feature_scales": "dpgcd_jax.privacy.scales",
    "scales_informative": "dpgcd_jax.privacy.scales_budget",
    "scales_ledger": "dpgcd_jax.privacy.scales_budget",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = _lazy.attach(__name__, _EXPORTS)

if TYPE_CHECKING:
  from dpgcd_jax.privacy import scales  # noqa: F401
  from dpgcd_jax.privacy.accountant import Accountant  # noqa: F401
  from dpgcd_jax.privacy.accountant import BudgetError  # noqa: F401
  from dpgcd_jax.privacy.accountant import current_accountant  # noqa: F401
  from dpgcd_jax.privacy.accounting import Calibration  # noqa: F401
  from dpgcd_jax.privacy.accounting import calibrate_gcd  # noqa: F401
  from dpgcd_jax.privacy.accounting import gcd_draws  # noqa: F401
  from dpgcd_jax.privacy.accounting import gcd_epsilon  # noqa: F401
  from dpgcd_jax.privacy.accounting import gcd_ledger  # noqa: F401
  from dpgcd_jax.privacy.audit_neighbours import adversarial_neighbour  # noqa: F401
  from dpgcd_jax.privacy.audit_neighbours import adversarial_pair  # noqa: F401
  from dpgcd_jax.privacy.auditing import AuditResult  # noqa: F401
  from dpgcd_jax.privacy.auditing import audit  # noqa: F401
  from dpgcd_jax.privacy.baseline_accounting import calibrate_cd  # noqa: F401
  from dpgcd_jax.privacy.baseline_accounting import calibrate_sgd  # noqa: F401
  from dpgcd_jax.privacy.baseline_accounting import cd_epsilon  # noqa: F401
  from dpgcd_jax.privacy.baseline_accounting import cd_ledger  # noqa: F401
  from dpgcd_jax.privacy.baseline_accounting import sgd_epsilon  # noqa: F401
  from dpgcd_jax.privacy.baseline_accounting import sgd_ledger  # noqa: F401
  from dpgcd_jax.privacy.calibration import calibrate  # noqa: F401
  from dpgcd_jax.privacy.events import BoundedRange  # noqa: F401
  from dpgcd_jax.privacy.events import DeltaSlack  # noqa: F401
  from dpgcd_jax.privacy.events import DiscreteDraws  # noqa: F401
  from dpgcd_jax.privacy.events import DiscreteGaussian  # noqa: F401
  from dpgcd_jax.privacy.events import DiscreteLaplace  # noqa: F401
  from dpgcd_jax.privacy.events import Gaussian  # noqa: F401
  from dpgcd_jax.privacy.events import Laplace  # noqa: F401
  from dpgcd_jax.privacy.events import PoissonSampledGaussian  # noqa: F401
  from dpgcd_jax.privacy.events import PrivacyEvent  # noqa: F401
  from dpgcd_jax.privacy.events import PureDp  # noqa: F401
  from dpgcd_jax.privacy.events import TotalVariation  # noqa: F401
  from dpgcd_jax.privacy.events import ZCdp  # noqa: F401
  from dpgcd_jax.privacy.ledger import Entry  # noqa: F401
  from dpgcd_jax.privacy.ledger import Ledger  # noqa: F401
  from dpgcd_jax.privacy.ledger import PrivacyReport  # noqa: F401
  from dpgcd_jax.privacy.scales import private_feature_scales  # noqa: F401
  from dpgcd_jax.privacy.scales_budget import calibrate_scales  # noqa: F401
  from dpgcd_jax.privacy.scales_budget import min_informative_n  # noqa: F401
  from dpgcd_jax.privacy.scales_budget import scales_informative  # noqa: F401
  from dpgcd_jax.privacy.scales_budget import scales_ledger  # noqa: F401
  from dpgcd_jax.privacy.smoothness import private_smoothness  # noqa: F401
  from dpgcd_jax.privacy.tuning import RepeatAndSelect  # noqa: F401
  from dpgcd_jax.privacy.tuning import repeat_and_select_ledger  # noqa: F401

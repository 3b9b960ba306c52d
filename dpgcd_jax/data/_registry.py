"""The dataset registry, filled by the `register` decorator, and access to cached sets.

Adding a dataset is ONE decorated function, in one place (`_synthetic.py` for generators,
`_real.py` for real data):

```python
@register(kind="generator", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.1,
          summary="200 x 50, 5 true non-zeros")
def tiny(seed: int = 0) -> Raw:
  '''One paragraph: what the data is (it becomes the dataset's description).'''
  ...
  return Raw(X, y, w_true=w)
```

The decorator records a [`DatasetSpec`][dpgcd_jax.data._registry.DatasetSpec] under the function's name and returns a
function with the same arguments that builds the [`Dataset`][dpgcd_jax.data.Dataset] (preprocessing, penalty
strength `lambda_fraction * lambda_max`); [`get`][dpgcd_jax.data._registry.get] finds it by name, `python -m
dpgcd_jax.data list` lists it, and a `kind="cached"` set is downloaded and cached.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import pathlib
import tempfile
import types
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Literal

import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import penalties as penalties_lib
from dpgcd_jax.data import _cache
from dpgcd_jax.data._dataset import Dataset
from dpgcd_jax.data._dataset import PenaltyFactory
from dpgcd_jax.data._dataset import Raw
from dpgcd_jax.data._dataset import prepare_dense

Kind = Literal["generator", "offline", "cached"]
KINDS: tuple[str, ...] = ("generator", "offline", "cached")
Preprocess = Callable[[Raw, losses_lib.Loss], Raw]

_REGISTRY: dict[str, DatasetSpec] = {}
DATASETS: Mapping[str, DatasetSpec] = types.MappingProxyType(_REGISTRY)  # live, read-only view


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """Registry entry: what a dataset is, without loading it.

  Attributes:
    name: Registry name.
    kind: `"generator"` (seeded), `"offline"` (real data shipped with installed
      packages) or `"cached"` (downloaded once into the cache).
    loss: The [`dpgcd_jax.Loss`][].
    penalty: Factory of the penalty from its strength (e.g. `penalties.L1`), or None
      for no penalty.
    lambda_fraction: Penalty strength as a fraction of `lambda_max` (None without penalty).
    l2: Smooth ridge strength.
    summary: One line for listings.
    build: The decorated function: `(seed, **options) -> Raw` for generators,
      `() -> Raw` for offline sets, `(retrieve) -> Raw` (raw data) for cached sets.
    preprocess: Applied to the raw data before the [`Dataset`][dpgcd_jax.data.Dataset] is built (None: none).
    urls: Sources of a cached set.
    shape: Raw `(n, p)` a cached set's source must have.
  """

  name: str
  kind: Kind
  loss: losses_lib.Loss
  penalty: PenaltyFactory | None
  lambda_fraction: float | None
  l2: float
  summary: str
  build: Callable[..., Raw] = dataclasses.field(repr=False)
  preprocess: Preprocess | None = dataclasses.field(default=None, repr=False)
  urls: tuple[str, ...] = ()
  shape: tuple[int, int] | None = None

  @property
  def description(self) -> str:
    """The first paragraph of the decorated function's docstring, on one line."""
    doc = inspect.getdoc(self.build) or self.summary
    return " ".join(doc.split("\n\n")[0].split())

  @property
  def cached_shape(self) -> tuple[int, int]:
    """`shape`, which every cached set has ([`register`][dpgcd_jax.data._registry.register] requires it)."""
    if self.shape is None:
      raise ValueError(f"Expected a raw shape (n, p) for the dataset {self.name!r}, got shape=None.")
    return self.shape

  def assemble(self, raw: Raw) -> Dataset:
    """Preprocesses raw data and builds the [`Dataset`][dpgcd_jax.data.Dataset] with this spec's objective."""
    if self.preprocess is not None:
      raw = self.preprocess(raw, self.loss)
    ds = Dataset(name=self.name, X=raw.X, y=raw.y, loss=self.loss, penalty=penalties_lib.Zero(), l2=self.l2,
                 description=raw.description or self.description, source=raw.source or ", ".join(self.urls),
                 w_true=raw.w_true)
    if self.penalty is None:
      return ds
    if self.lambda_fraction is None:
      raise ValueError(f"Expected a lambda_fraction with the penalty of the dataset {self.name!r}, got None.")
    return ds.with_lambda_fraction(self.lambda_fraction, self.penalty)


def register(
    *,
    kind: Kind,
    loss: losses_lib.Loss | str,
    summary: str,
    penalty: PenaltyFactory | None = None,
    lambda_fraction: float | None = None,
    l2: float = 0.0,
    name: str | None = None,
    preprocess: Preprocess | None | Literal["default"] = "default",
    urls: tuple[str, ...] = (),
    shape: tuple[int, int] | None = None,
) -> Callable[[Callable[..., Raw]], Callable[..., Dataset]]:
  """Decorator that registers a dataset function (see the module docstring).

  Args:
    kind: `"generator"`, `"offline"` or `"cached"`.
    loss: The loss (a [`dpgcd_jax.Loss`][] or a built-in name).
    summary: One line for listings.
    penalty: Penalty factory from its strength, e.g. `penalties.L1`; None for none.
    lambda_fraction: Strength as a fraction of `lambda_max`; required with `penalty`.
    l2: Smooth ridge strength, >= 0.
    name: Registry name (default: the function's name).
    preprocess: Applied to the raw data; `"default"` means none for generators and
      `prepare_dense` (standardization) for real data.
    urls: Sources of a cached set (required for `kind="cached"`).
    shape: Raw `(n, p)` of a cached set's source (required for `kind="cached"`).

  Returns:
    The decorator. It returns, for generators and offline sets, a function with the same
    arguments that returns the [`Dataset`][dpgcd_jax.data.Dataset]; for cached sets, a function
    `(*, cache_dir=None, download_if_missing=True) -> Dataset` (see [`fetch`][dpgcd_jax.data._registry.fetch]).

  Raises:
    ValueError: A bad argument (named), or a name that is already registered.
  """
  _validate.check_choice("kind", kind, KINDS)
  loss = losses_lib.get(loss)
  _validate.check_positive("l2", l2, allow_zero=True)
  if (penalty is None) != (lambda_fraction is None):
    raise ValueError(
        f"Expected penalty and lambda_fraction to be given together, got penalty={penalty!r}, "
        f"lambda_fraction={lambda_fraction!r}."
    )
  if lambda_fraction is not None:
    _validate.check_positive("lambda_fraction", lambda_fraction, allow_zero=True)
  if kind == "cached" and (not urls or shape is None):
    raise ValueError(f"Expected urls and shape for kind='cached', got urls={urls!r}, shape={shape!r}.")
  if shape is not None and len(shape) != 2:
    raise ValueError(f"Expected shape=(n, p), got shape={shape!r}.")
  if preprocess == "default":
    preprocess = None if kind == "generator" else prepare_dense

  def decorate(fn: Callable[..., Raw]) -> Callable[..., Dataset]:
    key = fn.__name__ if name is None else name
    if not isinstance(key, str) or not key:
      raise ValueError(f"Expected name to be a non-empty str, got name={key!r}.")
    if key in _REGISTRY:
      raise ValueError(f"Expected a new dataset name, got name={key!r}, which is already registered.")
    spec = DatasetSpec(name=key, kind=kind, loss=loss, penalty=penalty, lambda_fraction=lambda_fraction, l2=l2,
                       summary=summary, build=fn, preprocess=preprocess, urls=tuple(urls),
                       shape=None if shape is None else (shape[0], shape[1]))
    _REGISTRY[key] = spec
    if kind == "cached":

      def load(*, cache_dir: _cache.PathLike | None = None, download_if_missing: bool = True) -> Dataset:
        return fetch(key, cache_dir=cache_dir, download_if_missing=download_if_missing)

      load.__name__, load.__qualname__, load.__module__ = fn.__name__, fn.__qualname__, fn.__module__
      load.__doc__ = fn.__doc__
      return load

    @functools.wraps(fn)
    def build(*args: Any, **kwargs: Any) -> Dataset:
      return spec.assemble(fn(*args, **kwargs))

    build.__annotations__ = {**fn.__annotations__, "return": "Dataset"}
    # typeshed declares no __signature__ (which inspect.signature reads) on functions.
    build.__signature__ = inspect.signature(fn).replace(return_annotation="Dataset")  # type: ignore[attr-defined]
    return build

  return decorate


def names(*kinds: str) -> tuple[str, ...]:
  """Registered names, in registration order, of the given kinds (all kinds if none given)."""
  for kind in kinds:
    _validate.check_choice("kind", kind, KINDS)
  return tuple(key for key, spec in _REGISTRY.items() if not kinds or spec.kind in kinds)


def spec(name: str) -> DatasetSpec:
  """The [`DatasetSpec`][dpgcd_jax.data._registry.DatasetSpec] of a registered name."""
  return _REGISTRY[_validate.check_choice("name", name, tuple(_REGISTRY))]


def get(name: str, *, seed: int = 0, cache_dir: _cache.PathLike | None = None, **options: Any) -> Dataset:
  """Builds any registered dataset.

  Args:
    name: A registered name (see [`names`][dpgcd_jax.data._registry.names]).
    seed: Non-negative int, used by generators (ignored by real data).
    cache_dir: Cache folder for the cached sets (see [`fetch`][dpgcd_jax.data._registry.fetch]).
    **options: Keyword arguments of a generator (e.g. `n=`, `p=`); generators only.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset].

  Raises:
    ValueError: Unknown name, bad seed or options for a set that takes none.
    DatasetNotAvailable: A cached set is missing and cannot be downloaded.
  """
  entry = spec(name)
  seed = _validate.check_int("seed", seed, low=0)
  if options and entry.kind != "generator":
    raise ValueError(f"Expected no options for the {entry.kind} set {name!r}, got {sorted(options)}.")
  if entry.kind == "cached":
    return fetch(name, cache_dir=cache_dir)
  if entry.kind == "generator":
    return entry.assemble(entry.build(seed, **options))
  return entry.assemble(entry.build())


# ------------------------------------------------------------------------------ cached sets


def _cached(name: Any) -> DatasetSpec:
  return spec(_validate.check_choice("name", name, names("cached")))


def _instructions(entry: DatasetSpec, cache_dir: _cache.PathLike | None) -> str:
  folder = _cache.cache_paths(entry.name, cache_dir)[0].parent
  return _cache.how_to_fetch(entry.name, folder, entry.urls, entry.cached_shape)


def write_cache(
    name: str, X: Any, y: Any, *, cache_dir: _cache.PathLike | None = None, source: tuple[str, ...] = ()
) -> pathlib.Path:
  """Writes raw data of a cached dataset in the cache format (see [`dpgcd_jax.data`][]).

  Args:
    name: A cached set's name.
    X: Raw features (n, p), numeric and finite, dense or `scipy.sparse`; stored as is.
    y: Raw targets or labels (n,).
    cache_dir: Cache folder (created if needed); `default_cache_dir` if None.
    source: URLs recorded in the metadata.

  Returns:
    The path of the written `.npz` file.
  """
  return _cache.write_arrays(_cached(name).name, X, y, cache_dir=cache_dir, source=source)


def load_cached(name: str, cache_dir: _cache.PathLike | None = None) -> Dataset:
  """Loads a cached dataset without any network access and preprocesses it.

  Args:
    name: A cached set's name (`names("cached")`).
    cache_dir: Cache folder; `default_cache_dir` if None.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (preprocessed as documented by the set).

  Raises:
    DatasetNotAvailable: The files are missing, do not match their checksum, or do not
      hold the documented arrays; the message says how to fetch the data.
  """
  entry = _cached(name)
  x, t = _cache.read_arrays(entry.name, cache_dir, _instructions(entry, cache_dir))
  return entry.assemble(Raw(x, t))


def download(name: str, cache_dir: _cache.PathLike | None = None, *, timeout: float = 60.0) -> pathlib.Path:
  """Downloads a dataset from its official source and writes it to the cache.

  Needs network access. Files are fetched with `pooch.retrieve` into a temporary
  folder (checksums checked where the source publishes them); the raw arrays are checked
  against the documented shape before anything is written to the cache.

  Args:
    name: A cached set's name.
    cache_dir: Cache folder; `default_cache_dir` if None.
    timeout: Seconds allowed for each request.

  Returns:
    The path of the written `.npz` file.

  Raises:
    OSError: (including `urllib.error.URLError`) when the source cannot be reached.
    ValueError: A checksum mismatch, or downloaded data without the documented shape.
  """
  entry = _cached(name)
  _validate.check_positive("timeout", timeout)
  with tempfile.TemporaryDirectory(prefix="dpgcd_jax-download-") as folder:
    raw = entry.build(_cache.Retriever(folder, timeout))
  if raw.X.shape != entry.cached_shape or np.shape(raw.y) != (entry.cached_shape[0],):
    raise ValueError(
        f"Downloaded {name!r} has X.shape={raw.X.shape}, y.shape={np.shape(raw.y)}; expected X.shape={entry.shape}. "
        "The source may have changed."
    )
  return _cache.write_arrays(entry.name, raw.X, raw.y, cache_dir=cache_dir, source=entry.urls)


def fetch(name: str, *, cache_dir: _cache.PathLike | None = None, download_if_missing: bool = True) -> Dataset:
  """Loads a cached dataset, downloading it first when the cache is missing or corrupt.

  Never falls back to other data: when the cache is unusable and the download fails,
  raises [`DatasetNotAvailable`][dpgcd_jax.data.DatasetNotAvailable] saying how to fetch the data.

  Args:
    name: A cached set's name.
    cache_dir: Cache folder; `default_cache_dir` (`$DPGCD_DATA`) if None.
    download_if_missing: Whether to try the network when the cache is unusable.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (see [`load_cached`][dpgcd_jax.data._registry.load_cached]).
  """
  _cached(name)
  try:
    return load_cached(name, cache_dir)
  except _cache.DatasetNotAvailable as cache_error:
    if not download_if_missing:
      raise
    try:
      download(name, cache_dir)
    except OSError as net_error:
      raise _cache.DatasetNotAvailable(f"{cache_error}\nDownloading it failed too: {net_error!r}.") from net_error
  return load_cached(name, cache_dir)

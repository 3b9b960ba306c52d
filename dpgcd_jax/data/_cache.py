"""The local cache of downloaded datasets, and downloads through pooch.

Cache format (one pair of files per dataset, in `default_cache_dir`, which is
`$DPGCD_DATA` when set and `~/.cache/dpgcd_jax` otherwise):

* `<name>.npz`: `numpy.savez_compressed` of the RAW data (before any preprocessing;
  labels as in the source): `y` (n,) and either `X` (n, p) for dense features or, for
  sparse ones, the CSR parts `X_data`, `X_indices`, `X_indptr` and `X_shape`.
* `<name>.json`: `{"format_version": 1, "name": ..., "n": ..., "p": ..., "sha256": <hex
  digest of the .npz file>, "source": [urls], "created": <ISO date>}` (plus
  `"X_format": "csr"` for sparse features).

`write_arrays` writes this format atomically, so data obtained some other way (for
instance copied from a machine with network) can be dropped in.

Downloads go through `pooch.retrieve` (checksum check when the source publishes one,
atomic write, hash logged otherwise) with a urllib transport (`UrllibDownloader`):
`http(s)://` and `file://` URLs, a timeout, and one place for the tests to fake.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import os
import pathlib
import tempfile
import urllib.request
from collections.abc import Sequence
from typing import Any
from typing import TypeAlias

import numpy as np
from scipy import sparse

from dpgcd_jax import _validate

CACHE_ENV_VAR = "DPGCD_DATA"
CACHE_FORMAT_VERSION = 1
PathLike: TypeAlias = str | os.PathLike
_GZIP_MAGIC = b"\x1f\x8b"
_CSR_KEYS = ("X_data", "X_indices", "X_indptr", "X_shape")


class DatasetNotAvailable(ValueError):
  """A cached dataset is missing or corrupt and cannot be downloaded here.

  The message says which file is wrong and exactly how to obtain the data.
  """


def default_cache_dir() -> pathlib.Path:
  """`$DPGCD_DATA` when set (and non-empty), else `~/.cache/dpgcd_jax`."""
  env = os.environ.get(CACHE_ENV_VAR)
  if env:
    return pathlib.Path(env).expanduser()
  return pathlib.Path("~/.cache/dpgcd_jax").expanduser()


def cache_paths(name: str, cache_dir: PathLike | None) -> tuple[pathlib.Path, pathlib.Path]:
  """The `.npz` and `.json` paths of `name` in `cache_dir` (default folder if None)."""
  folder = default_cache_dir() if cache_dir is None else pathlib.Path(cache_dir).expanduser()
  return folder / f"{name}.npz", folder / f"{name}.json"


def how_to_fetch(name: str, folder: pathlib.Path, urls: Sequence[str], shape: tuple[int, int]) -> str:
  """The instructions appended to every [`DatasetNotAvailable`][dpgcd_jax.data._cache.DatasetNotAvailable] message."""
  return (
      f"To get it, run on a machine with network access:\n"
      f"    python -m dpgcd_jax.data download {name}\n"
      f"(or dpgcd_jax.data.download({name!r}) in Python), then copy {name}.npz and {name}.json from its "
      f"cache folder (${CACHE_ENV_VAR}, default ~/.cache/dpgcd_jax) into {folder} (or point ${CACHE_ENV_VAR} "
      f"at them). Alternatively, download {', '.join(urls)} yourself and write the arrays with "
      f"dpgcd_jax.data.write_cache({name!r}, X, y, cache_dir={str(folder)!r}) (raw X {shape[0]} x "
      f"{shape[1]}, raw y)."
  )


def sha256(path: pathlib.Path) -> str:
  """Hex SHA-256 digest of a file, read in blocks."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def _check_raw(X: Any, y: Any) -> tuple[Any, np.ndarray]:
  t = np.asarray(y)
  if sparse.issparse(X):
    x = sparse.csr_array(X)
    if not np.issubdtype(x.dtype, np.number) or not np.all(np.isfinite(x.data)):
      raise ValueError(f"Expected X to be numeric and finite, got a sparse X of dtype {x.dtype}.")
  else:
    x = np.asarray(X)
    _validate.check_finite_array("X", x, ndim=2)
  _validate.check_finite_array("y", t, ndim=1)
  if x.shape[0] != t.shape[0]:
    raise ValueError(f"Expected X and y to have as many rows, got X.shape={x.shape}, y.shape={t.shape}.")
  return x, t


def write_arrays(
    name: str, X: Any, y: Any, *, cache_dir: PathLike | None = None, source: Sequence[str] = ()
) -> pathlib.Path:
  """Writes raw arrays in the cache format; both files go to temporary names, then are renamed.

  An interrupted write never leaves a file that passes the checksum. `X` may be a
  `scipy.sparse` matrix (stored as CSR parts). Returns the path of the `.npz` file.
  """
  x, t = _check_raw(X, y)
  npz_path, json_path = cache_paths(name, cache_dir)
  npz_path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=npz_path.parent, prefix=f".{name}.", suffix=".npz")
  os.close(fd)
  tmp_npz = pathlib.Path(tmp)
  if sparse.issparse(x):
    arrays = dict(X_data=x.data, X_indices=x.indices, X_indptr=x.indptr, X_shape=np.array(x.shape))
  else:
    arrays = dict(X=x)
  try:
    np.savez_compressed(tmp_npz, y=t, **arrays)
    meta = {
        "format_version": CACHE_FORMAT_VERSION,
        "name": name,
        "n": int(x.shape[0]),
        "p": int(x.shape[1]),
        "sha256": sha256(tmp_npz),
        "source": list(source),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if sparse.issparse(x):
      meta["X_format"] = "csr"
    tmp_json = json_path.with_name(f".{json_path.name}.tmp")
    tmp_json.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp_npz, npz_path)
    os.replace(tmp_json, json_path)
  finally:
    tmp_npz.unlink(missing_ok=True)
  return npz_path


def read_arrays(name: str, cache_dir: PathLike | None, instructions: str) -> tuple[Any, np.ndarray]:
  """Reads and checks raw cached arrays.

  Args:
    name: File stem in the cache.
    cache_dir: Cache folder (default folder if None).
    instructions: How to fetch the data, appended to every error message.

  Returns:
    `(X, y)`: X dense, or a `scipy.sparse.csr_array` when stored as CSR parts.

  Raises:
    DatasetNotAvailable: A file is missing, the checksum or the metadata do not match, or
      the arrays are not the documented ones.
  """
  npz_path, json_path = cache_paths(name, cache_dir)
  folder = npz_path.parent
  missing = [str(path) for path in (npz_path, json_path) if not path.is_file()]
  if missing:
    raise DatasetNotAvailable(f"Dataset {name!r} is not in the cache: missing {', '.join(missing)}.\n{instructions}")

  def corrupt(why: str) -> DatasetNotAvailable:
    return DatasetNotAvailable(
        f"Dataset {name!r}: the cache in {folder} is corrupt ({why}). Delete {npz_path.name} and "
        f"{json_path.name} and fetch it again.\n{instructions}"
    )

  try:
    meta = json.loads(json_path.read_text())
    digest, n, p, version = str(meta["sha256"]), int(meta["n"]), int(meta["p"]), int(meta["format_version"])
  except (ValueError, KeyError, TypeError, OSError) as e:
    raise corrupt(f"unreadable metadata {json_path.name}: {e}") from e
  if version != CACHE_FORMAT_VERSION:
    raise corrupt(f"format_version={version}, expected {CACHE_FORMAT_VERSION}")
  if sha256(npz_path) != digest:
    raise corrupt(f"the sha256 of {npz_path.name} does not match {json_path.name}")
  try:
    with np.load(npz_path, allow_pickle=False) as archive:
      t = archive["y"]
      if all(key in archive for key in _CSR_KEYS):
        parts = [archive[key] for key in _CSR_KEYS]
        x = sparse.csr_array((parts[0], parts[1], parts[2]), shape=tuple(int(s) for s in parts[3]))
        values = x.data
      else:
        x = values = archive["X"]
  except (ValueError, KeyError, OSError, EOFError, TypeError) as e:
    raise corrupt(f"unreadable {npz_path.name}: {e}") from e
  if x.ndim != 2 or t.shape != (x.shape[0],) or x.shape != (n, p):
    raise corrupt(f"X.shape={x.shape}, y.shape={t.shape}, metadata says n={n}, p={p}")
  if not (np.issubdtype(values.dtype, np.number) and np.issubdtype(t.dtype, np.number)):
    raise corrupt(f"non-numeric arrays (X.dtype={values.dtype}, y.dtype={t.dtype})")
  if not (np.all(np.isfinite(values)) and np.all(np.isfinite(t))):
    raise corrupt("NaN or infinite values")
  return x, t


class UrllibDownloader:
  """A pooch downloader over `urllib.request.urlopen`: `http(s)://` and `file://` URLs.

  A body that is gzip data is decompressed unless the URL names a compressed file
  (`.gz` / `.tgz`), so checksums apply to the served file's content.

  Args:
    timeout: Seconds allowed for the request.
  """

  def __init__(self, timeout: float):
    _validate.check_positive("timeout", timeout)
    self.timeout = float(timeout)

  def __call__(self, url: str, output_file: Any, pooch_instance: Any, check_only: bool = False) -> bool | None:
    del pooch_instance
    request = urllib.request.Request(url, headers={"User-Agent": "dpgcd_jax-data"})
    with urllib.request.urlopen(request, timeout=self.timeout) as response:
      body = response.read()
    if check_only:
      return True
    if body[:2] == _GZIP_MAGIC and not url.endswith((".gz", ".tgz")):
      body = gzip.decompress(body)
    if hasattr(output_file, "write"):
      output_file.write(body)
    else:
      pathlib.Path(output_file).write_bytes(body)
    return None


class Retriever:
  """Downloads files for a loader: `retrieve(url, known_hash=None) -> local path`.

  Every file goes through `pooch.retrieve` into `folder` (a file already there
  with a matching hash is reused). `known_hash` is `"md5:<hex>"` / `"sha256:<hex>"`;
  a mismatch raises `ValueError` and keeps nothing.

  Args:
    folder: Where the downloaded files go.
    timeout: Seconds allowed for each request.
  """

  def __init__(self, folder: PathLike, timeout: float = 60.0):
    self.folder = pathlib.Path(folder)
    self.downloader = UrllibDownloader(timeout)

  def __call__(self, url: str, known_hash: str | None = None) -> pathlib.Path:
    pooch = _validate.optional_module("pooch", "downloads of real data sets", "data")
    path = pooch.retrieve(url, known_hash=known_hash, path=self.folder, downloader=self.downloader,
                          progressbar=False)
    return pathlib.Path(path)

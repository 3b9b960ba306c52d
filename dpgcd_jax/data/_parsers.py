"""Readers of the downloaded file formats: ARFF (via liac-arff), OpenML, NIPS 2003 sparse binary."""

from __future__ import annotations

import json
import pathlib
import tarfile
from collections.abc import Callable

import numpy as np
from scipy import sparse

from dpgcd_jax import _validate

OPENML_API = "https://www.openml.org/api/v1/json/data/{}"
Retrieve = Callable[..., pathlib.Path]


def read_arff(text: str) -> tuple[list[str], np.ndarray]:
  """Parses a numeric ARFF file (dense or sparse rows) with liac-arff.

  Nominal attributes are encoded by their index in the declared list of values; missing
  values (`?`) become NaN. String and date attributes are rejected.

  liac-arff is the parser of OpenML's own Python client; `scipy.io.arff` was not used
  because it silently drops extra values of a row, rejects quoted nominal values and has
  no sparse rows.

  Args:
    text: The ARFF file's content.

  Returns:
    Attribute names and the data, float64 (n_rows, n_attributes).

  Raises:
    ValueError: A malformed file (the parser's message, with its line number) or a
      non-numeric attribute.
  """
  arff = _validate.optional_module("arff", "ARFF files (liac-arff)", "data")
  try:
    parsed = arff.loads(text, encode_nominal=True, return_type=arff.DENSE)
  except arff.ArffException as e:
    raise ValueError(f"Malformed ARFF file: {e}") from e
  names = [attr for attr, _ in parsed["attributes"]]
  for attr, kind in parsed["attributes"]:
    if not isinstance(kind, list) and kind.upper() not in ("NUMERIC", "REAL", "INTEGER"):
      raise ValueError(f"Expected numeric or nominal ARFF attributes, got attribute {attr!r} of type {kind}.")
  # Missing values are None, which NumPy converts to NaN in a float array.
  return names, np.array(parsed["data"], dtype=np.float64).reshape(-1, len(names))


def openml(data_id: int, retrieve: Retrieve) -> tuple[np.ndarray, np.ndarray]:
  """Downloads an OpenML dataset (ARFF, MD5-checked) and splits off its default target.

  Args:
    data_id: The OpenML dataset id.
    retrieve: Downloads a URL to a local path (`retrieve(url, known_hash=None)`).

  Returns:
    Raw `(X, y)`, float64.
  """
  meta = json.loads(retrieve(OPENML_API.format(data_id)).read_text())["data_set_description"]
  md5 = meta.get("md5_checksum")
  path = retrieve(meta["url"], known_hash=f"md5:{md5}" if md5 else None)
  names, data = read_arff(path.read_text(encoding="utf-8"))
  target = meta["default_target_attribute"]
  if target not in names:
    raise ValueError(f"OpenML dataset {data_id}: target {target!r} not among the attributes.")
  j = names.index(target)
  x, t = np.delete(data, j, axis=1), data[:, j]
  if not (np.all(np.isfinite(x)) and np.all(np.isfinite(t))):
    raise ValueError(f"OpenML dataset {data_id} has missing values; this loader does not impute them.")
  return x, t


def read_sparse_binary(text: str, p: int) -> sparse.csr_array:
  """NIPS 2003 sparse binary format: each line lists the 1-based indices of its ones.

  Args:
    text: The file's content.
    p: Number of features.

  Returns:
    A `scipy.sparse.csr_array` of 0 / 1 (uint8), one row per non-empty line.
  """
  lines = [line.split() for line in text.splitlines() if line.strip()]
  counts = np.array([len(tokens) for tokens in lines], dtype=np.int64)
  indices = np.array([token for tokens in lines for token in tokens], dtype=np.int64) - 1
  if indices.size and (indices.min() < 0 or indices.max() >= p):
    row = int(np.searchsorted(np.cumsum(counts), np.flatnonzero((indices < 0) | (indices >= p))[0], side="right"))
    raise ValueError(f"Feature index out of [1, {p}] on line {row + 1}.")
  indptr = np.concatenate([[0], np.cumsum(counts)])
  x = sparse.csr_array((np.ones(indices.size, np.uint8), indices, indptr), shape=(len(lines), p))
  x.sum_duplicates()
  x.data[:] = 1
  return x


def california_features(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """cal_housing.data columns -> 8 features and the target in units of $100,000.

  Raw columns: longitude, latitude, housingMedianAge, totalRooms, totalBedrooms,
  population, households, medianIncome, medianHouseValue. Features (as in scikit-learn):
  MedInc, HouseAge, AveRooms = rooms / households, AveBedrms = bedrooms / households,
  Population, AveOccup = population / households, Latitude, Longitude.
  """
  lon, lat, age, rooms, bedrooms, population, households, income, value = raw.T
  x = np.stack(
      [income, age, rooms / households, bedrooms / households, population, population / households, lat, lon],
      axis=1,
  )
  return x, value / 100000.0


def read_tar_member(path: pathlib.Path, suffix: str) -> np.ndarray:
  """Loads the comma-separated numeric member of a `.tgz` whose name ends with `suffix`."""
  with tarfile.open(path, mode="r:gz") as archive:
    member = next((m for m in archive.getmembers() if m.name.endswith(suffix)), None)
    handle = None if member is None else archive.extractfile(member)
    if handle is None:
      raise ValueError(f"{path.name}: no regular file ending with {suffix!r}.")
    return np.loadtxt(handle, delimiter=",", ndmin=2)

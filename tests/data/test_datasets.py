"""Tests of `dpgcd_jax.data` (formerly dpgcd_jax.datasets): generators, offline real data, the cache.

No test touches the network: ``urllib.request.urlopen`` (the transport under pooch) is
replaced wherever a download could be attempted, either by a function that fails the test
or by a fake server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tarfile
import urllib.error
import urllib.request
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.linear_model import Lasso
from sklearn.linear_model import LogisticRegression

from dpgcd_jax import data
from dpgcd_jax import losses
from dpgcd_jax import penalties
from dpgcd_jax.data import _registry


def _assert_standardized(x: np.ndarray) -> None:
  assert x.dtype == np.float64
  np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-10)
  np.testing.assert_allclose(x.var(axis=0), 1.0, rtol=1e-10)


@pytest.fixture(scope="module")
def built() -> dict[str, data.Dataset]:
  """Every offline dataset, built once (seed 0)."""
  return {name: data.get(name, seed=0) for name in data.OFFLINE}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
  def urlopen(*args, **kwargs):
    raise AssertionError(f"network access attempted: {args!r}")

  monkeypatch.setattr(urllib.request, "urlopen", urlopen)


@pytest.fixture
def cache(tmp_path, monkeypatch: pytest.MonkeyPatch):
  """An empty cache folder, selected through the DPGCD_DATA environment variable."""
  folder = tmp_path / "cache"
  monkeypatch.setenv("DPGCD_DATA", str(folder))
  return folder


# ------------------------------------------------------------------------- generators


@pytest.mark.parametrize(
    "name, shape",
    [("log1", (1000, 100)), ("log2", (1000, 100)), ("square", (1000, 1000)), ("madelon_synth", (2600, 500))],
)
def test_generator_shape_and_standardized_columns(built, name, shape):
  ds = built[name]
  assert (ds.n, ds.p) == shape == ds.X.shape
  assert ds.y.shape == (ds.n,) and ds.y.dtype == np.float64
  _assert_standardized(ds.X)


@pytest.mark.parametrize("name, sigma", [("log1", 1.0), ("log2", 2.0)])
def test_log_generators(built, name, sigma):
  ds = built[name]
  assert set(np.unique(ds.y)) == {-1.0, 1.0}
  assert 0.3 < np.mean(ds.y == 1.0) < 0.7
  assert ds.loss is losses.logistic and isinstance(ds.penalty, penalties.Zero)
  assert (ds.penalty_strength, ds.l2, ds.lambda_fraction) == (0.0, 1e-3, None)
  # w_true ~ LogNormal(0, sigma): log(w) is N(0, sigma^2) on p = 100 draws.
  assert np.all(ds.w_true > 0)
  log_w = np.log(ds.w_true)
  assert abs(log_w.mean()) < 0.4 * sigma
  assert abs(log_w.std() - sigma) < 0.25 * sigma
  # The labels follow sign(X w_true): noise of unit scale barely flips any.
  assert np.mean(np.sign(ds.X @ ds.w_true) == ds.y) > 0.9


def test_square_generator(built):
  ds = built["square"]
  assert ds.true_nnz == 10 == np.count_nonzero(ds.w_true)
  assert np.all(np.abs(ds.w_true[ds.w_true != 0]) >= 1.0)
  residual = ds.y - ds.X @ ds.w_true
  assert abs(residual.std() - 1.0) < 0.1  # noise N(0, 1)
  assert ds.loss is losses.squared and isinstance(ds.penalty, penalties.L1) and ds.lambda_fraction == 0.1
  np.testing.assert_allclose(ds.penalty_strength, 0.1 * np.max(np.abs(ds.X.T @ ds.y)) / ds.n, rtol=1e-12)


def test_madelon_synth_generator(built):
  ds = built["madelon_synth"]
  assert set(np.unique(ds.y)) == {-1.0, 1.0}
  assert abs(np.mean(ds.y == 1.0) - 0.5) < 0.05
  assert ds.loss is losses.logistic and isinstance(ds.penalty, penalties.L1) and ds.lambda_fraction == 0.05
  # 15 redundant features are linear combinations of the 5 informative ones; the 480
  # probes are independent noise: rank 5 + 480.
  assert np.linalg.matrix_rank(ds.X) == 485
  correlation = np.abs(ds.X.T @ ds.y) / ds.n
  assert np.sum(correlation > 0.1) >= 1 and np.sum(correlation > 0.1) <= 20  # only relevant features correlate with y.


@pytest.mark.parametrize("name", ["log1", "log2", "square"])
def test_generators_are_deterministic(built, name):
  same = data.get(name, seed=0)
  other = data.get(name, seed=1)
  np.testing.assert_array_equal(same.X, built[name].X)
  np.testing.assert_array_equal(same.y, built[name].y)
  np.testing.assert_array_equal(same.w_true, built[name].w_true)
  assert not np.array_equal(other.X, same.X)
  assert not np.array_equal(other.w_true, same.w_true)


def test_madelon_synth_is_deterministic(built):
  ds = data.madelon_synth(0, n=300)
  again = data.madelon_synth(0, n=300)
  other = data.madelon_synth(1, n=300)
  np.testing.assert_array_equal(ds.X, again.X)
  np.testing.assert_array_equal(ds.y, again.y)
  assert not np.array_equal(ds.X, other.X)


@pytest.mark.parametrize("seed", [0, 1])
def test_square_lambda_gives_about_ten_nonzeros(seed):
  ds = data.square(seed)
  # sklearn's Lasso minimizes (1 / 2n) ||y - X w||^2 + alpha ||w||_1: our objective.
  model = Lasso(alpha=ds.penalty_strength, fit_intercept=False, tol=1e-10, max_iter=100_000).fit(ds.X, ds.y)
  nnz = int(np.count_nonzero(model.coef_))
  assert 10 <= nnz <= 12, nnz
  assert set(np.flatnonzero(ds.w_true)) <= set(np.flatnonzero(model.coef_))


# ------------------------------------------------------------------------- lambda_max


def test_lambda_max_squared_is_the_lasso_threshold(built):
  ds = built["diabetes"]
  lam = ds.lambda_max
  at = Lasso(alpha=lam * 1.0001, fit_intercept=False, tol=1e-12).fit(ds.X, ds.y).coef_
  below = Lasso(alpha=lam * 0.99, fit_intercept=False, tol=1e-12).fit(ds.X, ds.y).coef_
  assert np.count_nonzero(at) == 0
  assert np.count_nonzero(below) >= 1


def test_lambda_max_logistic_is_the_l1_threshold(built):
  ds = built["breast_cancer"]
  lam = ds.lambda_max

  def nnz(alpha: float) -> int:
    # sklearn: C * sum_i log(1 + exp(-y_i x_i w)) + ||w||_1, i.e. ours with C = 1 / (n alpha).
    model = LogisticRegression(
        l1_ratio=1.0, C=1.0 / (ds.n * alpha), solver="liblinear", fit_intercept=False, tol=1e-10
    )
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")  # sklearn's deprecation notes about penalty / l1_ratio.
      return int(np.count_nonzero(model.fit(ds.X, ds.y).coef_))

  assert nnz(lam * 1.001) == 0
  assert nnz(lam * 0.95) >= 1


def test_penalty_strength_is_fraction_of_lambda_max(built):
  for name, ds in built.items():
    spec = data.DATASETS[name]
    assert ds.loss is spec.loss and (ds.lambda_fraction, ds.l2) == (spec.lambda_fraction, spec.l2)
    if spec.penalty is None:
      assert isinstance(ds.penalty, penalties.Zero) and ds.penalty_strength == 0.0
    else:
      assert isinstance(ds.penalty, spec.penalty)
      np.testing.assert_allclose(ds.penalty_strength, ds.lambda_fraction * ds.lambda_max, rtol=1e-12)


# ------------------------------------------------------------------ offline real data


@pytest.mark.parametrize(
    "name, n, p, loss", [("diabetes", 442, 10, losses.squared), ("breast_cancer", 569, 30, losses.logistic)]
)
def test_sklearn_sets(built, name, n, p, loss):
  ds = built[name]
  assert (ds.n, ds.p) == (n, p) and ds.loss is loss and isinstance(ds.penalty, penalties.L1)
  _assert_standardized(ds.X)


def test_permeability_qsar(built):
  ds = built["permeability_qsar"]
  assert ds.n == 165 and ds.p >= ds.n
  assert ds.p == 1069  # 1107 fingerprints minus 38 constant ones.
  _assert_standardized(ds.X)
  # Binary fingerprints stay two-valued per column after standardization.
  assert all(np.unique(column).size == 2 for column in ds.X.T[:50])


@pytest.mark.parametrize("name", ["diabetes", "permeability_qsar"])
def test_regression_targets_are_standardized(built, name):
  ds = built[name]
  assert abs(ds.y.mean()) < 1e-12 and abs(ds.y.std() - 1.0) < 1e-12


def test_classification_labels(built):
  ds = built["breast_cancer"]
  assert set(np.unique(ds.y)) == {-1.0, 1.0}
  assert np.sum(ds.y == 1.0) == 357  # benign.


# ------------------------------------------------------------------------------ cache


def _raw(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  x = rng.normal(3.0, 2.0, size=(n, p))
  x[:, 1] = 7.0  # a constant column, dropped by the preprocessing.
  return x, rng.normal(50.0, 10.0, size=n)


def test_default_cache_dir_from_env(cache, monkeypatch):
  assert data.default_cache_dir() == cache
  monkeypatch.delenv("DPGCD_DATA")
  assert str(data.default_cache_dir()).endswith(".cache/dpgcd_jax")


def test_cache_round_trip(cache, no_network):
  x, y = _raw(40, 6)
  path = data.write_cache("mtp", x, y, source=["test"])
  assert path == cache / "mtp.npz" and (cache / "mtp.json").is_file()
  for ds in (data.load_cached("mtp"), data.fetch("mtp"), data.get("mtp")):
    assert (ds.name, ds.n, ds.p, ds.loss.name, type(ds.penalty)) == ("mtp", 40, 5, "squared", penalties.L1)
    expected = np.delete(x, 1, axis=1)
    np.testing.assert_allclose(ds.X, (expected - expected.mean(0)) / expected.std(0))
    np.testing.assert_allclose(ds.y, (y - y.mean()) / y.std())
    np.testing.assert_allclose(ds.penalty_strength, ds.lambda_fraction * ds.lambda_max)


def test_cache_dir_argument_overrides_env(cache, tmp_path, no_network):
  other = tmp_path / "elsewhere"
  data.write_cache("california", *_raw(30, 8), cache_dir=other)
  assert data.load_cached("california", other).n == 30
  with pytest.raises(data.DatasetNotAvailable):
    data.load_cached("california")  # $DPGCD_DATA holds nothing.


def test_cache_format_written_by_hand(cache, no_network):
  """The documented format: <name>.npz (X, y) + <name>.json with the npz's sha256."""
  rng = np.random.default_rng(1)
  x = rng.integers(0, 255, size=(30, 7)).astype(np.int16)
  y = np.where(rng.random(30) < 0.5, 1, 2)  # OpenML's madelon labels.
  cache.mkdir()
  np.savez_compressed(cache / "madelon.npz", X=x, y=y)
  digest = hashlib.sha256((cache / "madelon.npz").read_bytes()).hexdigest()
  meta = {"format_version": 1, "name": "madelon", "n": 30, "p": 7, "sha256": digest, "source": []}
  (cache / "madelon.json").write_text(json.dumps(meta))
  ds = data.load_cached("madelon")
  assert ds.loss is losses.logistic and ds.X.shape == (30, 7)
  np.testing.assert_array_equal(ds.y, np.where(y == 2, 1.0, -1.0))
  _assert_standardized(ds.X)


def _assert_how_to_fetch(message: str, name: str) -> None:
  assert f"python -m dpgcd_jax.data download {name}" in message
  assert f"{name}.npz" in message and f"{name}.json" in message
  assert "DPGCD_DATA" in message


def test_missing_cache_says_how_to_fetch(cache, no_network):
  with pytest.raises(data.DatasetNotAvailable) as info:
    data.load_cached("dorothea")
  assert isinstance(info.value, ValueError)
  assert "missing" in str(info.value)
  _assert_how_to_fetch(str(info.value), "dorothea")
  with pytest.raises(data.DatasetNotAvailable):
    data.fetch("dorothea", download_if_missing=False)  # no_network: would fail on a call.


def _corrupt_bytes(cache):
  data = bytearray((cache / "mtp.npz").read_bytes())
  data[len(data) // 2] ^= 0xFF
  (cache / "mtp.npz").write_bytes(bytes(data))


def _truncate(cache):
  (cache / "mtp.npz").write_bytes((cache / "mtp.npz").read_bytes()[:100])


def _bad_json(cache):
  (cache / "mtp.json").write_text("{not json")


def _wrong_shape(cache):
  np.savez_compressed(cache / "mtp.npz", X=np.ones((4, 2)), y=np.ones(4))
  meta = json.loads((cache / "mtp.json").read_text())
  meta["sha256"] = hashlib.sha256((cache / "mtp.npz").read_bytes()).hexdigest()
  (cache / "mtp.json").write_text(json.dumps(meta))


def _not_finite(cache):
  x, y = _raw(40, 6)
  x[3, 3] = np.nan
  np.savez_compressed(cache / "mtp.npz", X=x, y=y)
  meta = json.loads((cache / "mtp.json").read_text())
  meta["sha256"] = hashlib.sha256((cache / "mtp.npz").read_bytes()).hexdigest()
  (cache / "mtp.json").write_text(json.dumps(meta))


def _missing_json(cache):
  (cache / "mtp.json").unlink()


@pytest.mark.parametrize(
    "damage, words",
    [
        (_corrupt_bytes, "sha256"),
        (_truncate, "sha256"),
        (_bad_json, "metadata"),
        (_wrong_shape, "metadata says n=40"),
        (_not_finite, "NaN"),
        (_missing_json, "missing"),
    ],
)
def test_damaged_cache_gives_clear_error(cache, no_network, damage, words):
  data.write_cache("mtp", *_raw(40, 6))
  damage(cache)
  with pytest.raises(data.DatasetNotAvailable, match=words) as info:
    data.load_cached("mtp")
  _assert_how_to_fetch(str(info.value), "mtp")


def test_fetch_without_network_raises_and_writes_nothing(cache, monkeypatch):
  calls = []

  def urlopen(request, timeout=None):
    calls.append(request.full_url)
    raise urllib.error.URLError("no network here")

  monkeypatch.setattr(urllib.request, "urlopen", urlopen)
  with pytest.raises(data.DatasetNotAvailable, match="no network here") as info:
    data.get("california")
  _assert_how_to_fetch(str(info.value), "california")
  assert calls == ["https://www.dcc.fc.up.pt/~ltorgo/Regression/cal_housing.tgz"]
  assert not cache.exists() or not any(cache.iterdir())


# ------------------------------------------------------------------ download (faked)


class _FakeServer:
  """Stands in for urllib.request.urlopen, serving fixed bytes per URL."""

  def __init__(self, pages: dict[str, bytes]):
    self.pages = pages
    self.calls: list[str] = []

  def __call__(self, request, timeout=None):
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    self.calls.append(url)
    if url not in self.pages:
      raise urllib.error.URLError(f"unexpected URL {url}")
    return io.BytesIO(self.pages[url])


def _small_spec(monkeypatch, name: str, shape: tuple[int, int]) -> None:
  registry = _registry._REGISTRY  # pylint: disable=protected-access
  monkeypatch.setitem(registry, name, dataclasses.replace(data.spec(name), shape=shape))


def _openml_pages(data_id: int, arff: str, target: str, md5: str | None = None) -> dict[str, bytes]:
  body = arff.encode()
  file_url = f"https://api.openml.org/data/v1/download/999/{data_id}.arff"
  meta = {
      "data_set_description": {
          "url": file_url,
          "md5_checksum": md5 or hashlib.md5(body).hexdigest(),
          "default_target_attribute": target,
      }
  }
  return {f"https://www.openml.org/api/v1/json/data/{data_id}": json.dumps(meta).encode(), file_url: body}


_MADELON_ARFF = """% comment
@RELATION madelon
@ATTRIBUTE V1 NUMERIC
@ATTRIBUTE 'V 2' INTEGER
@ATTRIBUTE Class {1,2}
@DATA
485,477,1
483,458,2
487,542,'1'
{0 480, 1 491, 2 2}
"""


def test_download_openml_writes_cache(cache, monkeypatch):
  server = _FakeServer(_openml_pages(1485, _MADELON_ARFF, "Class"))
  monkeypatch.setattr(urllib.request, "urlopen", server)
  _small_spec(monkeypatch, "madelon", (4, 2))
  ds = data.fetch("madelon")
  assert len(server.calls) == 2
  raw = np.load(cache / "madelon.npz")
  np.testing.assert_array_equal(raw["X"], [[485, 477], [483, 458], [487, 542], [480, 491]])
  np.testing.assert_array_equal(raw["y"], [0, 1, 0, 1])  # nominal values -> their index.
  np.testing.assert_array_equal(ds.y, [-1, 1, -1, 1])
  monkeypatch.setattr(urllib.request, "urlopen", _FakeServer({}))
  assert data.fetch("madelon").n == 4  # second time from the cache, no request.


def test_download_checks_md5_and_shape(cache, monkeypatch):
  monkeypatch.setattr(urllib.request, "urlopen", _FakeServer(_openml_pages(1485, _MADELON_ARFF, "Class", md5="0" * 32)))
  _small_spec(monkeypatch, "madelon", (4, 2))
  with pytest.raises(ValueError, match="MD5"):
    data.download("madelon")
  monkeypatch.setattr(urllib.request, "urlopen", _FakeServer(_openml_pages(1485, _MADELON_ARFF, "Class")))
  _small_spec(monkeypatch, "madelon", (2600, 500))
  with pytest.raises(ValueError, match=r"expected X.shape=\(2600, 500\)"):
    data.download("madelon")
  assert not (cache / "madelon.npz").exists()


def test_download_dorothea_sparse_format(cache, monkeypatch):
  base = "https://archive.ics.uci.edu/ml/machine-learning-databases/dorothea/DOROTHEA/"
  pages = {base + "dorothea_train.data": b"1 3 \n2\n5 4 1\n", base + "dorothea_train.labels": b"-1\n1\n-1\n"}
  monkeypatch.setattr(urllib.request, "urlopen", _FakeServer(pages))
  _small_spec(monkeypatch, "dorothea", (3, 5))
  data.download("dorothea")
  raw = np.load(cache / "dorothea.npz")  # CSR parts, see the cache format.
  assert json.loads((cache / "dorothea.json").read_text())["X_format"] == "csr"
  x = sparse.csr_array((raw["X_data"], raw["X_indices"], raw["X_indptr"]), shape=tuple(raw["X_shape"]))
  np.testing.assert_array_equal(x.toarray(), [[1, 0, 1, 0, 0], [0, 1, 0, 0, 0], [1, 0, 0, 1, 1]])
  np.testing.assert_array_equal(raw["y"], [-1, 1, -1])
  ds = data.load_cached("dorothea")  # sparse binary: no centering, labels +-1.
  assert ds.is_sparse and sparse.issparse(ds.X)
  np.testing.assert_array_equal(ds.X.toarray(), x.toarray())
  np.testing.assert_array_equal(ds.y, [-1, 1, -1])


def test_download_california_derived_features(cache, monkeypatch):
  # longitude, latitude, age, rooms, bedrooms, population, households, income, value
  rows = np.array([[-122.0, 37.0, 41.0, 880.0, 129.0, 322.0, 126.0, 8.3, 452600.0],
                   [-121.0, 38.0, 21.0, 7099.0, 1106.0, 2401.0, 1138.0, 8.1, 358500.0]])
  body = "\n".join(",".join(f"{v:g}" for v in row) for row in rows).encode()
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
    info = tarfile.TarInfo("CaliforniaHousing/cal_housing.data")
    info.size = len(body)
    archive.addfile(info, io.BytesIO(body))
  url = "https://www.dcc.fc.up.pt/~ltorgo/Regression/cal_housing.tgz"
  monkeypatch.setattr(urllib.request, "urlopen", _FakeServer({url: buffer.getvalue()}))
  _small_spec(monkeypatch, "california", (2, 8))
  data.download("california")
  raw = np.load(cache / "california.npz")
  np.testing.assert_allclose(raw["X"][0], [8.3, 41.0, 880 / 126, 129 / 126, 322.0, 322 / 126, 37.0, -122.0])
  np.testing.assert_allclose(raw["y"], [4.526, 3.585])


def test_cli_download(cache, monkeypatch, capsys):
  monkeypatch.setattr(urllib.request, "urlopen", _FakeServer(_openml_pages(405, _MADELON_ARFF, "V1")))
  _small_spec(monkeypatch, "mtp", (4, 2))
  data.main(["download", "mtp", "--cache-dir", str(cache / "cli")])
  assert "mtp: wrote" in capsys.readouterr().out
  assert data.load_cached("mtp", cache / "cli").p == 2
  data.main(["list"])
  assert "permeability_qsar" in capsys.readouterr().out


def test_arff_parser_rejects_malformed():
  with pytest.raises(ValueError, match="Malformed ARFF.*line 11"):
    data.read_arff(_MADELON_ARFF + "1,2\n")
  with pytest.raises(ValueError, match="Malformed ARFF.*nominal"):
    data.read_arff(_MADELON_ARFF + "1,2,3\n")
  with pytest.raises(ValueError, match="attribute 's' of type STRING"):
    data.read_arff("@relation r\n@attribute s STRING\n@data\nabc\n")


# ------------------------------------------------------------------ registry and input


def test_registry():
  assert set(data.OFFLINE) == {
      "log1", "log2", "log1_ls", "log2_ls", "square", "madelon_synth", "dorothea_synth", "diabetes",
      "breast_cancer", "permeability_qsar"
  }
  assert set(data.GENERATORS) == {"log1", "log2", "log1_ls", "log2_ls", "square", "madelon_synth", "dorothea_synth"}
  assert set(data.CACHED) == {"california", "mtp", "madelon", "dorothea"}
  assert set(data.DATASETS) == set(data.OFFLINE) | set(data.CACHED)
  for name, spec in data.DATASETS.items():
    assert spec.name == name
    assert (spec.kind == "cached") == (name in data.CACHED)


def test_dataset_helpers(built):
  ds = built["square"]
  half = ds.with_lambda_fraction(0.05)
  np.testing.assert_allclose(half.penalty_strength, ds.penalty_strength / 2)
  assert half.X is ds.X and half.lambda_fraction == 0.05
  assert ds.with_solution_nnz(10).solution_nnz == 10 and ds.solution_nnz is None
  with pytest.raises(ValueError, match="solution_nnz"):
    ds.with_solution_nnz(1001)
  with pytest.raises(dataclasses.FrozenInstanceError):
    ds.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: data.get("nope"), "name='nope'"),
        (lambda: data.get("log1", seed=-1), "seed >= 0"),
        (lambda: data.get("square", seed=1.5), "seed=1.5"),
        (lambda: data.log2(seed=True), "seed=True"),
        (lambda: data.square(0, nnz=2000), "nnz=2000"),
        (lambda: data.log1(0, noise=-1.0), "noise=-1.0"),
        (lambda: data.load_cached("log1"), "name='log1'"),
        (lambda: data.fetch("iris"), "name='iris'"),
        (lambda: data.write_cache("mtp", np.ones(3), np.ones(3)), "X to have 2"),
        (lambda: data.lambda_max(np.ones((2, 2)), np.ones(2), "hinge"), "loss='hinge'"),
        (lambda: data.standardize(np.array([[np.nan, 1.0]])), "X to be finite"),
    ],
)
def test_bad_input_names_the_argument(call, words, no_network, cache):
  with pytest.raises(ValueError, match=words):
    call()


@pytest.mark.parametrize(
    "change, words",
    [
        ({"loss": "hinge"}, "loss='hinge'"),
        ({"penalty": "l0"}, "penalty='l0'"),
        ({"lambda_fraction": -1.0}, "lambda_fraction=-1.0"),
        ({"l2": -0.1}, "l2=-0.1"),
        ({"y": np.zeros(4)}, "labels y"),
        ({"y": np.ones(3)}, "as many rows"),
        ({"X": np.full((4, 2), np.inf)}, "X to be finite"),
        ({"w_true": np.ones(5)}, "w_true of shape"),
    ],
)
def test_dataset_validation(change, words):
  fields = dict(name="t", X=np.ones((4, 2)), y=np.array([1.0, -1.0, 1.0, -1.0]), loss=losses.logistic,
                penalty=penalties.L1(0.1))
  data.Dataset(**fields)
  with pytest.raises(ValueError, match=words):
    data.Dataset(**{**fields, **change})

"""`dpgcd_jax.data._cache`, `dpgcd_jax.data._parsers`: downloads through pooch, offline: file:// URLs on files the tests
write, checksums, ARFF parsing.

No test touches the network: every URL is a local ``file://`` URL, or ``urlopen`` is replaced.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import pathlib
import urllib.error
import urllib.request

import numpy as np
import pytest

from dpgcd_jax import data
from dpgcd_jax import losses
from dpgcd_jax import penalties
from dpgcd_jax.data import _parsers
from dpgcd_jax.data import _registry

_ARFF = """% dense and sparse rows, quoted and spaced values, missing values
@RELATION toy
@ATTRIBUTE a NUMERIC
@ATTRIBUTE 'b c' REAL
@ATTRIBUTE klass {neg, pos}
@DATA
1.5, 2, neg
-3,4e1,'pos'
{0 7, 2 pos}
?,1, ?
"""


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
  """Only file:// URLs may be opened."""
  real = urllib.request.urlopen

  def urlopen(request, *args, **kwargs):
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    if not url.startswith("file://"):
      raise AssertionError(f"network access attempted: {url}")
    return real(request, *args, **kwargs)

  monkeypatch.setattr(urllib.request, "urlopen", urlopen)


def _file(path: pathlib.Path, body: bytes) -> str:
  path.write_bytes(body)
  return path.resolve().as_uri()


def test_read_arff_dense_sparse_nominal_and_missing():
  names, values = data.read_arff(_ARFF)
  assert names == ["a", "b c", "klass"]
  expected = np.array([[1.5, 2.0, 0.0], [-3.0, 40.0, 1.0], [7.0, 0.0, 1.0], [np.nan, 1.0, np.nan]])
  np.testing.assert_array_equal(values, expected)
  assert values.dtype == np.float64


@pytest.mark.parametrize(
    "text, words",
    [
        (_ARFF + "1,2\n", "Malformed ARFF"),
        (_ARFF + "1,2,3,4\n", "Malformed ARFF"),  # scipy.io.arff would keep 1,2,3 silently.
        (_ARFF + "1,2,maybe\n", "nominal"),
        ("@relation r\n@attribute d DATE\n@data\n", "Malformed ARFF|type DATE"),
        ("no header at all", "Malformed ARFF"),
    ],
)
def test_read_arff_rejects_malformed_files(text, words):
  with pytest.raises(ValueError, match=words):
    data.read_arff(text)


def test_retriever_downloads_file_urls_and_checks_hashes(tmp_path):
  body = b"0.5,1\n2.5,3\n"
  url = _file(tmp_path / "source.csv", body)
  retrieve = data.Retriever(tmp_path / "downloads", timeout=5)
  path = retrieve(url, known_hash="sha256:" + hashlib.sha256(body).hexdigest())
  assert path.read_bytes() == body and path.parent == tmp_path / "downloads"
  assert retrieve(url, known_hash="md5:" + hashlib.md5(body).hexdigest()) == path  # reused
  other = _file(tmp_path / "other.csv", b"1,2\n")
  with pytest.raises(ValueError, match="SHA256 hash of downloaded file"):
    retrieve(other, known_hash="sha256:" + "0" * 64)
  assert sorted(p.name for p in (tmp_path / "downloads").iterdir()) == [path.name]  # nothing kept


def test_downloader_gunzips_gzip_bodies_unless_the_url_names_a_compressed_file(tmp_path):
  text = b"@relation r\n"
  downloader = data.UrllibDownloader(timeout=5)
  downloader(_file(tmp_path / "served.arff", gzip.compress(text)), tmp_path / "a", None)
  assert (tmp_path / "a").read_bytes() == text
  archive = gzip.compress(text)
  downloader(_file(tmp_path / "kept.tgz", archive), tmp_path / "b", None)
  assert (tmp_path / "b").read_bytes() == archive
  assert downloader(_file(tmp_path / "c", b"x"), None, None, check_only=True) is True
  with pytest.raises(ValueError, match="timeout"):
    data.UrllibDownloader(timeout=0)


def test_openml_checks_the_published_md5(tmp_path):
  arff_body = _ARFF.replace("?,1, ?\n", "").encode()
  arff_url = _file(tmp_path / "toy.arff", arff_body)

  def retrieve_with(md5):
    meta = {"data_set_description": {"url": arff_url, "md5_checksum": md5, "default_target_attribute": "klass"}}
    meta_url = _file(tmp_path / "meta.json", json.dumps(meta).encode())
    real = data.Retriever(tmp_path / f"dl-{md5[:4]}", timeout=5)
    return lambda url, known_hash=None: real(meta_url if "openml.org" in url else url, known_hash)

  x, t = _parsers.openml(7, retrieve_with(hashlib.md5(arff_body).hexdigest()))
  np.testing.assert_array_equal(x, [[1.5, 2.0], [-3.0, 40.0], [7.0, 0.0]])
  np.testing.assert_array_equal(t, [0.0, 1.0, 1.0])
  with pytest.raises(ValueError, match="MD5"):
    _parsers.openml(7, retrieve_with("0" * 32))


@pytest.fixture
def local_cached_set(tmp_path):
  """A cached set registered for the test, whose source is a local CSV file (file:// URL)."""
  rng = np.random.default_rng(0)
  raw = np.column_stack([rng.normal(10.0, 3.0, size=(25, 3)), rng.normal(size=25)])
  body = "\n".join(",".join(f"{v:.17g}" for v in row) for row in raw).encode()
  url = _file(tmp_path / "local.csv", body)
  digest = "sha256:" + hashlib.sha256(body).hexdigest()

  @data.register(kind="cached", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.1,
                 summary="25 x 3 local file", urls=(url,), shape=(25, 3), name="local_csv_test_set")
  def local_csv(retrieve) -> data.Raw:
    """A local CSV file: 3 features, then the target."""
    values = np.loadtxt(retrieve(url, known_hash=digest), delimiter=",")
    return data.Raw(values[:, :3], values[:, 3])

  yield local_csv, raw, tmp_path / "local.csv"
  _registry._REGISTRY.pop("local_csv_test_set", None)  # pylint: disable=protected-access


def test_cached_set_downloads_once_through_pooch_then_reads_the_cache(local_cached_set, tmp_path):
  load, raw, source = local_cached_set
  cache = tmp_path / "cache"
  ds = load(cache_dir=cache)
  assert (ds.name, ds.n, ds.p) == ("local_csv_test_set", 25, 3)
  stored = np.load(cache / "local_csv_test_set.npz")
  np.testing.assert_array_equal(stored["X"], raw[:, :3])  # raw data in the cache.
  np.testing.assert_allclose(ds.X.mean(axis=0), 0.0, atol=1e-12)  # preprocessed on load.
  np.testing.assert_allclose(ds.penalty_strength, 0.1 * ds.lambda_max)
  assert sorted(p.name for p in cache.iterdir()) == ["local_csv_test_set.json", "local_csv_test_set.npz"]
  source.unlink()  # the source is gone: the second load must come from the cache.
  np.testing.assert_array_equal(data.get("local_csv_test_set", cache_dir=cache).X, ds.X)
  with pytest.raises(data.DatasetNotAvailable, match="Downloading it failed too"):
    data.fetch("local_csv_test_set", cache_dir=tmp_path / "empty")


def test_cached_set_with_a_wrong_checksum_writes_nothing(local_cached_set, tmp_path):
  _, _, source = local_cached_set
  source.write_bytes(b"1,2,3,4\n")
  with pytest.raises(ValueError, match="SHA256"):
    data.download("local_csv_test_set", tmp_path / "cache")
  assert not (tmp_path / "cache").exists()


def test_download_network_errors_propagate_as_oserror(monkeypatch, tmp_path):
  def urlopen(request, timeout=None):
    raise urllib.error.URLError("offline")

  monkeypatch.setattr(urllib.request, "urlopen", urlopen)
  with pytest.raises(OSError, match="offline"):
    data.download("mtp", tmp_path)
  with pytest.raises(ValueError, match="timeout"):
    data.download("mtp", tmp_path, timeout=-1.0)

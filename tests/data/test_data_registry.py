"""`dpgcd_jax.data._registry`: the dataset registry: one decorated function adds a dataset; the deprecated alias still
works."""

from __future__ import annotations

import inspect
import urllib.request

import numpy as np
import pytest

from dpgcd_jax import data
from dpgcd_jax import losses
from dpgcd_jax import penalties
from dpgcd_jax.data import _registry


@pytest.fixture
def scratch_names():
  """Names registered by a test are removed afterwards (the registry is process-wide)."""
  added: list[str] = []
  yield added
  for name in added:
    _registry._REGISTRY.pop(name, None)  # pylint: disable=protected-access


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
  def urlopen(*args, **kwargs):
    raise AssertionError(f"network access attempted: {args!r}")

  monkeypatch.setattr(urllib.request, "urlopen", urlopen)


def _register_tiny(scratch_names, name="tiny_test_set"):
  scratch_names.append(name)

  @data.register(kind="generator", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.2,
                 summary="30 x 4 test set", name=name)
  def tiny(seed: int = 0, *, n: int = 30) -> data.Raw:
    """A tiny sparse regression for the registry tests.

    Second paragraph: not part of the description.
    """
    rng = np.random.default_rng(seed)
    x = data.standardize(rng.standard_normal((n, 4)))
    w = np.array([1.0, 0.0, -2.0, 0.0])
    return data.Raw(x, x @ w + 0.1 * rng.standard_normal(n), w_true=w)

  return tiny


def test_a_decorated_function_is_found_by_get_names_and_the_cli(scratch_names, capsys):
  tiny = _register_tiny(scratch_names)
  ds = data.get("tiny_test_set", seed=3)
  assert isinstance(ds, data.Dataset) and (ds.n, ds.p, ds.name) == (30, 4, "tiny_test_set")
  assert ds.loss is losses.squared and isinstance(ds.penalty, penalties.L1) and ds.lambda_fraction == 0.2
  np.testing.assert_allclose(ds.penalty_strength, 0.2 * ds.lambda_max, rtol=1e-12)
  assert ds.description == "A tiny sparse regression for the registry tests."
  assert ds.true_nnz == 2
  # The decorator returns a function with the same arguments that builds the Dataset.
  np.testing.assert_array_equal(tiny(3).X, ds.X)
  assert tiny(0, n=12).n == 12 and data.get("tiny_test_set", n=12).n == 12
  assert list(inspect.signature(tiny).parameters) == ["seed", "n"]
  # Every view of the registry sees it: names, the live tuples, the spec, the CLI listing.
  assert "tiny_test_set" in data.names("generator") and "tiny_test_set" in data.OFFLINE
  assert "tiny_test_set" in data.GENERATORS and "tiny_test_set" not in data.CACHED
  assert data.spec("tiny_test_set").summary == "30 x 4 test set"
  data.main(["list"])
  assert "tiny_test_set" in capsys.readouterr().out


def test_registering_a_name_twice_is_rejected(scratch_names):
  _register_tiny(scratch_names)
  with pytest.raises(ValueError, match="name='tiny_test_set', which is already registered"):
    _register_tiny(scratch_names)
  with pytest.raises(ValueError, match="name='square'"):
    data.register(kind="generator", loss="squared", summary="", name="square")(lambda seed=0: None)
  assert data.spec("square").loss is losses.squared  # the original entry is untouched.


def test_an_offline_set_is_standardized_by_default(scratch_names):
  scratch_names.append("tiny_offline")

  @data.register(kind="offline", loss=losses.logistic, summary="raw labels 3 / 7")
  def tiny_offline() -> data.Raw:
    """Raw columns on any scale, labels 3 / 7."""
    rng = np.random.default_rng(0)
    return data.Raw(rng.normal(5.0, 3.0, size=(50, 3)), np.where(rng.random(50) < 0.5, 3, 7))

  ds = data.get("tiny_offline")
  np.testing.assert_allclose(ds.X.mean(axis=0), 0.0, atol=1e-12)
  np.testing.assert_allclose(ds.X.std(axis=0), 1.0, rtol=1e-12)
  assert set(np.unique(ds.y)) == {-1.0, 1.0} and isinstance(ds.penalty, penalties.Zero)
  assert ds is not tiny_offline() and data.spec("tiny_offline").kind == "offline"
  with pytest.raises(ValueError, match="no options"):
    data.get("tiny_offline", n=3)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(kind="downloaded", loss="squared"), "kind='downloaded'"),
        (dict(kind="generator", loss="hinge"), "loss='hinge'"),
        (dict(kind="generator", loss="squared", penalty=penalties.L1), "lambda_fraction=None"),
        (dict(kind="generator", loss="squared", lambda_fraction=0.1), "penalty=None"),
        (dict(kind="generator", loss="squared", penalty=penalties.L1, lambda_fraction=-0.1), "lambda_fraction"),
        (dict(kind="generator", loss="squared", l2=-1.0), "l2=-1.0"),
        (dict(kind="cached", loss="squared"), "urls=()"),
    ],
)
def test_register_names_the_bad_argument(kwargs, words):
  with pytest.raises(ValueError, match=words):
    data.register(summary="", **kwargs)


def test_cached_sets_are_loaders_with_the_documented_signature():
  assert list(inspect.signature(data.california).parameters) == ["cache_dir", "download_if_missing"]
  assert data.california.__name__ == "california" and "California housing" in data.california.__doc__
  spec = data.spec("dorothea")
  assert spec.kind == "cached" and spec.shape == (800, 100_000) and len(spec.urls) == 2
  assert spec.preprocess is data.prepare_sparse_binary
  assert data.spec("mtp").preprocess is data.prepare_dense and data.spec("square").preprocess is None


def test_cached_loader_reads_the_cache(tmp_path, no_network):
  rng = np.random.default_rng(0)
  data.write_cache("mtp", rng.normal(size=(20, 3)), rng.normal(size=20), cache_dir=tmp_path)
  ds = data.mtp(cache_dir=tmp_path, download_if_missing=False)
  assert (ds.n, ds.p, ds.name) == (20, 3, "mtp")


def test_names_by_kind():
  assert data.names() == tuple(data.DATASETS)
  assert set(data.names("generator", "offline")) == set(data.OFFLINE)
  with pytest.raises(ValueError, match="kind='remote'"):
    data.names("remote")
  with pytest.raises(TypeError):
    data.DATASETS["x"] = None  # read-only view  # type: ignore[index]

"""Test configuration: float32 by default, float64 where a reference needs it, strict rank
promotion, no disk cache.

float32 is what users and the experiments run, so it is the suite's default. A test module
that compares against a float64 reference at a tight tolerance says so with
``pytestmark = pytest.mark.float64`` (its tests then run with x64 on), stating why.

The suite never writes to the user's persistent compilation cache (``DPGCD_JAX_NO_COMPILATION_CACHE``,
inherited by the tests' subprocesses); ``test_compile_once.py`` tests the cache in a temporary
directory.
"""

import os

os.environ["DPGCD_JAX_NO_COMPILATION_CACHE"] = "1"

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_enable_x64", False)
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_configure(config):
  config.addinivalue_line("markers", "float64: run with JAX's x64 mode (a tight comparison with a float64 reference)")


def _x64_if_marked(request):
  if request.node.get_closest_marker("float64") is None:
    yield
    return
  with jax.enable_x64(True):
    yield


@pytest.fixture(autouse=True, scope="module")
def _float64_module(request):
  """x64 for a whole marked module, its module-scoped fixtures included (built before any test)."""
  yield from _x64_if_marked(request)


@pytest.fixture(autouse=True)
def _float64_when_marked(request):
  yield from _x64_if_marked(request)

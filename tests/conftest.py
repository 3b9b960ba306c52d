"""Test configuration: float32 by default, float64 where a reference needs it, strict rank
promotion, no disk cache.

float32 is what users and the experiments run, so it is the suite's default. A test module
that compares against a float64 reference at a tight tolerance says so with
``pytestmark = pytest.mark.float64`` (its tests then run with x64 on), stating why.

The suite never writes to the user's persistent compilation cache (``DPGCD_JAX_NO_COMPILATION_CACHE``,
inherited by the tests' subprocesses); ``test_compile_once.py`` tests the cache in a temporary
directory.
"""

import gc
import os

os.environ["DPGCD_JAX_NO_COMPILATION_CACHE"] = "1"

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_enable_x64", False)
jax.config.update("jax_numpy_rank_promotion", "raise")


MAX_MAPPINGS = 30_000
"""Compiled programs held before a test clears JAX's caches, in memory mappings (Linux).

XLA's CPU JIT maps each loaded program in hundreds of regions (about 650 for one estimator
fit), and a process may hold at most `vm.max_map_count` (65,530 by default): a worker that
keeps a few hundred programs alive then crashes inside XLA's compiler (SIGSEGV or SIGABRT in
`backend_compile_and_load`, in whichever test compiles next). `jax.clear_caches()` releases them.
"""


def _mappings() -> int:
  try:
    with open(f"/proc/{os.getpid()}/maps", encoding="ascii", errors="replace") as maps:
      return sum(1 for _ in maps)
  except OSError:  # not Linux: no such limit to watch
    return 0


@pytest.fixture(autouse=True)
def _release_compiled_programs():
  yield
  if _mappings() > MAX_MAPPINGS:
    jax.clear_caches()
    gc.collect()


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

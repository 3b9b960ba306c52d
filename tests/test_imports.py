"""Lazy imports: ``import dpgcd_jax`` loads none of the heavy optional dependencies.

Each check runs in a fresh interpreter (``sys.modules`` of the test process is already full).
"""

import json
import subprocess
import sys
import textwrap

import pytest

import dpgcd_jax as dg

HEAVY = ("dp_accounting", "scipy.sparse", "sklearn", "matplotlib", "pooch", "tqdm", "pandas")


def _loaded_after(statement):
  script = textwrap.dedent(f"""
      import json, sys
      {statement}
      print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
  """)
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_dpgcd_jax_loads_no_heavy_dependency():
  assert _loaded_after("import dpgcd_jax") == []


def test_the_private_feature_bound_loads_no_heavy_dependency():
  assert _loaded_after("from dpgcd_jax.privacy import bounds; import dpgcd_jax.solvers") == []


@pytest.mark.parametrize("package", ["dpgcd_jax", "dpgcd_jax.privacy", "dpgcd_jax.solvers"])
def test_every_lazy_export_resolves(package):
  module = __import__(package, fromlist=["_EXPORTS"])
  for name in module.__all__:
    value = getattr(module, name)
    assert value is getattr(module, name) and name in dir(module)
  with pytest.raises(AttributeError, match="no_such_name"):
    getattr(module, "no_such_name")


def test_lazy_exports_are_the_defining_modules_objects():
  from dpgcd_jax import problem  # pylint: disable=g-import-not-at-top
  from dpgcd_jax.privacy import ledger  # pylint: disable=g-import-not-at-top
  from dpgcd_jax.solvers import base, dp_gcd  # pylint: disable=g-import-not-at-top
  assert dg.make_problem is problem.make_problem and dg.dp_gcd is dp_gcd and dg.Result is base.Result
  assert dg.privacy.Ledger is ledger.Ledger and dg.privacy.ledger is ledger
  assert dg.solvers.base is base  # a submodule not in the exports is reachable too

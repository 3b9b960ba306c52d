"""The estimators read each solver's record (`dpgcd_jax.estimators._solvers.ADAPTERS`) and never
branch on a solver's name: a new solver is one more record."""

import ast
import pathlib

import pytest

from dpgcd_jax import solvers
from dpgcd_jax.estimators import _solvers

ESTIMATORS = pathlib.Path(__file__).resolve().parents[2] / "dpgcd_jax" / "estimators"
NAMES = set(_solvers.SOLVERS)


def name_comparisons(source: str) -> list[int]:
  """Lines comparing something with a solver's name (`x == "dp_fw"`, `x in ("dp_cd", ...)`)."""
  lines = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Compare):
      for operand in [node.left, *node.comparators]:
        values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        if any(isinstance(v, ast.Constant) and v.value in NAMES for v in values):
          lines.append(node.lineno)
  return lines


@pytest.mark.parametrize("path", sorted(p.name for p in ESTIMATORS.glob("*.py") if p.name != "_solvers.py"))
def test_no_estimator_module_branches_on_a_solver_name(path):
  assert name_comparisons((ESTIMATORS / path).read_text()) == []


def test_the_rule_finds_a_branch_on_a_name():
  assert name_comparisons('if self.solver == "dp_fw":\n  pass\n') == [1]
  assert name_comparisons('ok = solver in ("dp_cd", "x")\n') == [1]
  assert name_comparisons('if adapter.padded:\n  pass\n') == []


def test_every_solver_has_a_record_with_a_run_and_a_note():
  for name, adapter in _solvers.ADAPTERS.items():
    assert adapter.name == name and callable(adapter.run) and callable(adapter.note)
  assert set(_solvers.ADAPTERS) <= set(solvers.REGISTRY)  # the estimators run registered solvers only
  assert {a.name for a in _solvers.ADAPTERS.values() if a.secure} == {"dp_gcd", "dp_cd", "dp_fw", "dp_iht", "two_stage"}

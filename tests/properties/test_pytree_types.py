"""`dpgcd_jax._pytree`: two pytree classes never share a tree structure, nor a compiled program.

The bug it fixes (measured on JAX 0.10.2): `jax.tree_util.register_dataclass` gave `L1(s)` and
`L2(s)` equal tree structures (unequal hashes), so a jit cache could run the program compiled
for one penalty on the other: `DPGCDRegressor(penalty="l2")` fitted after `penalty="l1"` in
one process returned the l1 model in about 1 of 60 fresh processes (a CI failure of
`test_the_regressors_alpha_is_in_raw_units_whatever_the_target_bound[l2-...]`).
"""

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import _pytree
from dpgcd_jax import penalties


@pytest.mark.slow
def test_classes_with_the_same_fields_never_run_each_others_program():
  """300 classes of one field through one jitted function, each returning its own constant:
  with `register_dataclass` 45-46 of them ran another class's program (measured); none may."""
  classes = []
  for i in range(300):
    cls = dataclasses.make_dataclass(f"Node{i}", [("x", jax.Array)], frozen=True)
    cls.constant = float(i)
    classes.append(_pytree.dataclass_pytree(data_fields=["x"])(cls))
  constant_of = jax.jit(lambda node: node.x * 0.0 + type(node).constant)
  ran = [float(constant_of(cls(jnp.float32(0.0)))) for cls in classes]
  assert ran == [float(i) for i in range(300)], [(i, r) for i, r in enumerate(ran) if r != i][:5]


def test_the_penalties_with_as_many_parameters_have_distinct_structures():
  s = np.ones(3)
  for a, b in [(penalties.L1(s), penalties.L2(s)), (penalties.ElasticNet(s, 0.5), penalties.Box(-s, s))]:
    assert jax.tree.structure(a) != jax.tree.structure(b), (a, b)
    assert jax.tree.structure(a) == jax.tree.structure(type(a)(*jax.tree.leaves(a)))


def test_a_penalty_round_trips_with_its_attribute_paths_and_validation():
  penalty = penalties.ElasticNet(np.full(2, 0.3), 0.25)
  paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(penalty)[0]]
  assert paths == [".strength", ".l1_ratio"]
  doubled = jax.tree.map(lambda v: v * 2, penalty)
  assert type(doubled) is penalties.ElasticNet
  np.testing.assert_array_equal(doubled.strength, [0.6, 0.6])
  assert doubled.l1_ratio == 0.5
  with pytest.raises(ValueError, match="l1_ratio"):  # unflattening calls the class: its validation runs
    jax.tree.map(lambda v: v * 8, penalty)
  problem = dg.make_problem(np.ones((4, 2), np.float32), np.ones(4, np.float32), dg.losses.squared,
                            penalty=penalty, feature_bound=1.0)
  rebuilt = jax.tree.unflatten(jax.tree.structure(problem), jax.tree.leaves(problem))
  assert type(rebuilt.penalty) is penalties.ElasticNet and rebuilt.loss is problem.loss


def test_no_module_registers_a_dataclass_with_jax_directly():
  package = pathlib.Path(dg.__file__).parent
  direct = [str(path.relative_to(package)) for path in sorted(package.rglob("*.py"))
            if path.name != "_pytree.py" and "register_dataclass" in path.read_text(encoding="utf-8")]
  assert not direct, f"register through dpgcd_jax._pytree.dataclass_pytree instead: {direct}"


@dataclasses.dataclass(frozen=True)
class _Two:
  a: int
  b: int


@pytest.mark.parametrize("data, meta", [(["a"], []), (["a", "b"], ["b"]), (["a", "c"], ["b"])])
def test_the_field_split_must_cover_the_dataclass(data, meta):
  with pytest.raises(ValueError, match=r"data_fields and meta_fields to split _Two's fields \['a', 'b'\]"):
    _pytree.dataclass_pytree(data_fields=data, meta_fields=meta)(_Two)

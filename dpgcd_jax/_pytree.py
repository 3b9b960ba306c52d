"""The package's dataclasses as pytrees whose tree structure keeps their type.

Why not `jax.tree_util.register_dataclass`: on JAX 0.10.2 (measured; `jax>=0.4.35` is required),
the tree structures of two such classes with as many fields and equal static fields compare
EQUAL (`jax.tree.structure(L1(s)) == jax.tree.structure(L2(s))`), while their hashes differ.
A jit cache is a hash table that confirms a candidate key with `==`, so when two keys' hashes
fall in one probe group, a call can run the program compiled for the other class, silently.
Measured: 300 such classes through one jitted function, 46 calls ran another class's program;
`DPGCDRegressor(penalty="l2")` returned the `penalty="l1"` fit's model (fitted just before in
the same process) in 1 of 58 fresh processes. Nodes registered with
`jax.tree_util.register_pytree_with_keys` compare their types, so every pytree dataclass of the
package is registered by [`dataclass_pytree`][dpgcd_jax._pytree.dataclass_pytree]
(`tests/properties/test_pytree_types.py` holds both measurements and a rule that no module
calls `register_dataclass`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

import jax

_T = TypeVar("_T")


def dataclass_pytree(*, data_fields: Sequence[str], meta_fields: Sequence[str] = ()) -> Callable[[type[_T]], type[_T]]:
  """Class decorator: registers a dataclass as a pytree, `data_fields` its leaves (traced) and
  `meta_fields` static (hashable, in the tree structure), as `register_dataclass` does, with
  the class itself in the tree structure: two classes never share a structure, nor a compiled
  program. Unflattening calls the class (its `__post_init__` runs), as `register_dataclass`'s.
  Key paths are the attributes (`jax.tree_util.GetAttrKey`)."""
  data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)

  def register(cls: type[_T]) -> type[_T]:
    init_fields = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    if set(data_fields) & set(meta_fields) or {*data_fields, *meta_fields} != init_fields:
      raise ValueError(f"Expected data_fields and meta_fields to split {cls.__name__}'s fields {sorted(init_fields)}, "
                       f"got data_fields={list(data_fields)}, meta_fields={list(meta_fields)}.")
    keys = tuple(jax.tree_util.GetAttrKey(name) for name in data_fields)

    def flatten_with_keys(obj: Any) -> tuple[list[tuple[Any, Any]], tuple[Any, ...]]:
      return ([(key, getattr(obj, name)) for key, name in zip(keys, data_fields, strict=True)],
              tuple(getattr(obj, name) for name in meta_fields))

    def flatten(obj: Any) -> tuple[list[Any], tuple[Any, ...]]:
      return [getattr(obj, name) for name in data_fields], tuple(getattr(obj, name) for name in meta_fields)

    def unflatten(meta: tuple[Any, ...], data: Iterable[Any]) -> Any:
      return cls(**dict(zip(meta_fields, meta, strict=True)), **dict(zip(data_fields, data, strict=True)))

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls

  return register

"""Lazy exports for the package `__init__` files (PEP 562), so that `import dpgcd_jax` is cheap.

A package lists what it exports as `name -> "module"` (the name is an attribute of that
module) or `name -> "module:"` (the name is that module itself); `attach` returns the
package's `__getattr__` and `__dir__`. The module is imported on first access and the value
cached in the package, so JAX, SciPy, dp_accounting and scikit-learn load only when used.
Any submodule of the package is also reachable as an attribute (`dpgcd_jax.privacy.bounds`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any


def attach(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
  """`(__getattr__, __dir__)` for the package named `package` with lazy `exports`."""

  def __getattr__(name: str) -> Any:  # pylint: disable=invalid-name
    if name.startswith("__"):
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    if name in exports:
      module = importlib.import_module(exports[name].rstrip(":"))
      value = module if exports[name].endswith(":") else getattr(module, name)
    elif importlib.util.find_spec(f"{package}.{name}") is not None:
      value = importlib.import_module(f"{package}.{name}")
    else:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    setattr(sys.modules[package], name, value)
    return value

  def __dir__() -> list[str]:  # pylint: disable=invalid-name
    return sorted(set(vars(sys.modules[package])) | set(exports))

  return __getattr__, __dir__

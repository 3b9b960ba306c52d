"""Progress bars for long private fits (`verbose=` on the estimators).

A fit is one compiled program. With a bar active, [`dpgcd_jax.solvers.base.compiled_run`][]
compiles its runs with a host callback after every pass (`jax.debug.callback`), which advances
the bar by one (the runs of a one-vs-rest fit are batched in one program and share the pass
counter: one tick per pass for all of them). What reaches the host is the pass index, a
public count: no value computed from the data, and the same program (the same releases, the
same noise) with or without a bar; only the bar's presence is part of the compiled program's
static key, so a quiet fit never pays for the callback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import tqdm

_BAR: tqdm.tqdm | None = None


def active() -> bool:
  """Whether a bar is active: the runs compiled now report their passes to it."""
  return _BAR is not None


@contextlib.contextmanager
def bar(*, total: int | None, desc: str, enabled: bool) -> Iterator[None]:
  """A tqdm bar (on stderr) over the passes of the runs in this block, when `enabled`."""
  global _BAR
  if not enabled:
    yield
    return
  previous, _BAR = _BAR, tqdm.tqdm(total=total, desc=desc, unit="pass", leave=True)
  try:
    yield
  finally:
    _BAR.close()
    _BAR = previous


def tick(pass_index: Any) -> None:
  """The host callback: one more pass done (`pass_index`, public, is not read)."""
  del pass_index
  if _BAR is not None:
    _BAR.update(1)

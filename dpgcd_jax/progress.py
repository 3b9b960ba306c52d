"""Progress bars for long private fits (`verbose=` on the estimators).

A fit is one compiled program. With a bar active, [`dpgcd_jax.solvers.base.compiled_run`][]
compiles its runs with a host callback after every pass (`jax.debug.callback`), which advances
the bar by one (the runs of a one-vs-rest fit are batched in one program and share the pass
counter: one tick per pass for all of them). What reaches the host is the pass index, a
public count: no value computed from the data, and the same program (the same releases, the
same noise) with or without a bar; only the bar's presence is part of the compiled program's
static key, so a quiet fit never pays for the callback.

Whether a fit shows a bar is held in a context variable: a fit in another thread (which starts
with an empty context) or outside the `with` block compiles quietly. The callbacks run on
JAX's own threads, so the bars themselves are kept in a locked stack and a pass advances the
most recent one (two verbose fits at once in two threads share it); nested bars each close
their own. tqdm (the `experiments` extra) is imported only when a bar is shown.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from dpgcd_jax import _validate

_SHOWN: contextvars.ContextVar[bool] = contextvars.ContextVar("dpgcd_jax_progress_shown", default=False)
_BARS: list[Any] = []
_LOCK = threading.Lock()


def active() -> bool:
  """Whether a bar is active here: the runs compiled now report their passes to it."""
  return _SHOWN.get()


@contextlib.contextmanager
def bar(*, total: int | None, desc: str, enabled: bool) -> Iterator[None]:
  """A tqdm bar (on stderr) over the passes of the runs in this block, when `enabled`."""
  if not enabled:
    yield
    return
  tqdm = _validate.optional_module("tqdm", "Progress bars (verbose=)", "experiments")
  own = tqdm.tqdm(total=total, desc=desc, unit="pass", leave=True)
  with _LOCK:
    _BARS.append(own)
  token = _SHOWN.set(True)
  try:
    yield
  finally:
    _SHOWN.reset(token)
    with _LOCK:
      _BARS.remove(own)
    own.close()


def tick(pass_index: Any) -> None:
  """The host callback: one more pass done (`pass_index`, public, is not read)."""
  del pass_index
  with _LOCK:
    if _BARS:
      _BARS[-1].update(1)

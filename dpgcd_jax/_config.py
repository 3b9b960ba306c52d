"""Process-wide settings: JAX's persistent (on-disk) compilation cache, opt-in; a compile counter.

A first fit compiles a handful of XLA programs (seconds on a small machine); a second process
that finds them on disk loads them instead (milliseconds). The library never changes JAX's
process-wide configuration by itself: call `dpgcd_jax.enable_compilation_cache()` once (the
experiments' command line, `python -m dpgcd_jax.experiments`, does) to turn JAX's persistent
cache on in a user cache directory:

- the directory is `$DPGCD_JAX_COMPILATION_CACHE_DIR` if set, else
  `$XDG_CACHE_HOME/dpgcd_jax/jax` (`~/.cache/dpgcd_jax/jax` without `XDG_CACHE_HOME`;
  `~/Library/Caches/dpgcd_jax/jax` on macOS, `%LOCALAPPDATA%/dpgcd_jax/jax` on Windows);
- a cache directory the user already configured in `jax.config` (or `JAX_COMPILATION_CACHE_DIR`)
  is never overridden, and `jax_enable_compilation_cache=False` is respected;
- the environment variable `DPGCD_JAX_NO_COMPILATION_CACHE=1` makes the call do nothing (for a
  CI machine or a shared account whose jobs call it).

When this module turns the cache on it also sets `jax_persistent_cache_min_compile_time_secs`
to 0 (unless the user set it, here or in `JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`): JAX's
default of 1 s would skip every program of a small fit. Both settings are process-wide (JAX has
one cache per process), so programs the user compiles afterwards are cached there too.

The cache holds compiled programs, no data; like any JAX compilation cache it is trusted code:
keep it in a directory only you can write.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import TypedDict

OPT_OUT_ENV = "DPGCD_JAX_NO_COMPILATION_CACHE"
DIR_ENV = "DPGCD_JAX_COMPILATION_CACHE_DIR"
_JAX_MIN_TIME = "jax_persistent_cache_min_compile_time_secs"
# JAX's options are dynamic attributes of jax.config (not in its type stubs): read by name.
_JAX_CACHE_DIR = "jax_compilation_cache_dir"
_JAX_ENABLE_CACHE = "jax_enable_compilation_cache"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # JAX monitoring: once per XLA compilation


class _State(TypedDict):
  decided: bool
  dir: str | None


_lock = threading.Lock()
_state: _State = {"decided": False, "dir": None}


def default_cache_dir() -> str:
  """The platform's user cache directory for this package's compiled programs."""
  if os.environ.get(DIR_ENV):
    return os.path.expanduser(os.environ[DIR_ENV])
  if sys.platform == "darwin":
    root = os.path.join(os.path.expanduser("~"), "Library", "Caches")
  elif os.name == "nt":
    root = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
  else:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(root, "dpgcd_jax", "jax")


def _opted_out() -> bool:
  return os.environ.get(OPT_OUT_ENV, "").strip().lower() not in ("", "0", "false", "no")


def enable_compilation_cache(path: str | None = None) -> str | None:
  """Turns JAX's persistent compilation cache on (once per process); returns its directory.

  Cheap after the first call. Does nothing (returns the user's directory, or None) when the
  user configured a cache directory in `jax.config`, disabled JAX's cache, or set
  `DPGCD_JAX_NO_COMPILATION_CACHE`. Call it before the first fit: programs compiled before it
  are not written.

  Args:
    path: the directory (default `default_cache_dir`); only the first call decides.
  """
  if _state["decided"]:
    return _state["dir"]
  with _lock:
    if _state["decided"]:
      return _state["dir"]
    import jax  # pylint: disable=g-import-not-at-top
    configured: str | None = getattr(jax.config, _JAX_CACHE_DIR)
    directory: str | None
    if configured:
      directory = configured  # the user's own cache: never overridden
    elif _opted_out() or not getattr(jax.config, _JAX_ENABLE_CACHE):
      directory = None
    else:
      directory = _turn_on(jax, path or default_cache_dir())
    _state.update({"decided": True, "dir": directory})
    return directory


def _turn_on(jax, directory: str) -> str | None:
  try:
    os.makedirs(directory, mode=0o700, exist_ok=True)
  except OSError:
    return None  # an unwritable home: run without a cache rather than fail the fit
  jax.config.update("jax_compilation_cache_dir", directory)
  if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ and getattr(jax.config, _JAX_MIN_TIME) == 1.0:
    jax.config.update(_JAX_MIN_TIME, 0.0)
  return directory


def compilation_cache_dir() -> str | None:
  """The directory in use, or None (not yet decided, or off)."""
  return _state["dir"]


@contextlib.contextmanager
def count_compilations() -> Iterator[list[str]]:
  """Counts the XLA compilations inside a `with` block: yields a list that collects the name of
  every program compiled there (`len(names)` is the count), from JAX's monitoring event
  `/jax/core/compile/backend_compile_duration` (which also fires for a program loaded from the
  persistent cache: loading is counted as compiling). Changes no JAX setting; blocks may nest.

  Example: a second fit at another epsilon compiles nothing (the number of passes and the noise
  multipliers are runtime values of the compiled program):

  ```python
  with dg.count_compilations() as compiled:
    dg.fit(dg.dp_gcd, problem, key, epsilon=2.0, delta=1e-6, passes=5)
  len(compiled)  # 0 after a first fit on a problem of the same shapes
  ```
  """
  import jax  # pylint: disable=g-import-not-at-top

  names: list[str] = []

  def listener(event: str, duration_secs: float, **kwargs: str | int) -> None:
    del duration_secs
    if event == COMPILE_EVENT:
      names.append(str(kwargs.get("fun_name", "?")))

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield names
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


def _reset_for_tests() -> None:
  with _lock:
    _state.update({"decided": False, "dir": None})

"""Command line: `python -m dpgcd_jax.data {list,download} ...`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from dpgcd_jax.data import _cache
from dpgcd_jax.data import _registry


def main(argv: Sequence[str] | None = None) -> None:
  """`python -m dpgcd_jax.data download NAME [NAME ...] [--cache-dir DIR]` or `... list`."""
  parser = argparse.ArgumentParser(prog="python -m dpgcd_jax.data",
                                   description="Datasets of the DP-GCD experiments.")
  commands = parser.add_subparsers(dest="command", required=True)
  down = commands.add_parser("download", help="download datasets into the cache")
  down.add_argument("names", nargs="+", choices=_registry.names("cached"))
  down.add_argument("--cache-dir", default=None, help=f"default: ${_cache.CACHE_ENV_VAR} or ~/.cache/dpgcd_jax")
  commands.add_parser("list", help="list the registered datasets")
  args = parser.parse_args(argv)
  if args.command == "list":
    for spec in _registry.DATASETS.values():
      penalty = "none" if spec.penalty is None else getattr(spec.penalty, "__name__", repr(spec.penalty))
      print(f"{spec.name:18s} {spec.kind:9s} {spec.loss.name:8s} {penalty:4s} {spec.summary}")
    return
  for name in args.names:
    path = _registry.download(name, args.cache_dir)
    print(f"{name}: wrote {path} and {path.with_suffix('.json')}")

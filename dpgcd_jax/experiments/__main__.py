"""`python -m dpgcd_jax.experiments reproduce [--quick] [--datasets ...] [--out DIR]`.

`reproduce --add-to DIR --algorithms ...` adds algorithms to the results saved in DIR
(`dpgcd_jax.experiments.additions.add_algorithms`).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
from typing import Any

import jax

from dpgcd_jax import _config
from dpgcd_jax.experiments import additions
from dpgcd_jax.experiments import report
from dpgcd_jax.experiments import runner


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m dpgcd_jax.experiments",
                                   description="Reproduce Figure 1 of the DP-GCD paper.")
  commands = parser.add_subparsers(dest="command", required=True)
  rep = commands.add_parser("reproduce", help="run a preset and write the figure, table and records")
  rep.add_argument("--quick", action="store_true", help="the quick preset (offline data, minutes)")
  rep.add_argument("--datasets", nargs="+", help="data set names (default: the preset's)")
  rep.add_argument("--algorithms", nargs="+", help=f"subset of {' '.join(runner.ALGORITHMS)}")
  rep.add_argument("--private-algorithms", nargs="*",
                   help="algorithms of the end-to-end private column (none: no private column)")
  rep.add_argument("--passes", nargs="+", type=int, help="override the preset's budgets of passes")
  rep.add_argument("--seeds", type=int, help="override the preset's number of seeds")
  rep.add_argument("--max-extensions", type=int, help="override the preset's bound on grid extensions")
  rep.add_argument("--out", type=pathlib.Path, help="output directory (default: results, or the --add-to one)")
  rep.add_argument("--add-to", type=pathlib.Path, metavar="DIR",
                   help="add --algorithms to the results saved in DIR: run their grid searches only, recompute the "
                        "winners and significance tests over all algorithms, rewrite DIR (or --out); the sizes are "
                        "the saved preset's, the skip reasons of the added algorithms the named preset's")
  args = parser.parse_args(argv)
  _config.enable_compilation_cache()  # a command line owns its process: its programs are kept on disk

  preset = runner.QUICK if args.quick else runner.FULL
  if args.add_to is not None:
    fixed = [f"--{k.replace('_', '-')}" for k in ("datasets", "passes", "seeds", "max_extensions", "private_algorithms")
             if getattr(args, k) is not None]
    if not args.algorithms or fixed:
      parser.error("--add-to needs --algorithms and takes the other sizes from the saved preset"
                   + (f" (drop {' '.join(fixed)})" if fixed else ""))
    saved = report.load_results(args.add_to)
    with jax.enable_x64(True):
      results = additions.add_algorithms(saved, args.algorithms, skip=preset.skip)
    return _write(results, args.out or args.add_to)
  changes: dict[str, Any] = {}  # Preset fields of several types
  if args.passes:
    changes["passes"] = tuple(args.passes)
  if args.seeds:
    changes["seeds"] = args.seeds
  if args.max_extensions is not None:
    changes["max_extensions"] = args.max_extensions
  if args.private_algorithms is not None:
    changes["private_algorithms"] = tuple(args.private_algorithms)
  preset = dataclasses.replace(preset, **changes)
  # Explicit dtypes: runner.build makes a float64 problem for F* and the objectives and a
  # float32 one for the private runs; 64-bit mode is on for this call only, not globally.
  with jax.enable_x64(True):
    results = runner.run_experiment(preset, datasets=args.datasets, algorithms=args.algorithms)
  return _write(results, args.out or pathlib.Path("results"))


def _write(results: dict, out: pathlib.Path) -> int:
  paths = report.write_results(results, out)
  print(paths["table"].read_text())
  print("\n".join(f"{k}: {v}" for k, v in paths.items()))
  return 0


if __name__ == "__main__":
  sys.exit(main())

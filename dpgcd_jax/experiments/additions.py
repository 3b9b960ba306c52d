"""Algorithms added to saved results of the paper's experiment, without re-running the saved ones.

The searches of an algorithm do not depend on the others, only the marks (winner,
significance) do: the added algorithms are searched as
[`run_experiment`][dpgcd_jax.experiments.runner.run_experiment] would search them, and the
marks are recomputed over every row. Before a saved row is used,
its data set and its noise are checked against what today's code would produce.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

import numpy as np
import tqdm

from dpgcd_jax import data as data_lib
from dpgcd_jax.experiments import sweeps
from dpgcd_jax.experiments.algorithms import ALGORITHMS
from dpgcd_jax.experiments.algorithms import EPSILON
from dpgcd_jax.experiments.prepared import Prepared
from dpgcd_jax.experiments.prepared import build
from dpgcd_jax.experiments.runner import MARKS
from dpgcd_jax.experiments.runner import Preset
from dpgcd_jax.experiments.runner import check_preset
from dpgcd_jax.experiments.runner import compare
from dpgcd_jax.experiments.runner import confirm_key
from dpgcd_jax.experiments.runner import search_algorithms
from dpgcd_jax.experiments.runner import versions
from dpgcd_jax.experiments.sweeps import seed_keys
from dpgcd_jax.privacy import calibration


def preset_of(record: dict) -> Preset:
  """The `Preset` of saved results (`results["preset"]`, JSON lists back to tuples)."""
  fields = {f.name for f in dataclasses.fields(Preset)}
  unknown = set(record) - fields
  if unknown:
    raise ValueError(f"Expected preset fields among {sorted(fields)}, got {sorted(unknown)}.")
  values = dict(record)
  for key in ("passes", "datasets", "algorithms", "private_algorithms"):
    if key in values:
      values[key] = tuple(values[key])
  if "skip" in values:
    values["skip"] = tuple(tuple(s) for s in values["skip"])
  return Preset(**values)


def check_same_problem(prepared: Prepared, info: dict, name: str) -> None:
  """ValueError unless the data set is the one the saved rows were measured on (n, p, F*, F(w^0))."""
  ds = prepared.dataset
  saved = (info["n"], info["p"], info["solution_nnz"])
  if (ds.n, ds.p, prepared.solution_nnz) != saved or not (
      np.isclose(prepared.f_star, info["f_star"], rtol=1e-9, atol=0.0)
      and np.isclose(prepared.f_zero, info["f_zero"], rtol=1e-9, atol=0.0)):
    raise ValueError(
        f"Expected {name} to be the data set of the saved results (n, p, nnz(w*) = {saved}, F* = {info['f_star']!r}, "
        f"F(w^0) = {info['f_zero']!r}), got ({ds.n}, {ds.p}, {prepared.solution_nnz}), F* = {prepared.f_star!r}, "
        f"F(w^0) = {prepared.f_zero!r}: its relative errors would not compare; re-run the whole preset.")


def check_same_noise(row: dict, noise: Any, saved_epsilon: float) -> None:
  """ValueError unless the calibration of today reproduces a saved row's noise multipliers.

  Up to the calibration's precision (`calibration.REL_TOL`): two calibrations of the same ledger
  from different starting points (the experiments' former closed-form calibrators and the solvers'
  plans) agree to within it, each meeting the budget. And the saved noise must meet the budget
  under today's ledger (`saved_epsilon`, its epsilon there, at most `EPSILON`)."""
  if saved_epsilon > EPSILON:
    raise ValueError(
        f"Expected the saved noise {row['noise']!r} of {row['algorithm']} at {row['passes']} passes on "
        f"{row['dataset']} to meet epsilon = {EPSILON} under today's ledger, got epsilon = {saved_epsilon!r}: "
        "re-run the whole preset.")
  if np.shape(noise) != np.shape(row["noise"]) or not np.allclose(
      np.ravel(noise), np.ravel(row["noise"]), rtol=calibration.REL_TOL, atol=0.0):
    raise ValueError(
        f"Expected the calibration of {row['algorithm']} at {row['passes']} passes on {row['dataset']} to give the "
        f"saved noise {row['noise']!r}, got {sweeps.json_noise(noise)!r}: the saved rows were calibrated otherwise; "
        "re-run the whole preset.")


def add_algorithms(results: dict, algorithms: Sequence[str], *, skip: Iterable[tuple[str, str, str]] = (),
                   progress: bool = True) -> dict:
  """Saved results with more algorithms: their searches only, then the marks of all recomputed.

  The paper-protocol columns are independent searches: one algorithm's rows depend on the data
  set, the preset's sizes and the grid keys (stream 0), not on the other algorithms. So the
  added algorithms are searched exactly as `run_experiment` would (the same preparation,
  calibration, keys and grid extension), and only what compares algorithms is recomputed, per
  (data set, budget), over the old and the new rows: the winner, the confirmation runs on
  fresh seeds (stream 1; a saved confirmation of the same point is reused, the others are run)
  and Welch's tests (`compare`). The saved rows, the non-private greedy CD, the end-to-end
  private column and the data set facts are kept. The result is what `run_experiment` would
  return for the saved preset with `algorithms` appended (rows in the preset's order), up to
  float32 rounding of runs made in other compiled batches and the timings, which are
  accumulated: `seconds` adds this call's, and `additions` records it.

  Before using a saved row the data set is checked (n, p, nnz(w*), F*, F(w^0)), and every
  saved algorithm's noise is re-calibrated and checked against the saved one: ValueError
  when today's code would not have produced the saved rows' setting.

  Args:
    results: saved results (`report.load_results`; `runs` None when they were not saved).
    algorithms: names in `ALGORITHMS` not in the saved preset.
    skip: `(dataset, algorithm, reason)` combinations not run (those of the added
      algorithms join the preset's `skip`).
    progress: show a progress bar.
  """
  old = preset_of(results["preset"])
  added = tuple(dict.fromkeys(algorithms))
  present = [a for a in added if a in old.algorithms]
  if not added or present:
    raise ValueError(f"Expected algorithms that the saved results ({', '.join(old.algorithms)}) lack, got "
                     f"{tuple(algorithms)!r}.")
  extra = tuple((d, a, why) for d, a, why in skip if a in added and (d, a, why) not in old.skip)
  preset = dataclasses.replace(old, algorithms=old.algorithms + added, skip=old.skip + extra)
  check_preset(preset)
  order = {a: i for i, a in enumerate(preset.algorithms)}
  started = time.perf_counter()
  keys = seed_keys(preset.seeds)
  saved: dict[tuple[str, int], list[dict]] = {}
  for b in results["best"]:
    saved.setdefault((b["dataset"], int(b["passes"])), []).append(b)
  runs: list[dict] = []
  best, skipped, dataset_seconds = [], list(results.get("skipped", [])), {}
  bar = tqdm.tqdm(total=len(preset.datasets) * len(added) * len(preset.passes), disable=not progress, desc="add",
                  unit="job")
  for name in preset.datasets:
    t0 = time.perf_counter()
    bar.set_postfix_str(f"{name}: data and reference optimum")
    prepared = build(data_lib.get(name))
    check_same_problem(prepared, results["datasets"][name], name)
    rows_by_passes = {t: [{k: v for k, v in b.items() if k not in MARKS} for b in saved.get((name, t), [])]
                      for t in preset.passes}
    confirmed = {confirm_key(b): b["confirm"] for t in preset.passes for b in saved.get((name, t), [])
                 if b.get("confirm") is not None}
    noises = search_algorithms(prepared, name, added, preset, keys, bar, rows_by_passes, runs, skipped)
    delta = 1.0 / prepared.private.num_examples**2
    for passes, rows in rows_by_passes.items():
      bar.set_postfix_str(f"{name} {passes} passes: significance")
      rows.sort(key=lambda r: order[r["algorithm"]])
      for r in rows:
        if r["algorithm"] not in added:
          algorithm = ALGORITHMS[r["algorithm"]]
          noise = algorithm.calibrate(prepared.private, delta, passes)
          saved_epsilon = algorithm.ledger(prepared.private, r["noise"], passes).epsilon(delta)
          check_same_noise(r, noise, saved_epsilon)
          # the saved rows' own multipliers (checked above), so that the confirmations match them
          noises[(r["algorithm"], passes)] = tuple(r["noise"]) if isinstance(r["noise"], list) else r["noise"]
      compare(rows, prepared, preset, {r["algorithm"]: noises[(r["algorithm"], passes)] for r in rows}, confirmed)
      best.extend(rows)
    dataset_seconds[name] = time.perf_counter() - t0
  bar.close()
  datasets = {name: i for i, name in enumerate(preset.datasets)}
  by_place = lambda r: (datasets[r["dataset"]], order[r["algorithm"]])
  seconds = time.perf_counter() - started
  out = dict(results)
  out.update(
      best=best, skipped=sorted(skipped, key=by_place), preset=dataclasses.asdict(preset),
      seconds=results["seconds"] + seconds,
      additions=list(results.get("additions", [])) + [
          dict(algorithms=list(added), seconds=seconds, dataset_seconds=dataset_seconds, versions=versions())])
  out["runs"] = None if results.get("runs") is None else sorted(results["runs"] + runs, key=by_place)
  return out

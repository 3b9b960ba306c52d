"""Writing a sweep's results: CSV / JSON records, a markdown table and the figure."""

from __future__ import annotations

import csv
import json
import pathlib
from typing import Any

import numpy as np

from dpgcd_jax.experiments import runner


def write_results(results: dict, out: pathlib.Path) -> dict[str, pathlib.Path]:
  """Writes runs.csv, best.csv, summary.json, table.md and figure.png into ``out``."""
  out.mkdir(parents=True, exist_ok=True)
  paths = {"runs": out / "runs.csv", "best": out / "best.csv", "summary": out / "summary.json",
           "table": out / "table.md", "figure": out / "figure.png"}
  _write_csv(results["runs"], paths["runs"])
  _write_csv(results["best"], paths["best"])
  summary = {k: v for k, v in results.items() if k != "runs"}
  paths["summary"].write_text(json.dumps(summary, indent=2))
  paths["table"].write_text(markdown_table(results))
  plot(results, paths["figure"])
  return paths


def _write_csv(rows: list[dict], path: pathlib.Path) -> None:
  with path.open("w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
      writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()})


def _best_by(results: dict) -> dict[tuple[str, str, int], dict]:
  return {(b["dataset"], b["algorithm"], b["passes"]): b for b in results["best"]}


def markdown_table(results: dict) -> str:
  """Best relative error (mean ± std over seeds; mean non-zeros) per data set and budget."""
  best = _best_by(results)
  algorithms = list(dict.fromkeys(b["algorithm"] for b in results["best"]))
  header = ["data set (n x p, nnz of w*)", "passes"] + [runner.ALGORITHMS[a].label for a in algorithms]
  lines = [
      f"Relative error (F(w) - F*) / (F(0) - F*) at epsilon = {results['epsilon']:g}, delta = 1/n^2: "
      "best grid point, mean ± std over seeds (mean non-zeros of the solutions).", "",
      "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for name, info in results["datasets"].items():
    for passes in results["preset"]["passes"]:
      cells = []
      for a in algorithms:
        b = best.get((name, a, passes))
        cells.append("" if b is None else f"{b['mean']:.3g} ± {b['std']:.2g} ({b['nnz']:.0f})")
      label = f"{name} ({info['n']} x {info['p']}, {info['solution_nnz']})"
      lines.append(f"| {label} | {passes} | " + " | ".join(cells) + " |")
  lines += ["", f"Wall time: {results['seconds']:.0f} s on {results['versions']['backend']}."]
  return "\n".join(lines) + "\n"


def plot(results: dict, path: pathlib.Path) -> None:
  """One panel per data set: log relative error vs passes, mean and min-max over seeds."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  best = _best_by(results)
  names = list(results["datasets"])
  algorithms = list(dict.fromkeys(b["algorithm"] for b in results["best"]))
  cols = min(4, len(names))
  rows = int(np.ceil(len(names) / cols))
  fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.3 * rows), squeeze=False)
  passes = results["preset"]["passes"]
  for ax, name in zip(axes.ravel(), names):
    for a in algorithms:
      pts: list[Any] = [best[(name, a, t)] for t in passes if (name, a, t) in best]
      x = [p["passes"] for p in pts]
      mean = np.maximum([p["mean"] for p in pts], 1e-8)
      ax.plot(x, mean, marker="o", label=runner.ALGORITHMS[a].label)
      ax.fill_between(x, np.maximum([p["min"] for p in pts], 1e-8), np.maximum([p["max"] for p in pts], 1e-8),
                      alpha=0.2)
    info = results["datasets"][name]
    ax.set_title(f"{name} (n={info['n']}, p={info['p']})")
    ax.set_yscale("log")
    ax.set_xscale("log")
    ax.set_xlabel("passes over the data")
    ax.set_ylabel("relative error")
    ax.grid(True, which="both", alpha=0.3)
  for ax in axes.ravel()[len(names):]:
    ax.axis("off")
  handles, labels = axes.ravel()[0].get_legend_handles_labels()
  fig.legend(handles, labels, loc="lower center", ncol=len(algorithms), frameon=False)
  fig.suptitle(f"epsilon = {results['epsilon']:g}, delta = 1/n^2, best grid point, "
               f"{results['preset']['seeds']} seeds")
  fig.tight_layout(rect=(0, 0.07, 1, 0.95))
  fig.savefig(path, dpi=120)
  plt.close(fig)

"""Writing a sweep's results: CSV / JSON records, a markdown table and the figure."""

from __future__ import annotations

import csv
import json
import pathlib
from typing import Any

import numpy as np

from dpgcd_jax.experiments import runner

EDGE, NO_PROGRESS, TIED = "†", "‡", "≈"


RUN_FIELDS = {"dataset": str, "algorithm": str, "passes": int, "step_size": float, "clip": float, "seed": int,
              "relative_error": float, "nnz": int}


def write_results(results: dict, out: pathlib.Path) -> dict[str, pathlib.Path]:
  """Writes runs.csv, best.csv, private.csv, summary.json, table.md and figure.png into `out`.

  runs.csv only when `results["runs"]` is not None (`load_results` of a directory without it).
  """
  out.mkdir(parents=True, exist_ok=True)
  paths = {"best": out / "best.csv", "summary": out / "summary.json", "table": out / "table.md",
           "figure": out / "figure.png"}
  if results.get("runs") is not None:
    paths["runs"] = out / "runs.csv"
    _write_csv(results["runs"], paths["runs"])
  _write_csv(results["best"], paths["best"])
  if results.get("private"):
    paths["private"] = out / "private.csv"
    _write_csv([{k: v for k, v in r.items() if k != "report"} for r in results["private"]], paths["private"])
  summary = {k: v for k, v in results.items() if k != "runs"}
  paths["summary"].write_text(json.dumps(summary, indent=2))
  paths["table"].write_text(markdown_table(results))
  plot(results, paths["figure"])
  return paths


def load_results(out: pathlib.Path) -> dict:
  """The results written by `write_results` into `out`: summary.json, and the runs of runs.csv (None without it).

  What `additions.add_algorithms` extends (the committed results leave out runs.csv).
  """
  results = json.loads((out / "summary.json").read_text())
  path = out / "runs.csv"
  results["runs"] = None
  if path.exists():
    with path.open(newline="") as f:
      results["runs"] = [{k: RUN_FIELDS[k](v) for k, v in row.items()} for row in csv.DictReader(f)]
  return results


def _write_csv(rows: list[dict], path: pathlib.Path) -> None:
  if not rows:
    path.write_text("")
    return
  with path.open("w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
      writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})


def _best_by(results: dict) -> dict[tuple[str, str, int], dict]:
  return {(b["dataset"], b["algorithm"], b["passes"]): b for b in results["best"]}


def _private_by(results: dict) -> dict[tuple[str, str, int], dict]:
  return {(b["dataset"], b["algorithm"], b["passes"]): b for b in results.get("private", [])}


def _label(name: str) -> str:
  return runner.ALGORITHMS[name].label if name in runner.ALGORITHMS else name


def cell(b: dict) -> str:
  """`mean ± std (nnz)` with the flags: bold winner, ≈ tied with it, † edge, ‡ no progress."""
  text = f"{b['mean']:.3g} ± {b['std']:.2g} ({b['nnz']:.0f})"
  if b.get("winner"):
    text = f"**{text}**"
  vs = b.get("versus_winner")
  if vs is not None and not vs["significant"]:
    text = f"{TIED} {text}"
  if b.get("no_progress"):
    text += f" {NO_PROGRESS}"
  elif b.get("edges"):
    text += f" {EDGE}"
  return text


def edge_summary(results: dict) -> tuple[list[dict], list[dict]]:
  """The best points still on a grid edge (with progress), and those without progress."""
  edges = [b for b in results["best"] if b["edges"] and not b["no_progress"]]
  stuck = [b for b in results["best"] if b["no_progress"]]
  return edges, stuck


def markdown_table(results: dict) -> str:
  """The table of the results: best relative errors, quasi-sparsity, private column, notes."""
  best, private = _best_by(results), _private_by(results)
  greedy = {(g["dataset"], g["passes"]): g["relative_error"] for g in results.get("greedy", [])}
  algorithms = list(dict.fromkeys(b["algorithm"] for b in results["best"]))
  private_algorithms = list(dict.fromkeys(b["algorithm"] for b in results.get("private", [])))
  seeds = results["preset"]["seeds"]
  header = (["data set (n x p; nnz(w*); top-10 share of ‖w*‖²)", "passes", "greedy CD, non-private"]
            + [_label(a) for a in algorithms] + [f"end-to-end private {_label(a)}" for a in private_algorithms])
  lines = [
      f"Relative error (F(w) - F*) / (F(w^0) - F*) at epsilon = {results['epsilon']:g}, delta = 1/n^2. "
      f"Paper-protocol columns: best grid point (standardized data, non-private choice), mean ± std over "
      f"{seeds} seeds (mean non-zeros). **Bold**: lowest mean; {TIED}: not significantly different from it "
      f"(Welch t-test, 5% level, on {results['preset']['confirm_seeds']} fresh seeds where the spreads "
      f"overlap); {EDGE}: best point on an edge of the grid after "
      f"{results['preset']['max_extensions']} extension rounds; {NO_PROGRESS}: no grid point beats w^0. "
      "Greedy CD: non-private GS-s coordinate descent after as many iterations as DP-GCD (one per pass). "
      "End-to-end private: public feature bounds, hyperparameters chosen by private repeat-and-select, "
      f"total epsilon = {results['epsilon']:g}: median [min, max] over {seeds} independent selections (one "
      "selection that draws few repetitions can release a poor candidate).", "",
      "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for name, info in results["datasets"].items():
    label = f"{name} ({info['n']} x {info['p']}; {info['solution_nnz']}; {info['top10_share']:.2f})"
    for passes in results["preset"]["passes"]:
      cells = [f"{greedy[(name, passes)]:.3g}" if (name, passes) in greedy else ""]
      for a in algorithms:
        b = best.get((name, a, passes))
        cells.append("skipped" if b is None else cell(b))
      for a in private_algorithms:
        r = private.get((name, a, passes))
        cells.append("" if r is None else f"{r['median']:.3g} [{r['min']:.3g}, {r['max']:.3g}]")
      lines.append(f"| {label} | {passes} | " + " | ".join(cells) + " |")
  lines += defaults_table(results)
  lines += [""] + notes(results)
  return "\n".join(lines) + "\n"


def defaults_table(results: dict) -> list[str]:
  """The estimators' defaults, end to end (`private.defaults_row`): one row per data set."""
  rows = results.get("defaults") or []
  if not rows:
    return []
  lines = ["", f"The library's estimator with its defaults, end to end (epsilon = {results['epsilon']:g} in one "
           "ledger: declared feature bound, DP-GCD with the selected features' curvature released, T greedy steps "
           "by the public rule in (n, epsilon); nothing tuned): relative error on the same objective, median "
           f"[min, max] over {results['preset']['seeds']} seeds. Where it is near 1 the budget cannot resolve "
           "the signal at this n (private learning does not pay there: docs/high_dim.md plans it by "
           "n epsilon r* / ln p >= 30, r* the strongest feature's effect); where it is below the end-to-end "
           "private column, the defaults beat a private search.", "",
           "| data set | T | relative error | epsilon (ledger) |", "|---|---|---|---|"]
  for r in rows:
    lines.append(f"| {r['dataset']} | {r['steps']} | {r['median']:.3g} [{r['min']:.3g}, {r['max']:.3g}] | "
                 f"{r['epsilon']:.4g} |")
  return lines


def notes(results: dict) -> list[str]:
  """The closing notes: edge optima, significance, private budgets, skipped runs, wall time."""
  edges, stuck = edge_summary(results)
  total = len(results["best"])
  out = [f"- Best points on a grid edge after extension: {len(edges)} of {total}"
         + (": " + "; ".join(f"{b['dataset']} {b['algorithm']} {b['passes']} passes ({', '.join(b['edges'])})"
                             for b in edges) if edges else "") + "."]
  if stuck:
    out.append(f"- No grid point beats w^0 (relative error 1, grid not extended): {len(stuck)} of {total}: "
               + "; ".join(f"{b['dataset']} {b['algorithm']} {b['passes']}" for b in stuck) + ".")
  extended = sum(1 for b in results["best"] if b["extensions"])
  out.append(f"- Grids extended at least once: {extended} of {total} searches.")
  tested = [b for b in results["best"] if b.get("versus_winner")]
  fresh = [b for b in tested if b["versus_winner"]["fresh_seeds"]]
  tied = [b for b in tested if not b["versus_winner"]["significant"]]
  out.append(f"- Significance: {len(fresh)} of {len(tested)} comparisons with the best algorithm re-run on "
             f"{results['preset']['confirm_seeds']} fresh seeds (overlapping spreads); {len(tied)} not "
             "significant at 5%" + (": " + "; ".join(
                 f"{b['dataset']} {b['passes']} {b['algorithm']} (p = {b['versus_winner']['pvalue']:.2g})"
                 for b in tied) if tied else "") + ".")
  if results.get("private"):
    eps = max(r["epsilon"] for r in results["private"])
    out.append(f"- End-to-end private column: largest total epsilon reported by the ledgers {eps:.4g} "
               f"(selection included, route {results['private'][0]['route']}); run noise "
               f"{min(r['scale'] for r in results['private']):.2f}-{max(r['scale'] for r in results['private']):.2f}"
               " times the paper column's.")
  for s in results.get("skipped", []):
    out.append(f"- Not run: {s['algorithm']} on {s['dataset']}: {s['reason']}.")
  additions = results.get("additions", [])
  if additions:
    first = results["seconds"] - sum(a["seconds"] for a in additions)
    later = {name for a in additions for name in a["algorithms"]}
    names = ", ".join(a for a in results["preset"]["algorithms"] if a not in later)
    added = "; ".join(f"{a['seconds']:.0f} s adding {', '.join(a['algorithms'])} to the saved results (their searches, "
                      f"then the marks of all: `reproduce --add-to`)" for a in additions)
    out.append(f"- Wall time: {results['seconds']:.0f} s on {results['versions']['backend']}: {first:.0f} s for "
               f"{names}, the greedy CD and the private column; {added}.")
  else:
    out.append(f"- Wall time: {results['seconds']:.0f} s on {results['versions']['backend']}.")
  return out


def plot(results: dict, path: pathlib.Path) -> None:
  """One panel per data set: relative error vs passes; mean ± std over seeds.

  Solid: the paper's protocol (hollow marker: best point on a grid edge); dashed: the
  end-to-end private column; grey dotted: non-private greedy CD.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  best, private = _best_by(results), _private_by(results)
  names = list(results["datasets"])
  algorithms = list(dict.fromkeys(b["algorithm"] for b in results["best"]))
  private_algorithms = list(dict.fromkeys(b["algorithm"] for b in results.get("private", [])))
  colors = {a: f"C{i}" for i, a in enumerate(runner.ALGORITHMS)}
  cols = min(3, len(names))
  rows = int(np.ceil(len(names) / cols))
  fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.5 * rows), squeeze=False)
  passes = results["preset"]["passes"]
  greedy = {(g["dataset"], g["passes"]): g["relative_error"] for g in results.get("greedy", [])}
  floor = 1e-4
  for ax, name in zip(axes.ravel(), names, strict=False):  # more panels than names
    for a in algorithms:
      pts: list[Any] = [best[(name, a, t)] for t in passes if (name, a, t) in best]
      if not pts:
        continue
      x = np.array([p["passes"] for p in pts])
      mean = np.maximum([p["mean"] for p in pts], floor)
      std = np.array([p["std"] for p in pts])
      ax.errorbar(x, mean, yerr=[np.minimum(std, mean - floor), std], color=colors[a], marker="o",
                  capsize=2, label=_label(a))
      edge = np.array([bool(p["edges"]) and not p["no_progress"] for p in pts])
      if edge.any():
        ax.plot(x[edge], mean[edge], "o", ms=9, mfc="white", color=colors[a], zorder=3)
    for a in private_algorithms:
      pts = [private[(name, a, t)] for t in passes if (name, a, t) in private]
      if pts:
        med = np.maximum([p["median"] for p in pts], floor)
        lo, hi = np.maximum([p["min"] for p in pts], floor), np.maximum([p["max"] for p in pts], floor)
        ax.errorbar([p["passes"] for p in pts], med, yerr=[med - lo, hi - med], color=colors[a], ls="--",
                    marker="s", ms=4, capsize=2, label=f"{_label(a)}, end-to-end private (median, range)")
    centres = [best[(name, a, t)]["mean"] for a in algorithms for t in passes if (name, a, t) in best]
    centres += [private[(name, a, t)]["median"] for a in private_algorithms for t in passes
                if (name, a, t) in private]
    top = max([1.5] + [1.3 * c for c in centres if np.isfinite(c)])
    g = [(t, greedy[(name, t)]) for t in passes if (name, t) in greedy]
    if g:
      ax.plot([t for t, _ in g], np.maximum([e for _, e in g], floor), color="grey", ls=":", marker=".",
              label="greedy CD, non-private")
    info = results["datasets"][name]
    ax.set_title(f"{name} (n={info['n']}, p={info['p']})", fontsize=10)
    ax.set_yscale("log")
    ax.set_xscale("log")
    ax.set_ylim(top=min(top, 1e3))
    ax.set_xlabel("passes over the data")
    ax.set_ylabel("relative error")
    ax.grid(True, which="both", alpha=0.3)
  for ax in axes.ravel()[len(names):]:
    ax.axis("off")
  handles, labels = {}, []
  for ax in axes.ravel()[:len(names)]:
    for h, l in zip(*ax.get_legend_handles_labels(), strict=True):
      if l not in handles:
        handles[l] = h
        labels.append(l)
  fig.legend([handles[l] for l in labels], labels, loc="lower center", ncol=min(3, len(labels)), frameon=False,
             fontsize=9)
  fig.suptitle(f"epsilon = {results['epsilon']:g}, delta = 1/n^2; paper protocol: best grid point, mean ± std "
               f"over {results['preset']['seeds']} seeds (hollow: on a grid edge); end-to-end private: median and "
               "range (cut at the top)", fontsize=10)
  legend_rows = int(np.ceil(len(labels) / 3))
  height = fig.get_figheight()  # the legend's rows take about 0.2 inch each, whatever the number of panels
  fig.tight_layout(rect=(0, min(0.5, (0.3 + 0.2 * legend_rows) / height), 1, 1 - 0.5 / height))
  fig.savefig(path, dpi=110)
  plt.close(fig)

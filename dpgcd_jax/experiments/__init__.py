"""The paper's experiments: data sets x algorithms x budgets, vmapped grids, figure and table.

Command line: ``python -m dpgcd_jax.experiments reproduce [--quick] [--datasets ...] [--out DIR]``.
"""

from dpgcd_jax.experiments.report import markdown_table, plot, write_results
from dpgcd_jax.experiments.runner import ALGORITHMS, FULL, PRESETS, QUICK, Preset, run_experiment

__all__ = ["ALGORITHMS", "FULL", "PRESETS", "Preset", "QUICK", "markdown_table", "plot",
           "run_experiment", "write_results"]

"""The paper's experiments: data sets x algorithms x budgets, grids that contain their optimum, figure and table.

Command line: `python -m dpgcd_jax.experiments reproduce [--quick] [--datasets ...] [--out DIR]`.

* `runner`: algorithms, presets, compiled sweeps, the experiment.
* `grids`: log-spaced grids, edge detection, bounded extension.
* `stats`: quasi-sparsity of a solution, Welch's t-test.
* `private`: the end-to-end private column.
* `report`: records, table and figure.
"""

from dpgcd_jax.experiments.report import markdown_table
from dpgcd_jax.experiments.report import plot
from dpgcd_jax.experiments.report import write_results
from dpgcd_jax.experiments.runner import ALGORITHMS
from dpgcd_jax.experiments.runner import FULL
from dpgcd_jax.experiments.runner import PRESETS
from dpgcd_jax.experiments.runner import QUICK
from dpgcd_jax.experiments.runner import Preset
from dpgcd_jax.experiments.runner import run_experiment

__all__ = ["ALGORITHMS", "FULL", "PRESETS", "Preset", "QUICK", "markdown_table", "plot",
           "run_experiment", "write_results"]

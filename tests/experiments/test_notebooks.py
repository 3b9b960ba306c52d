"""`dpgcd_jax.estimators`, `dpgcd_jax.experiments.report` (as the notebooks use them): the notebooks execute top to
bottom without errors (on a copy: the committed files are untouched)."""

import copy
import pathlib
import sys

import nbclient
import nbformat
import pytest

NOTEBOOKS_DIR = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300

# First cell run in the kernel: it must be this interpreter (the venv with dpgcd_jax installed).
CHECK_KERNEL = f"""
import pathlib, sys
assert pathlib.Path(sys.prefix).resolve() == pathlib.Path({sys.prefix!r}).resolve(), (sys.executable, sys.prefix)
"""


def test_notebooks_found():
  names = {p.name for p in NOTEBOOKS}
  assert {"01_reproduce_figure.ipynb", "02_tutorial_custom_loss_and_vmap.ipynb",
          "03_optax_training_loop.ipynb"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
  committed = nbformat.read(path, as_version=4)
  nb = copy.deepcopy(committed)
  for cell in nb.cells:
    if cell.cell_type == "code":
      cell.outputs, cell.execution_count = [], None
  nb.cells.insert(0, nbformat.v4.new_code_cell(CHECK_KERNEL))
  client = nbclient.NotebookClient(
      nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=False,
      resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
  )
  client.execute()  # raises CellExecutionError (with the cell and traceback) on any error
  errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
  assert not errors
  assert nbformat.read(path, as_version=4) == committed  # the committed file is untouched

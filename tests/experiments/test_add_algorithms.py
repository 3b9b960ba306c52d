"""`dpgcd_jax.experiments.additions`: adding algorithms to saved results (`reproduce --add-to`): the same rows and marks
as one run of all of them."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from dpgcd_jax.experiments import __main__ as cli
from dpgcd_jax.experiments import additions
from dpgcd_jax.experiments import report
from dpgcd_jax.experiments import runner

SKIP = ("diabetes", "dp_fw", "test: not run")
TINY = runner.Preset(passes=(1, 2), seeds=2, datasets=("diabetes",), algorithms=("dp_gcd", "dp_cd"),
                     private_algorithms=(), max_extensions=1, confirm_seeds=4, chunk=4, skip=())
ADDED = ("dp_iht", "dp_fw")
TIMINGS = ("grid_seconds", "seconds", "paper_seconds", "reference_seconds")


def _json(x):
  return json.loads(json.dumps(x))


def _without_timings(x):
  if isinstance(x, dict):
    return {k: _without_timings(v) for k, v in x.items() if k not in TIMINGS}
  if isinstance(x, list):
    return [_without_timings(v) for v in x]
  return x


@pytest.fixture(scope="module")
def saved_and_whole(tmp_path_factory):
  """Saved results of TINY (dp_gcd, dp_cd) in a directory, and one run of all four algorithms."""
  out = tmp_path_factory.mktemp("saved")
  whole_preset = dataclasses.replace(TINY, algorithms=TINY.algorithms + ADDED, skip=(SKIP,))
  with jax.enable_x64(True):
    report.write_results(runner.run_experiment(TINY, progress=False), out)
    whole = runner.run_experiment(whole_preset, progress=False)
  return out, whole


@pytest.mark.slow
def test_adding_algorithms_gives_the_rows_and_marks_of_one_run_of_all(saved_and_whole, monkeypatch):
  out, whole = saved_and_whole
  saved = report.load_results(out)
  assert saved["runs"] is not None and {r["algorithm"] for r in saved["runs"]} == set(TINY.algorithms)
  confirmed_before = {runner.confirm_key(b) for b in saved["best"] if b["confirm"] is not None}
  reruns = []
  independent = runner.independent
  monkeypatch.setattr(runner, "independent", lambda algorithm, *a, **k: reruns.append(algorithm.name)
                      or independent(algorithm, *a, **k))
  with jax.enable_x64(True):
    added = additions.add_algorithms(saved, ADDED, skip=(SKIP, ("log1", "dp_sgd", "ignored: not added")),
                                  progress=False)
  whole = _json(whole)
  added_json = _json(added)
  # Same rows, same order, same marks (winner, fresh-seed confirmations, Welch tests), same runs and skips.
  assert [(b["algorithm"], b["passes"]) for b in added_json["best"]] == [
      (b["algorithm"], b["passes"]) for b in whole["best"]]
  assert _without_timings(added_json["best"]) == _without_timings(whole["best"])
  assert added_json["runs"] == whole["runs"]
  assert added_json["skipped"] == whole["skipped"] == [dict(dataset="diabetes", algorithm="dp_fw",
                                                             reason=SKIP[2])]
  assert added_json["preset"] == whole["preset"]
  assert added_json["greedy"] == whole["greedy"]
  assert _without_timings(added_json["datasets"]) == _without_timings(whole["datasets"])
  # Only the added searches ran; saved confirmations of the same points were reused, not re-run.
  assert added["additions"][-1]["algorithms"] == list(ADDED)
  assert added["seconds"] == pytest.approx(saved["seconds"] + added["additions"][-1]["seconds"])
  now_confirmed = [b for b in added["best"] if b["confirm"] is not None]
  assert len(reruns) == sum(runner.confirm_key(b) not in confirmed_before for b in now_confirmed)
  # The same table but for the wall time.
  strip = lambda text: [line for line in text.splitlines() if not line.startswith("- Wall time")]
  assert strip(report.markdown_table(added)) == strip(report.markdown_table(whole))
  assert "adding dp_iht, dp_fw to the saved results" in report.markdown_table(added)


@pytest.mark.slow
def test_add_to_on_the_command_line_rewrites_the_directory(saved_and_whole, tmp_path):
  out, whole = saved_and_whole
  assert cli.main(["reproduce", "--add-to", str(out), "--algorithms", "dp_iht", "--out", str(tmp_path)]) == 0
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["preset"]["algorithms"] == ["dp_gcd", "dp_cd", "dp_iht"]
  assert {b["algorithm"] for b in summary["best"]} == {"dp_gcd", "dp_cd", "dp_iht"}
  assert "DP-IHT" in (tmp_path / "table.md").read_text() and (tmp_path / "figure.png").exists()
  assert len((tmp_path / "runs.csv").read_text().splitlines()) > len((out / "runs.csv").read_text().splitlines())
  # Without runs.csv the rows are still extended, and no partial runs.csv is written.
  (tmp_path / "runs.csv").unlink()
  assert cli.main(["reproduce", "--add-to", str(tmp_path), "--algorithms", "dp_fw"]) == 0
  assert not (tmp_path / "runs.csv").exists()
  assert json.loads((tmp_path / "summary.json").read_text())["preset"]["algorithms"][-1] == "dp_fw"
  for argv in ([], ["--algorithms", "dp_sgd", "--passes", "3"]):  # what to add; the sizes are the saved ones
    with pytest.raises(SystemExit):
      cli.main(["reproduce", "--add-to", str(out)] + argv)


def test_saved_rows_that_the_code_would_not_reproduce_are_refused(saved_and_whole):
  out, _ = saved_and_whole
  saved = report.load_results(out)
  with pytest.raises(ValueError, match="lack"):
    additions.add_algorithms(saved, ("dp_gcd",), progress=False)
  other_problem = _json(saved)
  other_problem["datasets"]["diabetes"]["f_star"] *= 1.001
  with jax.enable_x64(True), pytest.raises(ValueError, match="re-run the whole preset"):
    additions.add_algorithms(other_problem, ("dp_iht",), progress=False)
  other_noise = _json(saved)
  other_noise["best"][0]["noise"] = [2 * x for x in np.ravel(other_noise["best"][0]["noise"])]
  with jax.enable_x64(True), pytest.raises(ValueError, match="calibrated otherwise"):
    additions.add_algorithms(other_noise, ("dp_iht",), progress=False)

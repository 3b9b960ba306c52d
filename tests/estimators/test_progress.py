"""`dpgcd_jax.progress` (`verbose=`): a progress bar over the passes of the private runs, the same fit without it."""

import numpy as np
import pytest

from dpgcd_jax import DPGCDClassifier
from dpgcd_jax import DPGCDClassifierCV
from dpgcd_jax import DPGCDRegressor


def data(n=400, p=6, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


def test_a_verbose_fit_shows_its_passes_and_is_the_same_fit(capsys):
  X, y = data()
  quiet = DPGCDClassifier(classes=[0, 1], feature_bound=3.0, max_iter=12, random_state=0).fit(X, y)
  assert capsys.readouterr().err == ""
  loud = DPGCDClassifier(classes=[0, 1], feature_bound=3.0, max_iter=12, random_state=0, verbose=1).fit(X, y)
  err = capsys.readouterr().err
  assert "DPGCDClassifier.fit (dp_gcd, 1 run(s))" in err and "12/12" in err, err
  np.testing.assert_array_equal(quiet.coef_, loud.coef_)
  assert quiet.privacy_ == loud.privacy_
  again = DPGCDClassifier(classes=[0, 1], feature_bound=3.0, max_iter=12, random_state=0).fit(X, y)
  assert capsys.readouterr().err == ""  # the quiet program again: no callback left behind
  np.testing.assert_array_equal(quiet.coef_, again.coef_)


def test_one_vs_rest_runs_share_the_bar(capsys):
  X, _ = data()
  y = np.digitize(X[:, 0], [-0.5, 0.5])
  DPGCDClassifier(classes=[0, 1, 2], feature_bound=3.0, max_iter=5, random_state=0, verbose=1).fit(X, y)
  assert "(dp_gcd, 3 run(s))" in (err := capsys.readouterr().err) and "5/5" in err  # 3 runs in one program


def test_other_solvers_and_the_search_show_progress(capsys):
  X, y = data(n=600)
  DPGCDRegressor(solver="dp_iht", feature_bound=3.0, target_bound=1.0, max_iter=8, random_state=0,
                 verbose=1).fit(X, y.astype(float))
  assert "DPGCDRegressor.fit (dp_iht, 1 run(s))" in (err := capsys.readouterr().err) and "8/8" in err
  DPGCDClassifierCV(classes=[0, 1], feature_bound=3.0, param_grid={"max_iter": [4, 8]}, random_state=0,
                    verbose=1).fit(X, y)
  assert "DPGCDClassifierCV search" in capsys.readouterr().err


@pytest.mark.parametrize("verbose", [-1, "yes", 1.5])
def test_a_bad_verbose_is_refused_by_name(verbose):
  X, y = data(n=50)
  with pytest.raises(ValueError, match="verbose"):
    DPGCDClassifier(classes=[0, 1], feature_bound=3.0, verbose=verbose).fit(X, y)


def test_nested_bars_each_close_their_own_and_a_solver_import_needs_no_tqdm():
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel

  from dpgcd_jax import progress  # pylint: disable=import-outside-toplevel

  with progress.bar(total=2, desc="outer", enabled=True):
    with progress.bar(total=2, desc="inner", enabled=True):
      progress.tick(0)
    assert progress.active()
    progress.tick(1)
  assert not progress.active()
  progress.tick(2)  # no bar: nothing to advance, no error
  code = ("import sys; import dpgcd_jax.solvers.dp_gcd; from dpgcd_jax import DPGCDClassifier; "
          "assert 'tqdm' not in sys.modules, 'tqdm imported'")
  subprocess.run([sys.executable, "-c", code], check=True)


def test_a_search_over_an_unknown_solver_is_refused_by_name():
  X, y = data(n=50)
  with pytest.raises(ValueError, match="solver"):
    DPGCDClassifierCV(classes=[0, 1], feature_bound=3.0, solver="bogus").fit(X, y)

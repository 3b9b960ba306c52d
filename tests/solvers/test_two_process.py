"""`dpgcd_jax.solvers.dp_gcd`, `dpgcd_jax.solvers.streamed`: two processes (multi-host on one machine): X split by rows
between them, same fit as one process.

The test starts two Python processes on localhost. Each calls ``jax.distributed.initialize``
(coordinator on 127.0.0.1, a free port) with gloo CPU collectives, loads ONLY its half of the
rows, and builds the global ``X`` and ``y`` with ``jax.make_array_from_process_local_data`` on a
mesh over both processes' devices. ``dg.dp_gcd.fit`` with the same key then runs one SPMD
program over the two processes (the clipped sums are cross-process all-reduces); its ``w``
equals the single-process fit to float tolerance and its selected coordinates are the same.
Cases: squared loss with a declared feature bound (float32) and with the privately released
bound (float64, the release's statistic is a cross-process reduction too), logistic loss with
coordinate clipping, and with derivative clipping where ``fit`` has it. Also: a sparse ``X``
whose entries span the two processes is refused with a ValueError naming ``X``, and a fresh
OS-seeded key drawn on process 0 and broadcast (the docs' recipe) is the same on both. And
``dg.streamed.fit`` with each process streaming only its own rows (declared bounds) returns the
one-process streamed model bit for bit (exact totals, added across the processes), and the
in-memory fit's coordinates; so does ``DPGCDClassifier.fit_chunks`` (its typical feature
size's counts, and with ``class_weight="balanced"`` its class counts, are added across the
processes too). Processes that pass different ``passes`` are refused by name, not left with
their collectives out of step.

Every address is loopback: the coordinator binds 127.0.0.1, and the gloo transport is given
hostname 127.0.0.1. The children are bounded in time and killed when the test fails.
"""

import inspect
import os
import socket
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest

import dpgcd_jax as dg

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

TIMEOUT_S = 120
N, P = 400, 30  # N rows, split in two halves (one per process)


def _gloo_missing_reason():
  """Why this jaxlib cannot run CPU collectives across processes (None when it can).

  Detected, not guessed: jax builds the CPU client's collectives with
  ``jaxlib._jax.make_gloo_tcp_collectives`` when ``jax_cpu_collectives_implementation`` is
  "gloo" (the default of jax 0.10); a jaxlib built without gloo has no such function.
  """
  try:
    from jax._src.lib import _jax  # pylint: disable=g-import-not-at-top
  except ImportError:  # a jax whose internals moved: the children find out (and the test fails)
    return None
  if not hasattr(_jax, "make_gloo_tcp_collectives"):
    return (f"jaxlib {jax.__version__} has no gloo CPU collectives "
            f"(jax._src.lib._jax.make_gloo_tcp_collectives is missing)")
  return None


# One case: (name, loss, make_problem kwargs, fit kwargs, dtype, (rtol, atol)).
def _cases():
  cases = [
      ("squared_declared_bound_float32", "squared", dict(feature_bound=3.0), {}, np.float32,
       (1e-5, 1e-6)),
      ("squared_released_bound", "squared", {}, {}, np.float64, (1e-9, 1e-12)),
      ("logistic_declared_bound", "logistic", dict(feature_bound=1.0), {}, np.float64, (1e-9, 1e-12)),
  ]
  if "clipping_mode" in inspect.signature(dg.dp_gcd.fit).parameters:
    cases.append(("logistic_derivative_clipping", "logistic", dict(feature_bound=1.0),
                  dict(clipping_mode="derivative", clip=0.3), np.float64, (1e-9, 1e-12)))
  return cases


FIT = dict(epsilon=1.0, delta=1e-5, passes=25)
# epsilon 8: the typical feature size's release is informative at n = 400 (the clip follows the data:
# its counts are added across the processes too).
CLASSIFIER = dict(classes=[-1.0, 1.0], feature_bound=1.0, epsilon=8.0, max_iter=8, random_state=0)

WORKER = textwrap.dedent("""
    import os, sys, traceback
    pid, port, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    def main():
      import jax
      jax.config.update("jax_platforms", "cpu")
      jax.config.update("jax_enable_x64", True)  # as tests/conftest.py
      jax.config.update("jax_cpu_collectives_implementation", "gloo")
      jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}",
                                 coordinator_bind_address=f"127.0.0.1:{port}",
                                 num_processes=2, process_id=pid, initialization_timeout=60)
      try:  # gloo's TCP transport on loopback too (by default: the host name's address)
        from jax._src import distributed, xla_bridge
        from jax._src.lib import _jax
        gloo = _jax.make_gloo_tcp_collectives(distributed.global_state.client, hostname="127.0.0.1")
        xla_bridge.register_backend_factory(
            "cpu", lambda: xla_bridge.make_cpu_client(collectives=gloo), priority=0,
            fail_quietly=False)
      except (ImportError, AttributeError, TypeError) as e:
        print("gloo on the default address:", e, file=sys.stderr)
      import numpy as np
      from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
      from jax.experimental import sparse as jsparse
      import dpgcd_jax as dg

      assert jax.process_count() == 2 and len(jax.devices()) == 2, jax.devices()
      mesh = Mesh(np.array(jax.devices()), ("examples",))
      rows, vector = NamedSharding(mesh, P("examples", None)), NamedSharding(mesh, P("examples"))
      part = np.load(f"{folder}/part{pid}.npz")  # this process's rows only
      out = {}
      for name, loss, make_kw, fit_kw, dtype in eval(part["cases"].item()):
        X_local = part["X"].astype(dtype)
        y_local = part["y_logistic" if loss == "logistic" else "y_squared"].astype(dtype)
        X = jax.make_array_from_process_local_data(rows, X_local)
        y = jax.make_array_from_process_local_data(vector, y_local)
        assert not X.is_fully_addressable and X.shape == (2 * len(X_local), X_local.shape[1])
        assert [s.data.shape for s in X.addressable_shards] == [X_local.shape]
        problem = dg.make_problem(X, y, loss, **make_kw)
        assert problem.XT.sharding.spec == P(None, "examples"), problem.XT.sharding
        result = dg.dp_gcd.fit(problem, jax.random.key(0), **fit_kw, **eval(part["fit"].item()))
        out[name + "/w"] = np.asarray(result.w)  # replicated: every process reads all of w
        out[name + "/coordinates"] = np.asarray(result.trace.coordinates)
        if "feature_bound" in make_kw:  # streamed: this process's rows in two chunks, summed exactly
          half = len(X_local) // 2
          chunks = [(X_local[:half], y_local[:half]), (X_local[half:], y_local[half:])]
          streamed = dg.streamed.fit(chunks, jax.random.key(0), num_examples=2 * len(X_local), loss=loss,
                                     **make_kw, **fit_kw, **eval(part["fit"].item()))
          out[name + "/streamed_w"] = np.asarray(streamed.w)
          out[name + "/streamed_coordinates"] = np.asarray(streamed.trace.coordinates)
          out[name + "/streamed_epsilon"] = np.asarray(streamed.privacy.epsilon)
          if name == "logistic_declared_bound":  # the classifier over each process's chunks
            clf = dg.DPGCDClassifier(**eval(part["classifier"].item()))
            clf.fit_chunks(chunks, num_examples=2 * len(X_local))
            out["classifier/coef"], out["classifier/intercept"] = clf.coef_, np.asarray(clf.intercept_)
            out["classifier/epsilon"], out["classifier/clip"] = np.asarray(clf.privacy_.epsilon), np.asarray(clf.clip_)
            balanced = dg.DPGCDClassifier(**eval(part["classifier"].item()), class_weight="balanced")
            balanced.fit_chunks(chunks, num_examples=2 * len(X_local))  # the class counts added across processes
            out["balanced/coef"], out["balanced/counts"] = balanced.coef_, balanced.class_counts_
            try:  # processes that disagree on a public argument: refused by name, not out of step
              dg.streamed.fit(chunks, jax.random.key(0), num_examples=2 * len(X_local), loss=loss, **make_kw,
                              epsilon=1.0, delta=1e-5, passes=2 + pid)
              out["mismatch_error"] = np.array("no error")
            except ValueError as e:
              out["mismatch_error"] = np.array(str(e))

      # Sparse X whose entries span both processes: refused (sparse problems are not sharded).
      X_local = part["X"]
      r, c = np.nonzero(np.ones_like(X_local))
      indices = np.stack([r + pid * len(X_local), c], axis=1).astype(np.int32)
      data = jax.make_array_from_process_local_data(vector, X_local[r, c])
      indices = jax.make_array_from_process_local_data(rows, indices)
      X_sparse = jsparse.BCOO((data, indices), shape=(2 * len(X_local), X_local.shape[1]))
      y = jax.make_array_from_process_local_data(vector, part["y_logistic"])
      try:
        dg.make_problem(X_sparse, y, "logistic", feature_bound=1.0)
        out["sparse_error"] = np.array("no error")
      except ValueError as e:
        out["sparse_error"] = np.array(str(e))
      # The recipe of docs/multi_device.md for a secret key: draw on process 0, broadcast.
      from jax.experimental import multihost_utils
      from dpgcd_jax.seeding import fresh_key
      key_data = multihost_utils.broadcast_one_to_all(jax.random.key_data(fresh_key()))
      out["key_data"] = np.asarray(key_data)
      np.savez(f"{folder}/out{pid}.npz", **out)
      jax.distributed.shutdown()
      print("ok", pid)

    try:
      main()
    except BaseException:  # exit now: the atexit shutdown would wait for the other process
      traceback.print_exc()
      sys.stderr.flush()
      os._exit(1)
""")


def _free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _tail(path, chars=4000):
  if not os.path.exists(path):
    return "(none)"
  with open(path, errors="replace") as f:
    text = f.read()
  # Skip gloo / absl info lines, keep the rest (the traceback).
  lines = [l for l in text.splitlines() if not l.startswith(("I0", "W0", "[Gloo]"))]
  return "\n".join(lines)[-chars:]


def _start_children(folder):
  """Starts the two processes on a free loopback port; returns (procs, logs, port)."""
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)  # one CPU device per process
  script = os.path.join(folder, "worker.py")
  with open(script, "w") as f:
    f.write(WORKER)
  port = _free_port()
  procs, logs = [], []
  try:
    for pid in range(2):
      # Files, not pipes (a full pipe would block a child); closed by _stop.
      out, err = (open(os.path.join(folder, f"{s}{pid}.txt"), "w") for s in ("stdout", "stderr"))  # noqa: SIM115
      logs.append((out, err))
      procs.append(subprocess.Popen([sys.executable, script, str(pid), str(port), folder],
                                    stdout=out, stderr=err, env=env))
  except BaseException:
    _stop(procs, logs)
    raise
  return procs, logs, port


def _stop(procs, logs):
  for p in procs:
    if p.poll() is None:
      p.kill()
    p.wait()
  for out, err in logs:
    out.close()
    err.close()


def _wait_children(folder, procs, logs, deadline):
  """Waits for both (until ``deadline``), kills what is left; returns (ok, report)."""
  try:
    while time.monotonic() < deadline:
      codes = [p.poll() for p in procs]
      if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
        break  # both done, or one failed: the other would wait for it in a collective
      time.sleep(0.2)
  finally:
    _stop(procs, logs)
  codes = [p.returncode for p in procs]
  report = "\n".join(
      f"--- process {pid}: exit code {codes[pid]}"
      f"{' (killed: timeout or the other failed)' if codes[pid] == -9 else ''}\n"
      f"stderr:\n{_tail(os.path.join(folder, f'stderr{pid}.txt'))}" for pid in range(2))
  return codes == [0, 0], report


@pytest.mark.slow
def test_two_processes_fit_equals_one_process(tmp_path):
  reason = _gloo_missing_reason()
  if reason:
    pytest.skip(reason)
  cases = _cases()
  rng = np.random.default_rng(0)
  X = rng.normal(size=(N, P))
  y_squared = X[:, :3].sum(axis=1) + rng.normal(size=N)
  y_logistic = np.where(X[:, :3] @ np.array([1.0, -1.0, 0.5]) + rng.logistic(size=N) > 0, 1.0, -1.0)
  spec = repr([(name, loss, make_kw, fit_kw, np.dtype(dtype).name)
               for name, loss, make_kw, fit_kw, dtype, _ in cases])
  for pid, half in enumerate((slice(0, N // 2), slice(N // 2, N))):
    np.savez(tmp_path / f"part{pid}.npz", X=X[half], y_squared=y_squared[half],
             y_logistic=y_logistic[half], cases=np.array(spec), fit=np.array(repr(FIT)),
             classifier=np.array(repr(CLASSIFIER)))

  start = time.monotonic()
  folder = str(tmp_path)
  procs, logs, port = _start_children(folder)
  try:  # the single-process fits while the children run
    singles, streamed_singles = {}, {}
    for name, loss, make_kw, fit_kw, dtype, _ in cases:
      y = y_logistic if loss == "logistic" else y_squared
      problem = dg.make_problem(X.astype(dtype), y.astype(dtype), loss, **make_kw)
      singles[name] = dg.dp_gcd.fit(problem, jax.random.key(0), **fit_kw, **FIT)
      if "feature_bound" in make_kw:  # all rows in one chunk, in one process
        streamed_singles[name] = dg.streamed.fit([(X.astype(dtype), y.astype(dtype))], jax.random.key(0),
                                                 num_examples=N, loss=loss, **make_kw, **fit_kw, **FIT)
    classifier = dg.DPGCDClassifier(**CLASSIFIER).fit_chunks([(X, y_logistic)], num_examples=N)
    balanced = dg.DPGCDClassifier(**CLASSIFIER, class_weight="balanced").fit_chunks([(X, y_logistic)], num_examples=N)
  except BaseException:
    _stop(procs, logs)
    raise
  ok, report = _wait_children(folder, procs, logs, start + TIMEOUT_S)
  if not ok and "address already in use" in report.lower():  # the free port was taken meanwhile
    procs, logs, port = _start_children(folder)
    ok, report = _wait_children(folder, procs, logs, time.monotonic() + TIMEOUT_S)
  elapsed = time.monotonic() - start
  assert ok, f"two-process run failed (coordinator 127.0.0.1:{port}, {elapsed:.0f} s):\n{report}"

  outs = [dict(np.load(tmp_path / f"out{pid}.npz")) for pid in range(2)]
  for name, *_, (rtol, atol) in cases:
    single = singles[name]
    for pid, out in enumerate(outs):
      where = f"{name}, process {pid}"
      np.testing.assert_array_equal(out[name + "/coordinates"], np.asarray(single.trace.coordinates),
                                    err_msg=where)
      np.testing.assert_allclose(out[name + "/w"], np.asarray(single.w), rtol=rtol, atol=atol,
                                 err_msg=where)
      assert np.count_nonzero(out[name + "/w"]) > 0, where  # a fit that moved
      if name + "/streamed_w" in out:  # each process streamed its own rows: the one-process streamed model,
        one = streamed_singles[name]   # bit for bit (exact totals added across the processes)
        np.testing.assert_array_equal(out[name + "/streamed_w"], np.asarray(one.w), err_msg=where)
        np.testing.assert_array_equal(out[name + "/streamed_coordinates"], np.asarray(single.trace.coordinates),
                                      err_msg=where)
        np.testing.assert_allclose(out[name + "/streamed_w"], np.asarray(single.w), rtol=rtol, atol=atol,
                                   err_msg=where)
        assert float(out[name + "/streamed_epsilon"]) == single.privacy.epsilon, where
  np.testing.assert_array_equal(outs[0]["key_data"], outs[1]["key_data"])  # one key everywhere
  assert any(e.label == "typical feature size" for e in classifier.privacy_.entries)  # the counts' pass ran
  for pid, out in enumerate(outs):  # fit_chunks on each process's rows: the one-process model, bit for bit
    np.testing.assert_array_equal(out["classifier/coef"], classifier.coef_, err_msg=f"process {pid}")
    np.testing.assert_array_equal(out["classifier/intercept"], classifier.intercept_, err_msg=f"process {pid}")
    assert (float(out["classifier/epsilon"]), float(out["classifier/clip"])) == \
        (classifier.privacy_.epsilon, classifier.clip_), pid
    np.testing.assert_array_equal(out["balanced/counts"], balanced.class_counts_, err_msg=f"process {pid}")
    np.testing.assert_array_equal(out["balanced/coef"], balanced.coef_, err_msg=f"process {pid}")
    message = str(out["mismatch_error"])
    assert "passes" in message and "every process" in message, message
  for out in outs:
    message = str(out["sparse_error"])
    assert "X" in message and "several processes" in message and "not sharded" in message, message

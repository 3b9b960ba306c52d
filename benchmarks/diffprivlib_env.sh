#!/usr/bin/env bash
# Creates benchmarks/.venv-dpl: diffprivlib with a scikit-learn it supports.
#
# diffprivlib (0.6.6, the latest release) does not import with scikit-learn >= 1.8, and the
# project's venv has 1.9, so bench_estimators.py runs its column in this separate venv through
# benchmarks/_diffprivlib_worker.py, on the same saved splits. Idempotent: re-running upgrades
# nothing that is already pinned.
#
# Usage: bash benchmarks/diffprivlib_env.sh            (PYTHON=python3.11 to choose the interpreter)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-dpl"
python="${PYTHON:-python3}"
if [[ ! -x "$venv/bin/python" ]]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet \
  "diffprivlib==0.6.6" "scikit-learn>=1.4,<1.8" "numpy>=2.0,<2.4" "scipy>=1.13" setuptools
"$venv/bin/python" - <<'PY'
import sys, diffprivlib, sklearn, numpy, scipy
print(f"benchmarks/.venv-dpl: python {sys.version.split()[0]}, diffprivlib {diffprivlib.__version__}, "
      f"scikit-learn {sklearn.__version__}, numpy {numpy.__version__}, scipy {scipy.__version__}")
PY

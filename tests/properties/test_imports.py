"""`dpgcd_jax._lazy`: lazy imports: ``import dpgcd_jax`` loads none of the heavy optional dependencies.

Each check runs in a fresh interpreter (``sys.modules`` of the test process is already full).
"""

import json
import subprocess
import sys
import textwrap

import pytest

import dpgcd_jax as dg
from dpgcd_jax import _validate

HEAVY = ("dp_accounting", "scipy.sparse", "sklearn", "matplotlib", "pooch", "tqdm", "pandas")


def _loaded_after(statement):
  script = textwrap.dedent(f"""
      import json, sys
      {statement}
      print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
  """)
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_dpgcd_jax_loads_no_heavy_dependency():
  assert _loaded_after("import dpgcd_jax") == []


def test_the_private_feature_bound_loads_no_heavy_dependency():
  assert _loaded_after("from dpgcd_jax.privacy import bounds; import dpgcd_jax.solvers") == []


def test_the_data_package_imports_its_optional_download_dependencies_only_when_used():
  probe = ("import json, sys; import dpgcd_jax.data; dpgcd_jax.data.get('diabetes'); "
           "print(json.dumps([m for m in ('pooch', 'arff', 'tqdm') if m in sys.modules]))")
  out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
  assert json.loads(out.stdout.strip().splitlines()[-1]) == []
  with pytest.raises(ImportError, match=r"pip install 'dpgcd_jax\[data\]'"):
    _validate.optional_module("no_such_module_of_dpgcd_jax", "downloads", "data")


@pytest.mark.parametrize("package", ["dpgcd_jax", "dpgcd_jax.privacy", "dpgcd_jax.solvers"])
def test_every_lazy_export_resolves(package):
  module = __import__(package, fromlist=["_EXPORTS"])
  for name in module.__all__:
    value = getattr(module, name)
    assert value is getattr(module, name) and name in dir(module)
  with pytest.raises(AttributeError, match="no_such_name"):
    _ = module.no_such_name


def test_lazy_exports_are_the_defining_modules_objects():
  from dpgcd_jax import problem  # pylint: disable=g-import-not-at-top
  from dpgcd_jax.privacy import ledger  # pylint: disable=g-import-not-at-top
  from dpgcd_jax.solvers import base  # pylint: disable=g-import-not-at-top
  from dpgcd_jax.solvers import dp_gcd  # pylint: disable=g-import-not-at-top
  assert dg.make_problem is problem.make_problem and dg.dp_gcd is dp_gcd and dg.Result is base.Result
  assert dg.privacy.Ledger is ledger.Ledger and dg.privacy.ledger is ledger
  assert dg.solvers.base is base  # a submodule not in the exports is reachable too


def _package_import_graph():
  """module -> the package modules it imports (function-level imports included; imports under
  ``if TYPE_CHECKING:`` are skipped: they never run)."""
  import ast  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  root = pathlib.Path(__file__).resolve().parents[2] / "dpgcd_jax"
  modules = {}
  for path in root.rglob("*.py"):
    parts = path.relative_to(root.parent).with_suffix("").parts
    modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  graph = {}
  for name, path in modules.items():
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
    targets = set()
    for node in ast.walk(tree):
      if id(node) in skipped:
        continue
      if isinstance(node, ast.Import):
        targets.update(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
        targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names)
    graph[name] = {t for t in targets if t in modules and t != name}
  return graph


def test_the_package_has_no_import_circle():
  """No module imports, directly or through others, a module that imports it back."""
  graph = _package_import_graph()
  assert len(graph) > 40  # the parser found the package

  def reaches(start, goal, seen):
    return any(nxt == goal or reaches(nxt, goal, seen | {nxt}) for nxt in graph[start] - seen)

  circles = sorted(m for m in graph if reaches(m, m, set()))
  assert circles == [], circles


def _private_imports():
  """(importer, imported) pairs that reach into another module's private names: ``from m import
  _name`` or ``m._name`` (a private name of module ``m``), or a private module ``a._m`` imported
  from outside ``a``."""
  import ast  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  root = pathlib.Path(__file__).resolve().parents[2] / "dpgcd_jax"
  modules = {}
  for path in root.rglob("*.py"):
    parts = path.relative_to(root.parent).with_suffix("").parts
    modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  bad = []
  for name, path in modules.items():
    tree = ast.parse(path.read_text())
    aliases = {}  # local name -> package module
    for node in ast.walk(tree):
      for alias in getattr(node, "names", []) if isinstance(node, (ast.Import, ast.ImportFrom)) else []:
        target = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
        if target in modules and (alias.asname or isinstance(node, ast.ImportFrom)):
          aliases[alias.asname or alias.name] = target
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
          and node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != name):
        bad.append((name, f"{aliases[node.value.id]}.{node.attr}"))
      if isinstance(node, ast.ImportFrom) and not node.level:
        for alias in node.names:
          target = f"{node.module}.{alias.name}"
          if target in modules:  # a module: private ones only from inside their package
            if alias.name.startswith("_") and not (name == node.module or name.startswith(node.module + ".")):
              bad.append((name, target))
          elif alias.name.startswith("_") and node.module != "__future__":
            bad.append((name, target))
      elif isinstance(node, ast.Import):
        for alias in node.names:
          head, _, last = alias.name.rpartition(".")
          if last.startswith("_") and alias.name in modules and not (name == head or name.startswith(head + ".")):
            bad.append((name, alias.name))
  return bad


def test_no_module_imports_another_modules_private_names():
  """Private names stay in their module, private modules in their package."""
  assert _private_imports() == []


HOST_ACCOUNTING = ("accounting", "baseline_accounting", "calibration", "costs", "events", "ledger", "tuning",
                   "_rdp", "_pld", "_br", "_routes", "_fft_pld", "_laplace", "_adapters")


@pytest.mark.parametrize("name", HOST_ACCOUNTING)
def test_host_accounting_never_imports_device_code(name):
  """The floors hold: accounting reads the mechanisms' costs (privacy.costs), never the
  samplers: no solver, no mechanism, no problem or clipping code, directly or through another module,
  and no JAX import in the accounting modules themselves (``_validate``, the shared argument checks,
  also checks JAX keys)."""
  import ast  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  graph = _package_import_graph()
  start = f"dpgcd_jax.privacy.{name}"
  reached, todo = set(), [start]
  while todo:
    for nxt in graph[todo.pop()] - reached:
      reached.add(nxt)
      todo.append(nxt)
  assert not {m for m in reached if not m.startswith("dpgcd_jax.privacy")} - {"dpgcd_jax._validate"}, reached
  root = pathlib.Path(__file__).resolve().parents[2]
  for module in (reached | {start}) - {"dpgcd_jax._validate"}:
    path = root / (module.replace(".", "/") + ".py")
    path = path if path.exists() else root / module.replace(".", "/") / "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      assert not any(n == "jax" or n.startswith("jax.") for n in names), (module, names)

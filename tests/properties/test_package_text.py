"""`dpgcd_jax` (the whole package): its text stands on its own: no references to the tracker's issues or to sections of
the design notes, which a reader of the installed package does not have; and no module grows past one reader's sitting
(`MAX_LINES`: split it along a seam instead). Each test file names the module it covers on its docstring's first line,
and cites no issue either. `make lint` runs this file."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2] / "dpgcd_jax"
MAX_LINES = 400
PATTERN = re.compile(r"\b[Ii]ssue [0-9]+|\bDESIGN(\.md)?\b|\bsection [0-9]+ of the design")


def test_the_package_cites_no_issue_number_nor_design_section():
  found = [f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}"
           for path in sorted(ROOT.rglob("*.py"))
           for number, line in enumerate(path.read_text().splitlines(), 1) if PATTERN.search(line)]
  assert not found, "\n".join(found)
  assert PATTERN.search(f"see issue {21}") and PATTERN.search("(DESIGN section 4)")


def test_every_module_stays_within_max_lines():
  sizes = {str(path.relative_to(ROOT.parent)): len(path.read_text().splitlines())
           for path in sorted(ROOT.rglob("*.py"))}
  over = {name: size for name, size in sizes.items() if size > MAX_LINES}
  assert not over, f"modules over {MAX_LINES} lines: {over}"
  assert len(sizes) > 50 and max(sizes.values()) > MAX_LINES // 2  # the walk found the package


TESTS = ROOT.parent / "tests"
# A tracker issue cited by its number, in the singular or plural, with or without "#", or as "(#N)".
ISSUE = re.compile(r"\b[Ii]ssues? #?[0-9]+|\(#[0-9]+\)")
# A backquoted module name: `dpgcd_jax.solvers.dp_fw`, `dpgcd_jax.estimators.DPGCDClassifier` (a trailing attribute),
# or `dpgcd_jax` alone for a test of the whole package (its text, its documentation).
COVERED = re.compile(r"`(dpgcd_jax(?:\.[A-Za-z_][A-Za-z0-9_]*)*)`")


def _module_exists(name: str) -> bool:
  """`name` is the package, or it or (dropping trailing attributes) one of its prefixes below `dpgcd_jax` is a module
  of the package: `dpgcd_jax/a/b.py` or `dpgcd_jax/a/b/__init__.py`, whose text names the first attribute dropped (so
  that a misspelt module is not taken for an attribute of its package)."""
  parts = name.split(".")
  if parts == ["dpgcd_jax"]:
    return True
  for end in range(len(parts), 1, -1):
    path = ROOT.parent.joinpath(*parts[:end])
    for module in (path.with_suffix(".py"), path / "__init__.py"):
      if module.is_file():
        return end == len(parts) or re.search(rf"\b{parts[end]}\b", module.read_text()) is not None
  return False


def test_every_test_file_names_the_module_it_covers_and_cites_no_issue():
  offenders = []
  for path in sorted(TESTS.rglob("test_*.py")):
    name, text = path.relative_to(ROOT.parent), path.read_text()
    first = (ast.get_docstring(ast.parse(text)) or "").split("\n", 1)[0]
    covered = COVERED.findall(first)
    if not covered:
      offenders.append(f"{name}: the docstring's first line names no `dpgcd_jax.<module>`: {first!r}")
    offenders += [f"{name}: `{module}` is no module of the package" for module in covered if not _module_exists(module)]
    offenders += [f"{name}:{number}: cites an issue: {line.strip()}"
                  for number, line in enumerate(text.splitlines(), 1) if ISSUE.search(line)]
  assert not offenders, f"{len(offenders)} offenders:\n" + "\n".join(offenders)
  assert len(list(TESTS.rglob("test_*.py"))) > 50  # the walk found the suite
  # The rule's own checks (the numbers in braces, so that this file's text cites none).
  assert all(ISSUE.search(s) for s in (f"issue {21}", f"Issues {19} and 20", f"issue #{7}", f"(#{29})"))
  assert not any(ISSUE.search(s) for s in ("the issue's protocol", "tissue 12", "# 3 seeds", "#1f77b4"))
  assert _module_exists("dpgcd_jax.estimators.DPGCDClassifier") and _module_exists("dpgcd_jax.solvers.dp_fw")
  assert not _module_exists("dpgcd_jax.make_problem") and not _module_exists("dpgcd_jax.solver.dp_fw")
  assert _module_exists("dpgcd_jax.mechanisms.SELECTIONS") and not _module_exists("dpgcd_jax.solvers.dpfw")
  found = COVERED.findall("`dpgcd_jax` and `dpgcd_jax.data._cache`, not dpgcd_jax.sparse")
  assert found == ["dpgcd_jax", "dpgcd_jax.data._cache"]

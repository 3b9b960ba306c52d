"""The package's text stands on its own: no references to the tracker's issues or to sections
of the design notes, which a reader of the installed package does not have; and no module grows
past one reader's sitting (`MAX_LINES`: split it along a seam instead). `make lint` runs this file."""

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
  assert PATTERN.search("see issue 21") and PATTERN.search("(DESIGN section 4)")


def test_every_module_stays_within_max_lines():
  sizes = {str(path.relative_to(ROOT.parent)): len(path.read_text().splitlines())
           for path in sorted(ROOT.rglob("*.py"))}
  over = {name: size for name, size in sizes.items() if size > MAX_LINES}
  assert not over, f"modules over {MAX_LINES} lines: {over}"
  assert len(sizes) > 50 and max(sizes.values()) > MAX_LINES // 2  # the walk found the package

"""The package's text stands on its own: no references to the tracker's issues or to sections
of the design notes, which a reader of the installed package does not have."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2] / "dpgcd_jax"
PATTERN = re.compile(r"\b[Ii]ssue [0-9]+|\bDESIGN(\.md)?\b|\bsection [0-9]+ of the design")


def test_the_package_cites_no_issue_number_nor_design_section():
  found = [f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}"
           for path in sorted(ROOT.rglob("*.py"))
           for number, line in enumerate(path.read_text().splitlines(), 1) if PATTERN.search(line)]
  assert not found, "\n".join(found)
  assert PATTERN.search("see issue 21") and PATTERN.search("(DESIGN section 4)")

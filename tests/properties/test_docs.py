"""`dpgcd_jax` (its public API, as documented): the documentation runs as written: README.md and docs/**/*.md, and the
MkDocs site builds.

Conventions (also in docs/contributing.md, "Documentation"):

* Every fenced ```python block is executed standalone: on its own, in a fresh namespace
  (a new dict per block), in ONE fresh interpreter that runs every block in turn (so the
  blocks share JAX's compilation cache, but not a variable; and not this test session's
  ``tests/conftest.py`` settings: they run with the defaults a user gets, float32).
* A block that must not run is preceded by a visible marker line
  ``<!-- skip-test: the reason -->``; it is reported as a skipped test with that reason.
* Stated outputs are checked, with doctest's rules (``...`` matches anything, whitespace is
  normalized):
  - a statement whose last line ends with ``# -> expected``: what it prints, followed by
    its value when it is an expression whose value is not None, must match ``expected``;
  - a ```text block right after a ```python block (only blank lines between): the block's
    whole standard output must match it.
* A block must not emit a :class:`dpgcd_jax.PrivacyLeakWarning` unless its text says
  ``PrivacyLeakWarning`` (an example that silently leaks is a bug), nor a DeprecationWarning
  raised at its own lines (examples use the current API).
* The README starts with the two commands of the project, verbatim; the README quick start
  learns (non-zeros > 0, objective decrease >= 20%); relative links resolve.
* ``mkdocs build --strict`` passes (into a temporary folder, once for the module), and the site
  works offline and reads right: no page loads a remote script, stylesheet or font; every
  formula is MathML (rendered at build time by ``docs_hooks/mathml.py``), no raw TeX left; the
  API pages' signatures and defaults name no private module (``_linear.AUTO``).
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOC_FILES = [README] + sorted((ROOT / "docs").rglob("*.md"))
SKIP_MARKER = re.compile(r"^<!--\s*skip-test(?::\s*(?P<reason>.*?))?\s*-->\s*$")
FIRST_BLOCK = (
    "make reproduce   # the paper's experiment on offline data -> results/figure.png, results/table.md\n"
    "make test        # the test suite (its slow statistical tier: make test-slow)\n"
)
RUN_TIMEOUT_S = 480


@dataclasses.dataclass(frozen=True)
class Block:
  path: str  # relative to the repository root
  line: int  # line of the opening fence (1-based)
  source: str
  expected: str | None  # the ```text block right after, if any
  skip: str | None  # the skip marker's reason, if any

  @property
  def id(self) -> str:
    return f"{self.path}:{self.line}"


def fenced_blocks(text: str) -> list[tuple[int, str, str]]:
  """``(line of the opening fence, language, body)`` of every fenced block (``` fences)."""
  blocks, lines, i = [], text.splitlines(), 0
  while i < len(lines):
    m = re.match(r"^(\s*)```\s*([\w+-]*)", lines[i])
    if not m:
      i += 1
      continue
    indent, lang, start = len(m.group(1)), m.group(2), i
    body = []
    i += 1
    while i < len(lines) and not lines[i].strip().startswith("```"):
      body.append(lines[i][indent:] if not lines[i][:indent].strip() else lines[i].lstrip())
      i += 1
    blocks.append((start + 1, lang, "\n".join(body) + "\n"))
    i += 1
  return blocks


def python_blocks(path: pathlib.Path, text: str | None = None) -> list[Block]:
  text = path.read_text() if text is None else text
  lines = text.splitlines()
  fenced = fenced_blocks(text)
  out = []
  for k, (line, lang, body) in enumerate(fenced):
    if lang != "python":
      continue
    previous = next((lines[j] for j in range(line - 2, -1, -1) if lines[j].strip()), "")
    marker = SKIP_MARKER.match(previous.strip())
    expected = None
    if k + 1 < len(fenced) and fenced[k + 1][1] == "text":
      next_line = fenced[k + 1][0]
      closing = line + body.count("\n")  # 0-based index of this block's closing fence
      if all(not lines[j].strip() for j in range(closing + 1, next_line - 1)):
        expected = fenced[k + 1][2]
    name = str(path.relative_to(ROOT)) if path.is_absolute() else str(path)
    out.append(Block(name, line, body, expected,
                     (marker.group("reason") or "no reason given") if marker else None))
  return out


BLOCKS = [b for path in DOC_FILES for b in python_blocks(path)]
RUNNABLE = [b for b in BLOCKS if b.skip is None]

# Executed in a fresh interpreter: reads the blocks as JSON, runs each in a fresh dict, one
# statement at a time (to attribute output to `# ->` checks), writes the results as JSON.
RUNNER = textwrap.dedent(r'''
    import ast, contextlib, io, json, sys, time, tokenize, traceback, warnings

    def comments(source):
      found = {}
      for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.string.startswith("# ->"):
          found[tok.start[0]] = tok.string[len("# ->"):].strip()
      return found

    def run(block):
      source, name = block["source"], block["id"]
      namespace = {"__name__": "__main__"}
      out, checks, t0, c0 = io.StringIO(), [], time.perf_counter(), time.process_time()
      error = None
      with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
          tree = ast.parse(source, filename=name)
          expected = comments(source)
          spans = [(stmt.lineno, stmt.end_lineno) for stmt in tree.body]
          for ln in expected:
            if not any(a <= ln <= b for a, b in spans):
              raise ValueError(f"line {ln}: '# ->' is not on a statement, so nothing checks it")
          for stmt in tree.body:
            mine = [ln for ln in expected if stmt.lineno <= ln <= stmt.end_lineno]
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
              if isinstance(stmt, ast.Expr):
                value = eval(compile(ast.Expression(stmt.value), name, "eval"), namespace)
                if mine and value is not None:
                  print(value)
              else:
                exec(compile(ast.Module([stmt], []), name, "exec"), namespace)
            out.write(buf.getvalue())
            for ln in mine:
              checks.append({"line": ln, "expected": expected[ln], "got": buf.getvalue()})
        except BaseException:
          error = traceback.format_exc()
      leaks = [f"{w.category.__name__}: {w.message}" for w in caught
               if w.category.__name__ == "PrivacyLeakWarning"]
      deprecated = [f"{w.category.__name__} at line {w.lineno}: {w.message}" for w in caught
                    if issubclass(w.category, DeprecationWarning) and w.filename == name]
      return {"id": name, "stdout": out.getvalue(), "checks": checks, "error": error,
              "leaks": leaks, "deprecated": deprecated, "seconds": time.perf_counter() - t0,
              "cpu_seconds": time.process_time() - c0}

    blocks = json.load(open(sys.argv[1]))
    results = [run(b) for b in blocks]
    json.dump(results, open(sys.argv[2], "w"))
''')


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
  """Runs every runnable block in one fresh interpreter; results by block id."""
  folder = tmp_path_factory.mktemp("doc_blocks")
  blocks_json, results_json = folder / "blocks.json", folder / "results.json"
  blocks_json.write_text(json.dumps([{"id": b.id, "source": b.source} for b in RUNNABLE]))
  env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
  proc = subprocess.run([sys.executable, "-c", RUNNER, str(blocks_json), str(results_json)],
                        cwd=folder, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
  assert proc.returncode == 0, proc.stderr[-4000:]
  results = {r["id"]: r for r in json.loads(results_json.read_text())}
  print("doc blocks, seconds each (wall, cpu):",
        {k: (round(r["seconds"], 1), round(r["cpu_seconds"], 1)) for k, r in results.items()})
  return results


def _matches(expected: str, got: str) -> bool:
  import doctest  # pylint: disable=g-import-not-at-top
  checker = doctest.OutputChecker()
  flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
  return checker.check_output(expected.strip() + "\n", got.strip() + "\n", flags)


def test_block_extraction_follows_the_conventions():
  text = "\n".join([
      "# Page", "", "```python", "print(1)  # -> 1", "```", "", "```text", "1", "```", "",
      "<!-- skip-test: needs a GPU -->", "```python", "import missing_module", "```", "",
      "```python", "    x = 2", "```", "", "Prose.", "", "```text", "not output", "```", "",
      "```bash", "make test", "```", ""])
  first, skipped, third = python_blocks(pathlib.Path("page.md"), text)
  assert (first.line, first.source, first.expected, first.skip) == (3, "print(1)  # -> 1\n", "1\n", None)
  assert skipped.skip == "needs a GPU" and skipped.expected is None
  assert third.expected is None  # prose between: not its output
  assert [lang for _, lang, _ in fenced_blocks(text)] == ["python", "text", "python", "python", "text", "bash"]
  assert _matches("x = ... (route: ...)", "x = 0.99   (route: pld)\n")
  assert not _matches("True", "False\n")


def test_blocks_found():
  assert len(BLOCKS) >= 10, [b.id for b in BLOCKS]
  skipped = [b for b in BLOCKS if b.skip is not None]
  assert len(skipped) <= max(2, len(BLOCKS) // 5), [b.id for b in skipped]  # keep them rare


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block_runs_as_written(block, executed):
  if block.skip is not None:
    pytest.skip(f"marked skip-test in the docs: {block.skip}")
  result = executed[block.id]
  assert result["error"] is None, f"{block.id} fails:\n{result['error']}"
  for check in result["checks"]:
    assert _matches(check["expected"], check["got"]), (
        f"{block.id}, block line {check['line']}: stated '# -> {check['expected']}', "
        f"got {check['got']!r}")
  if block.expected is not None:
    assert _matches(block.expected, result["stdout"]), (
        f"{block.id}: the stated output (the ```text block after it) differs:\n--- stated\n"
        f"{block.expected}--- got\n{result['stdout']}")
  if "PrivacyLeakWarning" not in block.source:
    assert not result["leaks"], f"{block.id} leaks without saying so: {result['leaks']}"
  assert not result["deprecated"], f"{block.id} uses a deprecated API: {result['deprecated']}"


def test_readme_starts_with_the_two_commands():
  fenced = fenced_blocks(README.read_text())
  assert fenced, "README.md has no code block"
  line, lang, body = fenced[0]
  assert lang == "bash" and body == FIRST_BLOCK, body


@pytest.mark.slow
def test_readme_quick_start_learns(executed):
  """The quick start is the README's first Python block: it selects features and the
  (non-private, diagnostic) objective decreases: a model equal to w = 0 is a bug."""
  first = next(b for b in BLOCKS if b.path == "README.md")
  stdout = executed[first.id]["stdout"]
  nnz = re.search(r"non-zeros:\s*(\d+)", stdout)
  decrease = re.search(r"objective decrease[^:]*:\s*(-?[\d.]+)%", stdout)
  assert nnz and decrease, stdout
  assert int(nnz.group(1)) > 0, stdout
  assert float(decrease.group(1)) >= 20.0, stdout


def test_relative_links_resolve():
  for path in DOC_FILES:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
      if re.match(r"^[a-z]+:", target):
        continue
      assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links to a missing {target}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
  """The MkDocs site, built once for the tests below. Without ``--quiet``: MkDocs counts the
  warnings that ``--strict`` turns into a failure only as they are logged, and ``--quiet`` drops
  them (a broken cross-reference then passed)."""
  out = tmp_path_factory.mktemp("mkdocs") / "site"
  env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
  proc = subprocess.run(
      [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
  return out


def _pages(site: pathlib.Path) -> dict[str, str]:
  return {str(path.relative_to(site)): path.read_text() for path in sorted(site.rglob("*.html"))}


@pytest.mark.slow
def test_mkdocs_build_strict(site):
  assert (site / "index.html").exists()
  assert (site / "api" / "privacy" / "index.html").exists()


REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)  # http://, https://, //host


def test_the_site_loads_nothing_remote(site):
  """Offline: no script, stylesheet, font, image or frame from another host (MathJax from a CDN
  and Material's Google Fonts did)."""
  found = []
  for name, page in _pages(site).items():
    for tag in re.finditer(r"<(script|link|img|iframe|source|embed)\b[^>]*>", page, re.IGNORECASE):
      if re.search(r"""\brel\s*=\s*["']?canonical""", tag.group(0), re.IGNORECASE):
        continue  # names the page's address, loads nothing
      for url in re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)""", tag.group(0), re.IGNORECASE):
        if REMOTE.match(url):
          found.append(f"{name}: {tag.group(0)}")
  assert not found, "\n".join(found[:20])


def _prose(page: str) -> str:
  """The page without its code (``<pre>``, ``<code>``), scripts and MathML."""
  return re.sub(r"<(pre|code|script|math)\b.*?</\1>", "", page, flags=re.DOTALL | re.IGNORECASE)


def test_every_formula_is_mathml(site):
  pages = _pages(site)
  code = re.compile(r"^\s*```.*?^\s*```|`[^`\n]*`", re.DOTALL | re.MULTILINE)  # TeX shown as code is not a formula
  with_tex = [path for path in DOC_FILES[1:] if re.search(r"\$\$|\\\(|\\\[", code.sub("", path.read_text()))]
  assert with_tex, "no page has a formula: the check below checks nothing"
  for path in with_tex:  # the Markdown pages with a formula, and the API pages (docstrings)
    name = str(path.relative_to(ROOT / "docs").with_suffix("")) + "/index.html"
    assert "<math" in pages[name.removeprefix("index/")], name
  assert "<math" in pages["api/solvers/index.html"]
  for name, page in pages.items():
    assert not re.search(r'class="arithmatex">(?!<math)', page), f"{name}: a formula left as TeX"
    raw = re.search(r".{0,60}(?:\\\(|\\\[|\$\$).{0,60}", _prose(page))
    assert raw is None, f"{name}: raw TeX in the page: {raw.group(0)!r}"


PRIVATE_NAME = re.compile(r"dpgcd_jax\.(?:[a-z_]+\.)*_[a-z]|(?<![\w.])_[a-z]\w*\.")  # _linear.AUTO


def test_api_signatures_name_no_private_module(site):
  """Signatures and the Default column read as the code is used: `scaling='auto'`, not
  `scaling=_linear.AUTO` (docs_hooks/griffe_api.py)."""
  found, signatures = [], 0
  for name, page in _pages(site).items():
    if not name.startswith("api/"):
      continue
    headings = re.findall(r'<h\d id="[^"]*" class="doc doc-heading">(.*?)</h\d>', page, re.DOTALL)
    defaults = [row[-1] for table in re.findall(r"<table>.*?</table>", page, re.DOTALL)
                if "<th>Default</th>" in table
                for row in [re.findall(r"<td>(.*?)</td>", r, re.DOTALL)
                            for r in re.findall(r"<tr\b.*?</tr>", table, re.DOTALL)] if row]
    for text in headings + defaults:
      text = html.unescape(re.sub(r"<[^>]+>", "", text))
      signatures += "(" in text
      text = " ".join(text.split())
      match = PRIVATE_NAME.search(text)
      if match:
        found.append(f"{name}: ...{text[max(0, match.start() - 80):match.end() + 40]}...")
  assert signatures > 50, signatures  # the headings were found
  assert not found, "\n".join(found)


def test_api_parameter_tables_have_one_parameter_a_row(site):
  """A docstring entry for several parameters (`selection, update, rule: see run.`) is one row
  per parameter, each with its default (not one row with "required": docs_hooks/griffe_api.py)."""
  found = []
  for name, page in _pages(site).items():
    for table in re.findall(r"<table>.*?</table>", page, re.DOTALL):
      if "<th>Default</th>" not in table:
        continue
      for row in re.findall(r"<tr\b.*?</tr>", table, re.DOTALL):
        cells = re.findall(r"<td>(.*?)</td>", row, re.DOTALL)
        if cells and not re.fullmatch(r"\*{0,2}\w+", html.unescape(re.sub(r"<[^>]+>", "", cells[0])).strip()):
          found.append(f"{name}: {' '.join(re.sub(r'<[^>]+>', ' ', cells[0]).split())}")
  assert not found, "\n".join(found)

"""MkDocs hook: the site's math rendered to MathML at build time, with no script.

``pymdownx.arithmatex`` (``generic: true``) leaves each formula of the Markdown pages and of the
docstrings as its TeX source, ``<span class="arithmatex">\\(...\\)</span>`` inline and
``<div class="arithmatex">\\[...\\]</div>`` on its own line. This hook replaces every one by the
MathML of ``latex2mathml`` (``display="block"`` for the display ones), which browsers render
natively: the site loads no math script and works offline.

Strict: a formula that ``latex2mathml`` cannot convert fails the build with the page and the
formula, rather than showing TeX or a half-converted formula. Counted as a failure: an exception,
unbalanced braces, or a TeX command left in the output (latex2mathml passes an unknown command
through as text). The few standard commands it lacks are rewritten first (``_REWRITES``).
"""

from __future__ import annotations

import html
import re
from typing import Any

from latex2mathml import commands
from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

# What arithmatex emits (generic mode): the delimiters inside the element, the TeX HTML-escaped.
_MATH = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">(?P<tex>.*?)</(?P=tag)>', re.DOTALL)
_DELIMITERS = {"span": (r"\(", r"\)"), "div": (r"\[", r"\]")}

# Standard LaTeX that latex2mathml does not know, rewritten to what it does (meaning unchanged).
_REWRITES = (
    # `aligned` (amsmath, inside display math) is the same alignment as `align*`.
    (re.compile(r"\\(begin|end)\{aligned\}"), r"\\\1{align*}"),
    # `\arg` is an operator name, like `\max` (which latex2mathml has).
    (re.compile(r"\\arg(?![A-Za-z])"), r"\\operatorname{arg}"),
)

# A TeX command left as text in the MathML (`<mi>\foo</mi>`), or a bare `&` (an alignment
# outside an environment that has columns): latex2mathml did not understand the formula.
_LEFTOVER = re.compile(r">[^<]*(\\[A-Za-z]+|&(?!#?\w+;))[^<]*<")
# The environments latex2mathml lays out (it drops the name of any other, silently).
_ENVIRONMENTS = {*commands.MATRICES, commands.ALIGN, commands.ALIGNSTAR, commands.SPLIT}


def _balanced(tex: str) -> bool:
  depth = 0
  for token in re.findall(r"\\.|[{}]", tex, re.DOTALL):
    depth += {"{": 1, "}": -1}.get(token, 0)
    if depth < 0:
      return False
  return depth == 0


def to_mathml(tex: str, display: bool) -> str:
  """The MathML of ``tex`` (no delimiters); a ``ValueError`` saying why if it cannot be converted."""
  for pattern, replacement in _REWRITES:
    tex = pattern.sub(replacement, tex)
  if not _balanced(tex):
    raise ValueError("unbalanced braces")
  for name in re.findall(r"\\begin\{([^}]*)\}", tex):
    if f"\\{name}" not in _ENVIRONMENTS:
      raise ValueError(f"unknown environment {name}")
  try:
    mathml = convert(tex.strip(), display="block" if display else "inline")
  except Exception as error:  # latex2mathml's own exceptions, and errors on malformed input
    raise ValueError(f"{type(error).__name__}: {error}") from error
  leftover = _LEFTOVER.search(mathml)
  if leftover:
    raise ValueError(f"not converted: {leftover.group(1)}")
  return mathml


def _replace(match: re.Match[str], page: str) -> str:
  tag, source = match.group("tag"), html.unescape(match.group("tex")).strip()
  opening, closing = _DELIMITERS[tag]
  tex = source
  if tex.startswith(opening) and tex.endswith(closing):
    tex = tex[len(opening):-len(closing)]
  try:
    mathml = to_mathml(tex, display=tag == "div")
  except ValueError as error:
    formula = " ".join(source.split())
    raise PluginError(f"docs_hooks/mathml.py: {page}: cannot convert the formula << {formula} >> "
                      f"to MathML ({error})") from error
  return f'<{tag} class="arithmatex">{mathml}</{tag}>'  # Material's style for the class: centred, scrolls


def on_page_content(html_text: str, page: Any, **kwargs: Any) -> str:
  """MkDocs event: the page's HTML with its formulas in MathML."""
  return _MATH.sub(lambda m: _replace(m, page.file.src_uri), html_text)

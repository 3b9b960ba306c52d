"""Griffe extension (mkdocstrings' loader, mkdocs.yml): the API pages read as the code is used.

Two habits of the package's docstrings and signatures that griffe renders badly:

* A default written as a module constant whose value is a string (`scaling=AUTO`,
  `max_iter=_linear.AUTO`, with `AUTO = "auto"`): griffe shows the source expression, a name a
  user cannot type (and a private module's). Such a default is shown as its value (`'auto'`).
  Numeric constants keep their (documented) names.
* One docstring entry for several names (`selection, update, rule: see run.`, allowed by the
  project's conventions, docs/contributing.md) and prose entries (`others: as DPGCDClassifier.`):
  griffe's Google parser reads `selection, update, rule` as one unknown parameter ("required" in
  the Default column), an attribute entry `coef_, intercept_` as the name `coef_,` of type
  `intercept_` (and carries that type over to the next entries). Here a parameters entry for
  several parameters becomes one row per parameter (its type and default from the signature,
  the description shared); an attributes entry for several names stays one row, without a type;
  an entry that names no parameter (`others`, `**options`) becomes a paragraph after the table.

Only the rendering changes: the package's source is untouched.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from typing import Any

import griffe

_MAX_HOPS = 8  # `AUTO = _released.AUTO` -> `AUTO = "auto"`: a chain of constants, followed this far


def _objects(obj: griffe.Object) -> Iterator[griffe.Object]:
  """The objects defined in `obj` (not the names it imports), recursively."""
  for member in obj.members.values():
    if isinstance(member, griffe.Alias):
      continue
    yield member
    if member.is_module or member.is_class:
      yield from _objects(member)


def _string_constant(default: Any, collection: griffe.ModulesCollection) -> str | None:
  """The source of the string literal that the expression `default` names, if it names one."""
  for _ in range(_MAX_HOPS):
    if isinstance(default, str):
      try:
        return default if isinstance(ast.literal_eval(default), str) else None
      except (ValueError, SyntaxError):
        return None
    if not isinstance(default, (griffe.ExprName, griffe.ExprAttribute)):
      return None
    try:
      target = collection[default.canonical_path]
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
      return None
    if target.is_alias:
      try:
        target = target.final_target
      except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    if not target.is_attribute:
      return None
    default = target.value
  return None


def _entry_heads(text: str, title: str) -> list[str] | None:
  """The text before the colon of each entry of the Google section `title` of `text`."""
  lines = text.splitlines()
  starts = [i for i, line in enumerate(lines) if line.strip() == f"{title}:"]
  if not starts:
    return None
  indent = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
  heads, item_indent = [], None
  for line in lines[starts[0] + 1:]:
    if not line.strip():
      continue
    depth = len(line) - len(line.lstrip())
    if depth <= indent:
      break
    if item_indent is None:
      item_indent = depth
    if depth == item_indent:
      heads.append(line.strip().split(":", 1)[0].strip())
  return heads


def _several(names: str) -> list[str]:
  """`["a", "b"]` for the entry `a, b` (a comma before any parenthesis), else `[]`."""
  head = names.split("(", 1)[0]
  return [n.strip() for n in names.split(",")] if "," in head else []


def _fix_parameters(section: Any, parameters: griffe.Parameters | None) -> list[Any]:
  """The parameters section, one row per parameter; and the text sections to follow it."""
  variadic = (griffe.ParameterKind.var_positional, griffe.ParameterKind.var_keyword)
  named = {p.name for p in parameters or () if p.kind not in variadic}  # a row each (a default or "required")
  rows, notes = [], []
  for entry in section.value:
    names = _several(entry.name) or [entry.name]
    if parameters is not None and all(name in named for name in names):
      for name in names:
        parameter = parameters[name]
        annotation = entry.annotation if len(names) == 1 else parameter.annotation
        rows.append(griffe.DocstringParameter(name, description=entry.description, annotation=annotation,
                                              value=parameter.default))
    elif parameters is not None and not any(name in named for name in names):
      # Not a parameter: a variadic (`**options`) or a prose entry (`others`): a paragraph.
      label = f"`{entry.name}`" if entry.name.startswith("*") else entry.name[:1].upper() + entry.name[1:]
      notes.append(griffe.DocstringSectionText(f"{label}: {entry.description}"))
    else:
      rows.append(entry)
  section.value = rows
  return notes


def _fix_attributes(section: Any, obj: griffe.Object) -> None:
  """Attribute entries re-read from the text: several names one row; no type carried over."""
  assert obj.docstring is not None
  heads = _entry_heads(obj.docstring.value, section.title or "Attributes")
  if heads is None or len(heads) != len(section.value):
    return  # not the layout this reads: leave griffe's reading
  for entry, head in zip(section.value, heads, strict=True):
    if _several(head):
      entry.name, entry.annotation = head, None
    elif " " not in head:  # no type written: the member's annotation, if any (never the previous entry's)
      entry.name, entry.annotation = head, None
      with contextlib.suppress(KeyError, AttributeError, TypeError, griffe.AliasResolutionError,
                               griffe.CyclicAliasError):
        entry.annotation = obj[head].annotation


class ReadableApi(griffe.Extension):
  """Applied once the package is loaded (before mkdocstrings renders anything)."""

  def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
    objects = list(_objects(pkg))
    for obj in objects:
      if isinstance(obj, griffe.Function):
        for parameter in obj.parameters:
          if isinstance(parameter.default, (griffe.ExprName, griffe.ExprAttribute)):
            literal = _string_constant(parameter.default, pkg.modules_collection)
            if literal is not None:
              parameter.default = literal
    for obj in [pkg, *objects]:
      docstring = obj.docstring
      if docstring is None or docstring.parser is None:
        continue
      parameters = obj.parameters if isinstance(obj, (griffe.Function, griffe.Class)) else None
      sections: list[Any] = []
      for section in docstring.parse():
        sections.append(section)
        if section.kind in (griffe.DocstringSectionKind.parameters, griffe.DocstringSectionKind.other_parameters):
          sections.extend(_fix_parameters(section, parameters))
        elif section.kind is griffe.DocstringSectionKind.attributes:
          _fix_attributes(section, obj)
      docstring.__dict__["parsed"] = sections  # `Docstring.parsed` is a cached property: this is its value


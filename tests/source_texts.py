"""Every text of the explorer with its id, read from the source (``ast``): the English side of
each catalogue. A text is written where it is made, as ``t(id, text)``, ``label(id, text)``,
``Message(id, text)``, ``ExplorerError(id, text)`` or ``Text(id, text)`` (or a helper's call
that passes the two on), or as an ``(id, text)`` pair in a table that one of those says. The
catalogue test checks each language against this; a translator's script can list what a
catalogue still lacks::

    python tests/source_texts.py zh     # the ids zh.json has no text for
"""
from __future__ import annotations

import ast
import re
import string
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"
ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


def fields_of(text: str) -> set[str]:
    """The names of a text's ``{fields}``."""
    return {name.split(".")[0].split("[")[0]
            for _, name, _, _ in string.Formatter().parse(text) if name}


def _pairs(tree):
    """(id, text, line) of every id written beside its text: in a call (``t``, ``label``, any
    helper that passes them on, such as ``layer_slider(name, id, text)``) or a tuple."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            args = node.args
        elif isinstance(node, (ast.Tuple, ast.List)):
            args = node.elts
        else:
            continue
        for first, second in zip(args, args[1:]):
            if (isinstance(first, ast.Constant) and isinstance(first.value, str)
                    and isinstance(second, ast.Constant) and isinstance(second.value, str)
                    and ID.match(first.value) and not ID.match(second.value)):
                # (two ids in a row are no id and its text: event names such as "x.click")
                yield first.value, second.value, node.lineno


def source_texts(package: Path = PACKAGE) -> dict[str, tuple[str, str]]:
    """id -> (English text, where it is written). Raises if one id has two texts."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(package.rglob("*.py")):
        for id, text, line in _pairs(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(package.parent)}:{line}"
            if id in found and found[id][0] != text:
                raise ValueError(f"{id} has two texts: {found[id][1]} and {where}")
            found.setdefault(id, (text, where))
    return found


if __name__ == "__main__":
    sys.path.insert(0, str(PACKAGE.parent))          # as pytest's pythonpath = .
    from explorer.app.languages import messages
    lang = sys.argv[1] if len(sys.argv) > 1 else "zh"
    have = messages(lang)
    for id, (text, where) in source_texts().items():
        if id not in have:
            print(f"{where}\t{id}\t{text}")

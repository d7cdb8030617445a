"""Read the literal content pools stored as data files under ``pools/``.

The pools are plain UTF-8 text and are read as bytes, so their content reaches the generator
exactly as stored: no newline translation, no BOM handling, no whitespace stripping.  Three
layouts are used:

* ``lines(path)``: one item per line, every line ended by ``\\n`` (split on ``\\n`` only,
  never on the other characters ``str.splitlines`` treats as line breaks);
* ``snippets(folder)``: one item per ``*.tpl`` file, in file-name order (``01.tpl``,
  ``02.tpl``, ...); a file's whole content is the item, trailing blank lines and trailing
  whitespace included;
* ``json_data(path)``: a JSON document.

Each file is read once per process.  Whitespace in these files is content: edit them with an
editor that keeps trailing whitespace, tabs and final blank lines (``pools/.gitattributes``
keeps git from converting their line endings).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

POOL_DIR = Path(__file__).parent / "pools"


@cache
def read_text(relpath: str) -> str:
    """The exact content of the pool file at ``relpath`` (relative to ``pools/``)."""
    return (POOL_DIR / relpath).read_bytes().decode("utf-8")


@cache
def lines(relpath: str) -> tuple[str, ...]:
    """The items of a one-item-per-line pool file."""
    text = read_text(relpath)
    if not text.endswith("\n"):
        raise ValueError(f"pool file {relpath} must end with a newline")
    return tuple(text[:-1].split("\n"))


@cache
def snippets(relfolder: str) -> tuple[str, ...]:
    """The contents of the ``*.tpl`` files in ``relfolder``, ordered by file name."""
    names = sorted(p.name for p in (POOL_DIR / relfolder).glob("*.tpl"))
    if not names:
        raise FileNotFoundError(f"no *.tpl files in pool folder {relfolder}")
    return tuple(read_text(f"{relfolder}/{name}") for name in names)


@cache
def json_data(relpath: str) -> Any:
    """The parsed JSON document at ``relpath`` (shared: do not mutate it)."""
    return json.loads(read_text(relpath))

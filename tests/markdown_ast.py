"""Markdown as a reader's renderer parses it (mistune's GFM AST), shared by the tests of the
Markdown outputs and of the dashboard's Markdown."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import mistune

GFM = mistune.create_markdown(renderer="ast", plugins=["table", "strikethrough"])
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)")


def _text(node: dict[str, Any]) -> str:
    """The text of a parsed node as a reader sees it."""
    if "raw" in node:
        return str(node["raw"])
    if node["type"] in ("softbreak", "linebreak"):
        return " "
    return "".join(_text(c) for c in node.get("children", []))


def _nodes(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for node in nodes:
        yield node
        yield from _nodes(node.get("children", []))

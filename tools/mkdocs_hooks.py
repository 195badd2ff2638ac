"""mkdocs hooks: pages generated from the code, so the site cannot drift from it.

``<!-- generated:http-api -->`` in a page becomes the table of every HTTP operation of
``ldp serve``'s app, read from the same OpenAPI document ``/openapi.json`` serves
(:func:`ldp_api.openapi.document`).
"""

from __future__ import annotations

import logging
from typing import Any

MARKER = "<!-- generated:http-api -->"
METHODS = ("get", "put", "post", "delete", "patch")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _parameters(op: dict[str, Any]) -> str:
    names = []
    for p in op.get("parameters", []):
        if p.get("in") == "query":
            names.append(f"`{p['name']}`")
    return ", ".join(names) or "—"


def http_api_markdown() -> str:
    """The operations of ``ldp serve``'s app as Markdown, one section per path."""
    from ldp_api.openapi import document
    from ldp_server.app import create_server_app

    # No request is made: the app is only walked for its routes. Redis is never reached,
    # so the warnings of collectors that try it at registration are not the build's news.
    logging.disable(logging.WARNING)
    try:
        app = create_server_app({"REDIS_URL": "redis://127.0.0.1:9/0", "TESTING": True})
        doc = document(app)
    finally:
        logging.disable(logging.NOTSET)
    rows = ["| method | path | what | query | answers |", "|---|---|---|---|---|"]
    for path, item in sorted(doc["paths"].items()):
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            summary = _cell(op.get("summary") or op.get("description") or "")
            answers = ", ".join(sorted(op.get("responses", {})))
            rows.append(
                f"| {method.upper()} | `{path}` | {summary} | {_parameters(op)} | {answers} |"
            )
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Fill the generated sections of a page."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, http_api_markdown())
    return markdown

"""Gunicorn's logger without client metadata: imported only where gunicorn runs.

Gunicorn's access-log atoms include the client address (``h``), the request time
(``t``), the user agent (``a``), the referer (``f``), every request header (``{x}i``)
and the environ (``{x}e``); its error log writes ``Invalid request from ip=<address>``
for malformed HTTP. This logger blanks those atoms, so even a careless
``access_log_format`` prints ``-`` for them, and scrubs ``ip=`` from error lines.

Every other atom a client can shape (the path above all: ``%0d%0a`` decodes to CR LF in
``PATH_INFO``) is escaped as nginx escapes its log variables: control characters, ``"``
and ``\\`` become ``\\xHH``, so a request cannot end its log line and forge the next.
The one-line messages of the error log (warning, info, debug) are escaped the same way.
"""

from __future__ import annotations

import re
from typing import Any

from gunicorn.glogging import Logger  # type: ignore[import-untyped]

__all__ = ["BLANK_ATOMS", "PrivateGunicornLogger", "escape"]

BLANK_ATOMS = frozenset({"h", "l", "u", "t", "r", "f", "a"})
"""Atoms with the client's address, user, clock-derived time, request line (with the
query string), referer and user agent."""

_IP_TOKEN = re.compile(r"\bip=\S+")

_UNSAFE = re.compile(r'[\x00-\x1f\x7f-\x9f\u2028\u2029"\\]')
"""What :func:`escape` rewrites: C0 and C1 control characters (CR, LF, NEL), Unicode's
line and paragraph separators, quote and backslash: everything a log reader might take
for the end of a line or of a field."""


def escape(text: str) -> str:
    """``text`` with every control character, ``"`` and ``\\`` written as ``\\xHH``."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02X}", text)  # \u2028 → \x2028


def _scrub(msg: object) -> str:
    return escape(_IP_TOKEN.sub("ip=-", str(msg)))


class PrivateGunicornLogger(Logger):
    """Gunicorn's ``Logger`` with client metadata removed from every line."""

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        """The access-log atoms, with client metadata replaced by ``-``."""
        found: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        for key, value in found.items():
            if key in BLANK_ATOMS or key.endswith("}i") or key.endswith("}e"):
                found[key] = "-"
            elif isinstance(value, str):
                found[key] = escape(value)
        return found

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        """Log a warning (``Invalid request from ip=...``) without the address."""
        super().warning(_scrub(msg), *args, **kwargs)

    def info(self, msg: object, *args: Any, **kwargs: Any) -> None:
        """Log at info level without any ``ip=`` token."""
        super().info(_scrub(msg), *args, **kwargs)

    def debug(self, msg: object, *args: Any, **kwargs: Any) -> None:
        """Log at debug level without any ``ip=`` token."""
        super().debug(_scrub(msg), *args, **kwargs)

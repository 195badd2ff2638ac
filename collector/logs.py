"""Keep client metadata out of the process: no address, user agent or client time.

Reports are unlinkable only if nothing ties them to a device, and the usual places that
do are the web stack's, not ours: Werkzeug's request log starts with the client's
address, gunicorn's default access log too, proxies add ``X-Forwarded-For``. Here:

* :class:`StripClientMetadata` removes those values from the WSGI environ the app sees,
  so nothing in it (our code, a blueprint mounted later) can read them;
* :class:`ScrubRequestLines` drops Werkzeug's per-request lines and the address prefix
  of its other messages (installed by ``create_app``);
* :class:`PrivateRequestHandler` is a Werkzeug dev-server handler that never formats the
  address (for ``run_simple(..., request_handler=PrivateRequestHandler)``);
* ``ldp_edge.gunicorn_logging.PrivateGunicornLogger`` does the same for gunicorn's
  access and error logs (``collector/gunicorn_conf.py`` uses it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.serving import WSGIRequestHandler

__all__ = [
    "CLIENT_ENVIRON_KEYS",
    "PrivateRequestHandler",
    "ScrubRequestLines",
    "StripClientMetadata",
    "install_werkzeug_filter",
    "own_cookies",
]

CLIENT_ENVIRON_KEYS = (
    "REMOTE_ADDR",
    "REMOTE_PORT",
    "REMOTE_HOST",
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_REAL_IP",
    "HTTP_FORWARDED",
    "HTTP_TRUE_CLIENT_IP",
    "HTTP_CF_CONNECTING_IP",
    "HTTP_X_CLIENT_IP",
    "HTTP_X_CLUSTER_CLIENT_IP",
    "HTTP_USER_AGENT",
    "HTTP_REFERER",
    "HTTP_COOKIE",
    "HTTP_DATE",
)
"""Environ keys that identify or time a client: addresses (the peer's and those proxies
add), the user agent, the referer, cookies and the client's clock (``Date``)."""

_CLIENT_KEYS = frozenset(CLIENT_ENVIRON_KEYS)
_COOKIE_KEY = "HTTP_COOKIE"  # a request header, not a setting

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class StripClientMetadata:
    """WSGI middleware: the app sees each request without :data:`CLIENT_ENVIRON_KEYS`.

    The app gets a copy of the environ: servers read their own dict back after the
    request (Werkzeug's dev server fails without ``REMOTE_ADDR``), and their logs are
    made private by their own means (the filter and loggers of this module).

    Args:
        app: the WSGI application to wrap.
        also: more environ keys to remove (the header a trusted proxy puts the client's
            address in, if it is not one of the above).
        cookies: the names of the app's own cookies (the dashboard's session,
            :data:`ldp_api.sessions.COOKIE_NAMES`) to let through; every other cookie is
            removed, and with none named the whole ``Cookie`` header is.
    """

    def __init__(self, app: WsgiApp, also: Iterable[str] = (), cookies: Iterable[str] = ()) -> None:
        self.app = app
        self.keys = _CLIENT_KEYS | frozenset(also)
        self.cookies = frozenset(cookies)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Serve the request with the client's metadata removed."""
        private = {k: v for k, v in environ.items() if k not in self.keys}
        header = environ.get(_COOKIE_KEY) if self.cookies else None
        kept = own_cookies(header, self.cookies) if header else ""
        if kept:
            private[_COOKIE_KEY] = kept
        return self.app(private, start_response)


def own_cookies(header: str, names: frozenset[str]) -> str:
    """The ``name=value`` pairs of a ``Cookie`` header whose name is in ``names``."""
    pairs = (part.strip() for part in header.split(";"))
    return "; ".join(p for p in pairs if p.partition("=")[0].strip() in names)


_WERKZEUG_PREFIX = re.compile(r"^\S+ - - \[[^\]]*\] ")
"""Werkzeug formats its messages as ``<address> - - [<date>] <message>``."""


class ScrubRequestLines(logging.Filter):
    """On Werkzeug's logger: drop per-request lines, strip the address from the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Return False for a request line; remove the address prefix otherwise."""
        message = record.msg if isinstance(record.msg, str) else str(record.msg)
        if not _WERKZEUG_PREFIX.match(message):
            return True
        if record.levelno <= logging.INFO:
            return False  # "GET /v1/reports HTTP/1.1" 202 -: one line per request
        record.msg = _WERKZEUG_PREFIX.sub("", message)
        return True


def install_werkzeug_filter() -> None:
    """Attach :class:`ScrubRequestLines` to the ``werkzeug`` logger (once per process)."""
    logger = logging.getLogger("werkzeug")
    if not any(isinstance(f, ScrubRequestLines) for f in logger.filters):
        logger.addFilter(ScrubRequestLines())


class PrivateRequestHandler(WSGIRequestHandler):
    """Werkzeug's development-server handler without the client's address in its logs."""

    def address_string(self) -> str:
        """Never the client's address."""
        return "-"

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """No per-request lines (gunicorn's access log is the production one)."""

    def log(self, type: str, message: str, *args: Any) -> None:
        """Log ``message`` without the address and date prefix."""
        getattr(logging.getLogger("werkzeug"), type)(message.rstrip(), *args)

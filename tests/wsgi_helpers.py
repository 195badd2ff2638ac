"""A WSGI app served for real (Werkzeug, a thread, a free loopback port) for the tests
whose client is a separate program (the CLI, the SDK's HTTP transport)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from werkzeug.serving import make_server

from ldp_store.embedded import free_port


@contextmanager
def serving(app: Any, threaded: bool = False) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 until the block ends (a thread a request if
    ``threaded``); yields its base URL."""
    server = make_server("127.0.0.1", free_port(), app, threaded=threaded)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()

"""A provider's discovery document and JWKS served over real HTTP, with keys the test
holds and changes, and ``id_token``s signed with them by joserfc (tests/ldp_api/test_oidc.py,
tests/aggregator/test_signin_pages.py). The whole flow against a real provider is
tests/browser/test_signin_browser.py's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey

CLIENT = "ldp-dashboard"


class Issuer:
    """Discovery and JWKS of a provider whose keys the test changes."""

    def __init__(self, key: RSAKey) -> None:
        self.key = key
        self.jwks_reads = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/.well-known/openid-configuration":
                    body: dict[str, Any] = {
                        "issuer": issuer.url,
                        "authorization_endpoint": f"{issuer.url}/auth",
                        "token_endpoint": f"{issuer.url}/token",
                        "jwks_uri": f"{issuer.url}/jwks",
                        "id_token_signing_alg_values_supported": ["RS256", "HS256"],
                    }
                else:
                    issuer.jwks_reads += 1
                    body = {"keys": [issuer.key.as_dict(private=False)]}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def sign(self, key: Any = None, alg: str = "RS256", **changes: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "sub": "u1", "aud": CLIENT, "iat": now, "exp": now + 300}
        claims |= {"nonce": "n1", "email": "alice@example.org", "groups": ["ldp-owners"]}
        claims.update(changes)
        key = key or self.key
        return jwt.encode({"alg": alg, "kid": key.kid}, claims, key)


def rsa_keys() -> tuple[RSAKey, RSAKey]:
    """Two RSA signing keys, ``one`` and ``two`` (each takes a while to make)."""
    one, two = (
        RSAKey.generate_key(2048, parameters={"kid": kid}, private=True) for kid in ("one", "two")
    )
    return one, two


@contextmanager
def serving_issuer(key: RSAKey) -> Iterator[Issuer]:
    """An :class:`Issuer` with ``key``, served until the block ends."""
    found = Issuer(key)
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()

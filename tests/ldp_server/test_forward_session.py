"""What ``ldp serve``'s ingest workers pass on to the read workers of a dashboard
request (ldp_server/forward.py): the session cookie and CSRF header, no other cookie."""

from __future__ import annotations

from ldp_server.forward import _headers


def test_only_the_session_cookie_and_csrf_header_are_forwarded() -> None:
    env = {
        "HTTP_COOKIE": "_ga=GA1; ldp_session=abc; other=1",
        "HTTP_X_CSRF_TOKEN": "t",
        "HTTP_USER_AGENT": "Mozilla",
        "HTTP_ACCEPT": "text/html",
    }
    assert _headers(env) == {
        "Accept": "text/html",
        "X-CSRF-Token": "t",
        "Cookie": "ldp_session=abc",
    }
    assert "Cookie" not in _headers({"HTTP_COOKIE": "_ga=GA1"})

"""The settings both apps read as text, the bearer tokens among them, and their checks.

The collector's app factory and ``ldp serve`` (before it starts a child) apply the same
rules; this module loads neither Flask nor an app. See docs/reference/configuration.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MIN_TOKEN_LENGTH",
    "TEXT_SETTINGS",
    "TOKEN_SETTINGS",
    "ConfigError",
    "check_tokens",
    "tokens_from_env",
]

MIN_TOKEN_LENGTH = 16
"""Characters a token must have at least. A token is a bearer secret that anyone on the
network may guess at; 16 characters of ``secrets.token_urlsafe`` are 96 bits. Shorter
values are refused at start, not accepted as weak: that is also what turns a value that
reads as JSON (``null``, ``0``, ``false``, ``1e999``) into a clear error instead of an
open door."""

TOKEN_SETTINGS = ("ADMIN_TOKEN", "READ_TOKEN", "METRICS_TOKEN")
"""The secrets among the settings: read from the environment as text, never as JSON."""

TEXT_SETTINGS = (
    *TOKEN_SETTINGS,
    "OIDC_ISSUER",
    "OIDC_CLIENT_ID",
    "OIDC_CLIENT_SECRET",
    "OIDC_SCOPES",
    "OIDC_ROLES_CLAIM",
    "OIDC_REDIRECT_URI",
)
"""Settings read from the environment as written (a client id or secret of digits is
still text); the rest go through ``from_prefixed_env``'s JSON (``LDP_OIDC_ROLES`` is a
JSON object)."""


class ConfigError(ValueError):
    """A setting is wrong; raised at start (``create_app``, ``ldp serve``), never per request."""


def tokens_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tokens of the environment (``LDP_ADMIN_TOKEN``, …) exactly as written.

    Flask's ``from_prefixed_env`` parses every value as JSON: ``null`` became None (no
    token: reads open), ``0``/``false`` falsy, ``1e999`` the float inf. Secrets are text,
    so the app factory puts these over what it parsed (and the other
    :data:`TEXT_SETTINGS`).
    """
    env = os.environ if environ is None else environ
    return {key: env[f"LDP_{key}"] for key in TEXT_SETTINGS if f"LDP_{key}" in env}


def check_tokens(config: Mapping[str, Any]) -> dict[str, str | None]:
    """The tokens of ``config``: None when unset or empty, else a string of at least
    :data:`MIN_TOKEN_LENGTH` characters.

    An empty value means unset (compose passes ``LDP_READ_TOKEN: ${LDP_READ_TOKEN:-}``).

    Raises:
        ConfigError: a token is not text, or is shorter than the minimum (the message
            names the variable, never the value).
    """
    out: dict[str, str | None] = {}
    for key in TOKEN_SETTINGS:
        token = config.get(key)
        if token in (None, ""):
            out[key] = None
            continue
        if not isinstance(token, str):
            raise ConfigError(
                f"LDP_{key} must be text, got a {type(token).__name__}; tokens are read "
                "from the environment as they are written"
            )
        if len(token.strip()) < MIN_TOKEN_LENGTH or token != token.strip():
            raise ConfigError(
                f"LDP_{key} is too short or has surrounding spaces: a token needs at least "
                f"{MIN_TOKEN_LENGTH} characters (make one with "
                "`python3 -c 'import secrets; print(secrets.token_urlsafe(24))'`), or unset "
                "it"
            )
        out[key] = token
    return out

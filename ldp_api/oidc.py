"""The dashboard's OpenID Connect relying party: discovery, PKCE, the code exchange,
``id_token`` validation and the mapping of a claim to roles per project.

No Flask here: :mod:`ldp_api.sessions` runs the browser's side. Signatures and claims
are checked by joserfc (the JOSE core of authlib), never by hand; the provider's keys
(JWKS) are fetched again when a token names a key not yet seen, so a rotation at the
provider is followed without a restart. Docs: docs/guides/teams.md (SSO setup),
docs/security/threat-model.md (sessions).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import requests
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from client_sdk.numbers import is_count
from ldp_store.tokens import ADMIN_SCOPES

__all__ = [
    "ALGORITHMS",
    "HTTP_TIMEOUT",
    "LEEWAY_SECONDS",
    "ROLES",
    "SESSION_SECONDS",
    "Identity",
    "OidcSettings",
    "Provider",
    "SignInError",
    "pkce_pair",
    "roles_of",
    "settings_from",
]

ROLES: dict[str, frozenset[str]] = {
    "viewer": frozenset({"metrics:read"}),
    "editor": frozenset({"metrics:read", "metrics:write"}),
    "owner": ADMIN_SCOPES,
}
"""The scopes of each role in a project: a viewer reads; an editor also defines and
changes metrics and alert rules; an owner may do all an admin token may (delete,
tokens, the audit log)."""

_RANK = {role: rank for rank, role in enumerate(ROLES)}

ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
"""Signature algorithms accepted on an ``id_token`` (those of them the provider
announces): never ``none``, never an HMAC keyed with the client secret."""

HTTP_TIMEOUT = 5.0
"""Seconds to wait for the provider (discovery, keys, the code exchange): it is on the
path of one sign-in, never of a report or a read."""

LEEWAY_SECONDS = 60
"""Clock skew allowed on ``exp``/``iat``/``nbf`` between the provider and this host."""

SESSION_SECONDS = 8 * 3600
"""A session's lifetime by default (``LDP_SESSION_SECONDS``): a working day; then the
operator signs in again (silently, while the provider's own session lasts)."""

DISCOVERY_SECONDS = 3600
"""How long the discovery document is kept before it is read again."""


class SignInError(Exception):
    """A sign-in that cannot be accepted; the message is safe to show the operator."""


@dataclass(frozen=True)
class OidcSettings:
    """What the deployment configured (``LDP_OIDC_…``, :func:`settings_from`)."""

    issuer: str
    client_id: str
    client_secret: str | None = None
    scopes: str = "openid email profile"
    roles_claim: str = "groups"
    roles: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Claim value (a group) → {project → role}."""
    redirect_uri: str | None = None
    session_seconds: int = SESSION_SECONDS


@dataclass(frozen=True)
class Identity:
    """Who a validated ``id_token`` names, and what they may do."""

    actor: str
    roles: Mapping[str, str]


def _text_setting(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise ValueError(f"LDP_{key} must be text, got {value!r}")
    return value


def _role_map(value: Any) -> dict[str, dict[str, str]]:
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(
                'LDP_OIDC_ROLES must be JSON like {"ldp-owners": {"default": "owner"}}'
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError("LDP_OIDC_ROLES must map a group to {project: role}")
    out: dict[str, dict[str, str]] = {}
    for group, projects in value.items():
        if not isinstance(projects, Mapping):
            raise ValueError(f"LDP_OIDC_ROLES[{group!r}] must map projects to roles")
        for project, role in projects.items():
            if role not in ROLES:
                raise ValueError(
                    f"LDP_OIDC_ROLES[{group!r}][{project!r}]: {role!r} is not one of "
                    f"{', '.join(ROLES)}"
                )
        out[str(group)] = {str(p): str(r) for p, r in projects.items()}
    return out


def settings_from(config: Mapping[str, Any]) -> OidcSettings | None:
    """The sign-in settings of an app's config, None when ``OIDC_ISSUER`` is unset.

    Raises:
        ValueError: a setting is missing or malformed (the message names it).
    """
    issuer = _text_setting(config, "OIDC_ISSUER")
    if issuer is None:
        return None
    if not issuer.startswith(("https://", "http://")):
        raise ValueError(f"LDP_OIDC_ISSUER must be the provider's URL, got {issuer!r}")
    client_id = _text_setting(config, "OIDC_CLIENT_ID")
    if client_id is None:
        raise ValueError("LDP_OIDC_ISSUER is set: set LDP_OIDC_CLIENT_ID too")
    seconds = config.get("SESSION_SECONDS", SESSION_SECONDS)
    if isinstance(seconds, str) and seconds.strip().isdigit():
        seconds = int(seconds)
    if not is_count(seconds):
        raise ValueError(f"LDP_SESSION_SECONDS must be a positive integer, got {seconds!r}")
    scopes = _text_setting(config, "OIDC_SCOPES") or OidcSettings.scopes
    if "openid" not in scopes.split():
        raise ValueError(f"LDP_OIDC_SCOPES must include openid, got {scopes!r}")
    return OidcSettings(
        issuer=issuer.rstrip("/"),
        client_id=client_id,
        client_secret=_text_setting(config, "OIDC_CLIENT_SECRET"),
        scopes=scopes,
        roles_claim=_text_setting(config, "OIDC_ROLES_CLAIM") or OidcSettings.roles_claim,
        roles=_role_map(config.get("OIDC_ROLES")),
        redirect_uri=_text_setting(config, "OIDC_REDIRECT_URI"),
        session_seconds=seconds,
    )


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636 §4.1–4.2)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def roles_of(claims: Mapping[str, Any], settings: OidcSettings) -> dict[str, str]:
    """Each project's role from the ``roles_claim`` values (a list, or one string): the
    highest role any of them maps to."""
    values = claims.get(settings.roles_claim)
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        return {}
    found: dict[str, str] = {}
    for value in values:
        for project, role in settings.roles.get(str(value), {}).items():
            if project not in found or _RANK[role] > _RANK[found[project]]:
                found[project] = role
    return found


def actor_of(claims: Mapping[str, Any]) -> str:
    """The audit log's name for the person: e-mail, else user name, else subject."""
    for claim in ("email", "preferred_username", "sub"):
        value = claims.get(claim)
        if isinstance(value, str) and value:
            return f"sso:{value[:200]}"
    return "sso:unknown"


class Provider:
    """The configured provider, as discovered; keeps its keys and follows their rotation.

    Args:
        settings: the configuration.
        http: a ``requests`` session (tests may pass their own).
        clock: epoch seconds.
    """

    def __init__(
        self,
        settings: OidcSettings,
        http: requests.Session | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.http = http or requests.Session()
        self.clock = clock
        self._lock = threading.Lock()
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._keys: KeySet | None = None

    def _get(self, url: str) -> dict[str, Any]:
        try:
            response = self.http.get(url, timeout=HTTP_TIMEOUT)
            response.raise_for_status()
            body = response.json()
        except (requests.RequestException, ValueError) as exc:
            raise SignInError(
                f"the identity provider did not answer ({type(exc).__name__})"
            ) from exc
        if not isinstance(body, dict):
            raise SignInError("the identity provider answered something unexpected")
        return body

    def metadata(self) -> dict[str, Any]:
        """The discovery document (``/.well-known/openid-configuration``), checked."""
        with self._lock:
            if self._metadata is None or self.clock() - self._metadata_at > DISCOVERY_SECONDS:
                found = self._get(f"{self.settings.issuer}/.well-known/openid-configuration")
                if str(found.get("issuer", "")).rstrip("/") != self.settings.issuer:
                    raise SignInError("the provider's discovery document names another issuer")
                for needed in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                    if not isinstance(found.get(needed), str):
                        raise SignInError(f"the provider's discovery document lacks {needed}")
                self._metadata, self._metadata_at = found, self.clock()
            return self._metadata

    def keys(self, refresh: bool = False) -> KeySet:
        """The provider's public keys; ``refresh`` reads them again (a rotation)."""
        jwks_uri = self.metadata()["jwks_uri"]
        with self._lock:
            if self._keys is None or refresh:
                try:
                    self._keys = KeySet.import_key_set(self._get(jwks_uri))  # type: ignore[arg-type]
                except (JoseError, ValueError, TypeError) as exc:
                    raise SignInError("the provider's keys could not be read") from exc
            return self._keys

    def authorization_url(self, redirect_uri: str, state: str, nonce: str, challenge: str) -> str:
        """Where to send the browser: the authorization code flow with PKCE (S256)."""
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.settings.client_id,
                "redirect_uri": redirect_uri,
                "scope": self.settings.scopes,
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
        endpoint = self.metadata()["authorization_endpoint"]
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    def exchange(self, code: str, verifier: str, redirect_uri: str) -> str:
        """The ``id_token`` the token endpoint gives for ``code`` (and the verifier).

        Raises:
            SignInError: the provider refused, or sent no id_token.
        """
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        auth: tuple[str, str] | None = None
        if self.settings.client_secret is None:
            data["client_id"] = self.settings.client_id  # a public client
        else:
            auth = (self.settings.client_id, self.settings.client_secret)
        try:
            response = self.http.post(
                self.metadata()["token_endpoint"], data=data, auth=auth, timeout=HTTP_TIMEOUT
            )
            body = response.json()
        except (requests.RequestException, ValueError) as exc:
            raise SignInError(f"the token endpoint did not answer ({type(exc).__name__})") from exc
        if response.status_code != 200 or not isinstance(body, dict):
            error = body.get("error", response.status_code) if isinstance(body, dict) else ""
            raise SignInError(f"the provider refused the code ({error})")
        token = body.get("id_token")
        if not isinstance(token, str):
            raise SignInError("the provider sent no id_token (is the openid scope allowed?)")
        return token

    def validate(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The claims of ``id_token`` after joserfc checked its signature (a key of the
        provider's JWKS, read again once when the token names an unknown one), issuer,
        audience, expiry and nonce (OpenID Connect Core §3.1.3.7).

        Raises:
            SignInError: any check failed.
        """
        announced = self.metadata().get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = [a for a in ALGORITHMS if a in announced]
        try:
            try:
                token = jwt.decode(id_token, self.keys(), algorithms=algorithms)
            except InvalidKeyIdError:
                token = jwt.decode(id_token, self.keys(refresh=True), algorithms=algorithms)
            registry = jwt.JWTClaimsRegistry(
                leeway=LEEWAY_SECONDS,
                iss={"essential": True, "value": self.settings.issuer},
                sub={"essential": True},
                aud={"essential": True, "value": self.settings.client_id},
                exp={"essential": True},
                iat={"essential": True},
                nonce={"essential": True, "value": nonce},
            )
            registry.validate(token.claims)
        except JoseError as exc:
            raise SignInError(f"the id_token was not accepted ({exc.error})") from exc
        claims = token.claims
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1:
            if claims.get("azp") != self.settings.client_id:
                raise SignInError("the id_token was issued to another party (azp)")
        return claims

    def identity(self, claims: Mapping[str, Any]) -> Identity:
        """Who ``claims`` name and their roles (:func:`roles_of`)."""
        return Identity(actor_of(claims), roles_of(claims, self.settings))

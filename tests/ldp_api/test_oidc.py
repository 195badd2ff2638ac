"""The relying party's checks of an ``id_token`` (ldp_api/oidc.py), against a provider's
discovery document and JWKS served over real HTTP, with tokens joserfc signs here.

The full flow (a real provider, Chromium) is tests/browser/test_signin_browser.py; this
covers each refusal: a wrong nonce, audience, issuer, an expired token, an HMAC or
unsigned token, and a key rotation followed by reading the JWKS again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from joserfc.jwk import OctKey, RSAKey
from oidc_helpers import CLIENT, Issuer, rsa_keys, serving_issuer

from collector.logs import StripClientMetadata
from ldp_api.oidc import OidcSettings, Provider, SignInError, roles_of, settings_from
from ldp_api.sessions import COOKIE_NAMES


@pytest.fixture(scope="module")
def keys() -> tuple[RSAKey, RSAKey]:
    return rsa_keys()


@pytest.fixture
def issuer(keys: tuple[RSAKey, RSAKey]) -> Iterator[Issuer]:
    with serving_issuer(keys[0]) as found:
        yield found


def _provider(issuer: Issuer) -> Provider:
    roles = {"ldp-owners": {"default": "owner"}, "ldp-readers": {"default": "viewer"}}
    return Provider(OidcSettings(issuer.url, CLIENT, "secret", roles=roles))


def test_a_good_id_token_is_accepted_with_its_roles(issuer: Issuer) -> None:
    provider = _provider(issuer)
    claims = provider.validate(issuer.sign(groups=["ldp-readers", "ldp-owners"]), "n1")
    identity = provider.identity(claims)
    assert identity.actor == "sso:alice@example.org"
    assert identity.roles == {"default": "owner"}  # the highest role of the groups


@pytest.mark.parametrize(
    "changes",
    [
        {"nonce": "another"},
        {"aud": "another-client"},
        {"aud": [CLIENT, "another"], "azp": "another"},
        {"iss": "https://elsewhere.example"},
        {"exp": int(time.time()) - 3600},
    ],
    ids=["nonce", "audience", "azp", "issuer", "expired"],
)
def test_an_id_token_failing_a_check_is_refused(issuer: Issuer, changes: dict[str, Any]) -> None:
    with pytest.raises(SignInError):
        _provider(issuer).validate(issuer.sign(**changes), "n1")


def test_an_hmac_token_keyed_with_a_guess_is_refused(issuer: Issuer) -> None:
    guess = OctKey.import_key("secret" * 8, parameters={"kid": "one"})
    with pytest.raises(SignInError):
        _provider(issuer).validate(issuer.sign(key=guess, alg="HS256"), "n1")


def test_a_rotated_key_is_fetched_once_and_the_old_one_refused(
    issuer: Issuer, keys: tuple[RSAKey, RSAKey]
) -> None:
    provider = _provider(issuer)
    old = issuer.key
    provider.validate(issuer.sign(), "n1")
    assert issuer.jwks_reads == 1
    issuer.key = keys[1]
    provider.validate(issuer.sign(), "n1")  # a new kid: the JWKS is read again
    provider.validate(issuer.sign(), "n1")
    assert issuer.jwks_reads == 2
    with pytest.raises(SignInError):  # gone from the JWKS: refused after one more read
        provider.validate(issuer.sign(key=old), "n1")


def test_settings_are_checked_at_start() -> None:
    base = {"OIDC_ISSUER": "https://idp.example", "OIDC_CLIENT_ID": CLIENT}
    assert settings_from({}) is None
    assert settings_from(base) is not None
    with pytest.raises(ValueError, match="LDP_OIDC_CLIENT_ID"):
        settings_from({"OIDC_ISSUER": "https://idp.example"})
    with pytest.raises(ValueError, match="admin"):
        settings_from(base | {"OIDC_ROLES": '{"g": {"default": "admin"}}'})
    with pytest.raises(ValueError, match="openid"):
        settings_from(base | {"OIDC_SCOPES": "email"})
    settings = settings_from(base | {"OIDC_ROLES": '{"g": {"default": "editor"}}'})
    assert settings is not None
    assert roles_of({"groups": "g"}, settings) == {"default": "editor"}
    assert roles_of({"groups": 7}, settings) == {}


def test_only_the_sessions_cookies_reach_the_app() -> None:
    seen: list[str | None] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ.get("HTTP_COOKIE"))
        return []

    header = "_ga=GA1.2.3; ldp_session=abc; tracker=x; __Host-ldp_signin=s"
    StripClientMetadata(app, cookies=COOKIE_NAMES)({"HTTP_COOKIE": header}, None)
    StripClientMetadata(app)({"HTTP_COOKIE": header}, None)  # sign-in off: none at all
    StripClientMetadata(app, cookies=COOKIE_NAMES)({"HTTP_COOKIE": "_ga=1"}, None)
    assert seen == ["ldp_session=abc; __Host-ldp_signin=s", None, None]

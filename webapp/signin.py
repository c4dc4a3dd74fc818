"""The django-allauth provider settings for the organisation's identity provider, from Skillscope's
own settings. Plain Python: settings.py builds them at start-up, tests for their own provider."""

from __future__ import annotations

from typing import Any


def oidc_app(
    *, issuer: str, client_id: str, secret: str, name: str, scopes: list[str]
) -> dict[str, Any]:
    """allauth's `openid_connect` app: provider id `sso` (callback /accounts/oidc/sso/login/callback/)."""
    return {
        "provider_id": "sso",
        "name": name,
        "client_id": client_id,
        "secret": secret,
        "settings": {
            "server_url": issuer,
            "token_auth_method": "client_secret_post",
            # PKCE as well as the client secret: a stolen code alone cannot be redeemed.
            "oauth_pkce_enabled": True,
            # The groups come from the userinfo endpoint, fetched with the access token.
            "fetch_userinfo": True,
            "scope": scopes,
        },
    }


def saml_app(*, metadata_url: str, entity_id: str, name: str) -> dict[str, Any]:
    """allauth's `saml` app: provider id `sso-saml` (/accounts/saml/sso-saml/acs/ and metadata/)."""
    return {
        "provider_id": "sso-saml",
        "client_id": "sso-saml",
        "name": name,
        "settings": {
            "idp": {"metadata_url": metadata_url},
            "sp": {"entity_id": entity_id},
            "attribute_mapping": {
                "uid": "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
                "email": "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
            },
            "advanced": {"want_assertion_signed": True, "want_message_signed": False},
        },
    }

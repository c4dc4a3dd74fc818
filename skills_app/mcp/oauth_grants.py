"""Per-person OAuth grants for MCP servers, stored encrypted.

A grant (`McpOAuthGrant`) is what one person holds for one server from one issuer: the tokens
and the client registration, each as Fernet ciphertext under a key derived from SECRET_KEY (the
fallback keys still decrypt after a rotation). Nobody else's call ever loads it: a call loads the
grant of its own person (`PersonGrants`, the core's `GrantStore`). How a person gets one is
`oauth_sign_in`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from cryptography.fernet import InvalidToken
from django.conf import settings
from django.urls import reverse

from skills_app.core.mcp.oauth import HeldGrant
from skills_app.models import McpOAuthGrant, McpServer, sealed

# The grants' own key (`models.sealed`): sha256 of "mcp-oauth:" + SECRET_KEY.
OAUTH_PURPOSE = "mcp-oauth"


def seal(text: str) -> bytes:
    return sealed.seal(text, OAUTH_PURPOSE)


def unseal(blob: bytes | memoryview) -> str:
    return sealed.unseal(blob, OAUTH_PURPOSE)


def load_grant(user_id: int, server: McpServer) -> HeldGrant | None:
    """The person's latest grant for this server (any issuer: the SDK drops a registration
    that belongs to another issuer than the server names now)."""
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

    row = McpOAuthGrant.objects.filter(user_id=user_id, server=server).first()
    if row is None:
        return None
    tokens, client = unseal(row.tokens), unseal(row.client_info)
    return HeldGrant(
        tokens=OAuthToken.model_validate_json(tokens) if tokens else None,
        client_info=OAuthClientInformationFull.model_validate_json(client) if client else None,
    )


def save_grant(user_id: int, server: McpServer, grant: HeldGrant) -> None:
    """Store the grant under its issuer, encrypted."""
    McpOAuthGrant.objects.update_or_create(
        user_id=user_id,
        server=server,
        issuer=grant.issuer,
        defaults={
            "tokens": seal(grant.tokens.model_dump_json() if grant.tokens else ""),
            "client_info": seal(grant.client_info.model_dump_json() if grant.client_info else ""),
        },
    )


def tokens_in(blobs: Iterable[bytes | memoryview]) -> list[str]:
    """The access and refresh tokens sealed in these stored `tokens` values."""
    from mcp.shared.auth import OAuthToken

    found: list[str] = []
    for blob in blobs:
        text = unseal(blob)
        if text:
            tokens = OAuthToken.model_validate_json(text)
            found += [
                tokens.access_token,
                *([tokens.refresh_token] if tokens.refresh_token else []),
            ]
    return found


def reseal_grants() -> tuple[int, int]:
    """Encrypt every stored grant again under the current SECRET_KEY (after a rotation, before
    the fallback keys are dropped): (grants re-encrypted, grants no configured key opens, left
    as they are: they read as not signed in)."""
    keys = sealed.fernet(OAUTH_PURPOSE)
    done = unopened = 0
    for row in McpOAuthGrant.objects.all():
        try:
            tokens, client = (
                keys.rotate(bytes(blob)) if bytes(blob) else b""
                for blob in (row.tokens, row.client_info)
            )
        except InvalidToken:
            unopened += 1
            continue
        McpOAuthGrant.objects.filter(pk=row.pk).update(tokens=tokens, client_info=client)
        done += 1
    return done, unopened


def sign_in_path(server: McpServer) -> str:
    return reverse("mcp-oauth-sign-in", args=[server.name])


def sign_in_link(server: McpServer) -> str:
    return f"{settings.SKILLSCOPE_PUBLIC_URL.rstrip('/')}{sign_in_path(server)}"


@dataclass(frozen=True, slots=True)
class PersonGrants:
    """A call's access to its own person's grant for one server (`core.mcp.oauth.GrantStore`)."""

    user_id: int
    server: McpServer
    sign_in_url: str
    allow_private: bool

    async def load(self) -> HeldGrant | None:
        return await sync_to_async(load_grant)(self.user_id, self.server)

    async def save(self, grant: HeldGrant) -> None:
        await sync_to_async(save_grant)(self.user_id, self.server, grant)


def grants_for(user_id: int, server: McpServer) -> PersonGrants:
    return PersonGrants(
        user_id=user_id,
        server=server,
        sign_in_url=sign_in_link(server),
        allow_private=settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES,
    )

"""OAuth 2.1 for Streamable HTTP servers, through the SDK's `OAuthClientProvider`.

The SDK does the protocol: discovery of the protected resource and authorization server
metadata, dynamic registration, PKCE (S256), the `state` check, the authorization-response `iss`
check (RFC 9207), the `resource` parameter (RFC 8707) and refreshing. What this module adds:

- `HeldGrant`, the SDK's `TokenStorage` over what one person holds for one server, in memory:
  the caller loads it from the database before and saves it after (`changed`), so the SDK's
  flow never touches the database from inside a request to the server.
- `SignInRequired`, raised where the SDK would send a person to the authorization page during a
  tool call: a call cannot wait for a person, so it ends with an error result naming the page.
- `OAuthSetup` and `provider`: the SDK's provider for one person and one server, which
  `connect` hands to the HTTP client factory as the client's auth, asking for the guarded
  client (`skills_app.mcp.transport`: every connection to a checked public address, no proxy,
  no cookies, no header of the app's).

The database side is `skills_app.mcp.oauth_grants` (the encrypted grants) and `skills_app.mcp.oauth_sign_in` (the sign-in pages).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

# The SDK is imported where a sign-in or a call needs it (see `connect`: 0.8 s of CPU that
# Django's start-up would otherwise pay in every process).
if TYPE_CHECKING:
    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

CLIENT_NAME = "Skillscope"


class _QuietSignIn(logging.Filter):
    """The SDK logs every failed OAuth flow with its traceback; a call ended by SignInRequired is
    the expected way a person is asked to sign in, not an error worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, SignInRequired)


class SignInRequired(Exception):
    """The person has no usable token for the server; they must sign in on its page first."""


@dataclass(slots=True)
class HeldGrant:
    """The SDK's `TokenStorage` for one (person, server): tokens and the client registration."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None
    changed: bool = False

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens, self.changed = tokens, True

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info, self.changed = client_info, True

    @property
    def issuer(self) -> str:
        """The authorization server the registration belongs to ("" before one was made)."""
        return (self.client_info.issuer or "") if self.client_info is not None else ""


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietSignIn())


class GrantStore(Protocol):
    """One person's stored grant for one server, as a call reaches it (`skills_app.mcp.oauth_grants`)."""

    @property
    def sign_in_url(self) -> str: ...

    @property
    def allow_private(self) -> bool: ...

    async def load(self) -> HeldGrant | None: ...

    async def save(self, grant: HeldGrant) -> None: ...


def sign_in_message(server: str, url: str) -> str:
    """The error result a call gets when its person must sign in to the server first."""
    return (
        f'The MCP server "{server}" needs the user to sign in to it before its tools can be '
        f"used. Tell the user to open {url} , sign in there, and then ask again. The tool was "
        "not called."
    )


@dataclass(frozen=True, slots=True)
class OAuthSetup:
    """What a client needs to speak OAuth to one server for one person."""

    grant: HeldGrant
    redirect_uri: str
    allow_private: bool = False
    # The page where the person signs in to this server (named in SignInRequired's message).
    sign_in_url: str = ""
    # Called with the authorization URL and awaited for the redirect's parameters: set only by
    # the sign-in flow (`skills_app.mcp.oauth_sign_in`); a tool call has none and gets SignInRequired.
    redirect: Callable[[str], Awaitable[None]] | None = None
    callback: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None


def provider(server_url: str, setup: OAuthSetup) -> OAuthClientProvider:
    """The SDK's provider for one server and one person's held grant."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[setup.redirect_uri],  # type: ignore[list-item]  # pydantic parses it
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        application_type="web",
    )

    async def refuse(url: str) -> None:
        raise SignInRequired(url)

    async def no_callback() -> AuthorizationCodeResult:  # never reached: `refuse` raises first
        raise SignInRequired("")

    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=setup.grant,
        redirect_handler=setup.redirect or refuse,
        callback_handler=setup.callback or no_callback,
    )

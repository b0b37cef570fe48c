"""What this server says about itself to OAuth clients: Protected Resource Metadata (RFC 9728) for `/mcp` and
Authorization Server Metadata (RFC 8414), and the `WWW-Authenticate` challenge that points at the first.

Built with the SDK's `build_metadata`, plus what it leaves out: Client ID Metadata Documents support, public
clients (`none`) at the token and revocation endpoints, and the RFC 9207 `iss` in authorization responses.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.auth.routes import build_metadata
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from pydantic import AnyHttpUrl

AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    public_url: str  # scheme://host[:port], no trailing slash

    @property
    def resource(self) -> str:
        return f"{self.public_url}/mcp"

    @property
    def resource_metadata_url(self) -> str:
        return f"{self.public_url}/.well-known/oauth-protected-resource/mcp"

    @property
    def challenge(self) -> str:
        return f'Bearer realm="agent-automation-mcp", resource_metadata="{self.resource_metadata_url}"'

    def authorization_server(self) -> OAuthMetadata:
        metadata = build_metadata(AnyHttpUrl(self.public_url), None, ClientRegistrationOptions(enabled=True),
                                  RevocationOptions(enabled=True))
        return metadata.model_copy(update={
            "client_id_metadata_document_supported": True,
            "authorization_response_iss_parameter_supported": True,
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
            "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        })

    @property
    def issuer(self) -> str:
        """As the metadata renders it, which is what clients compare the `iss` of a redirect with."""
        return str(AnyHttpUrl(self.public_url))

    def is_resource(self, value: str) -> bool:
        """Whether an RFC 8707 `resource` names this server's `/mcp` (compared as the metadata renders URLs)."""
        try:
            return str(AnyHttpUrl(value)) == str(AnyHttpUrl(self.resource))
        except ValueError:
            return False

    def protected_resource(self) -> ProtectedResourceMetadata:
        return ProtectedResourceMetadata(resource=AnyHttpUrl(self.resource),
                                         authorization_servers=[AnyHttpUrl(self.public_url)],
                                         resource_name="Agent Automation (Codegen)")

"""Who is calling: the principal, and how the authorizer verifies JWTs and API keys."""

from context_ledger.auth.principal import Principal, PrincipalKind

__all__ = ["Principal", "PrincipalKind"]

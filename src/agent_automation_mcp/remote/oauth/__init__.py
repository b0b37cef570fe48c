"""Sign-in with OAuth 2.1 (`--auth oauth`): see `signin.py` for how the pieces fit and docs/oauth.md for users."""

from .signin import SignIn, check_public_url, signin_budgets

__all__ = ["SignIn", "check_public_url", "signin_budgets"]

"""Sign-in with OAuth 2.1 (`--auth oauth`): see `signin.py` for how the pieces fit and docs/oauth.md for users.

Nothing is imported here, so that `preflight` (the settings' check, run before the server starts) loads without the
sign-in and the SDK's auth."""

"""OAuth 2.1 for remote agents: the built-in authorization server and JWTs from an existing issuer.

- :mod:`.store`: the authorization server's state in the store (clients, grants, hashed secrets).
- :mod:`.server`: the MCP SDK's provider protocol over that state (codes, PKCE, rotation, revocation).
- :mod:`.resource`: which resource (RFC 8707) a token is bound to, and the space it names.
- :mod:`.issuer`: JWT access tokens of an external identity provider, verified against its JWKS.
- :mod:`.bearer`: how the API-key store's ``authenticate`` hands such tokens to the two above.

Nothing is imported here: :mod:`afi.auth.keys` imports :mod:`.bearer` while :mod:`afi.auth` loads.
"""

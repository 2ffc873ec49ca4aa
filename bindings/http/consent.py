"""The owner's consent page for the built-in authorization server: one Jinja2 template, escaped.

It names the client (as it calls itself, and its id; for a client known by its metadata document,
the host that publishes it), the redirect URI the browser goes back to, the
space, the resource and the scopes asked. Approving needs an admin key (or the owner's token,
``afi auth token``) pasted into a password field and sent in the POST body, never in a URL, or,
while the server has no key at all, the local owner on loopback. No script runs on the page; its
CSP allows only its own stylesheet (the web page's), the form's own target, and the client's
redirect origin (where the approval redirects), and forbids framing.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment

__all__ = ["CSRF_COOKIE", "consent_headers", "render_consent", "render_refusal"]

CSRF_COOKIE = "afi_oauth_csrf"
_SOURCE = re.compile(r"^[a-z][a-z0-9+.-]*:(//[A-Za-z0-9.\-\[\]:]+)?$")

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>Allow {{ client_name }}? · afi-memory</title>
<link rel="stylesheet" href="/ui/static/app.css">
</head>
<body>
<main id="main" class="consent">
<h1>Allow <strong>{{ client_name }}</strong> to use this memory?</h1>
{% if problem %}<p class="error" role="alert">{{ problem }}</p>{% endif %}
<dl>
<dt>Client</dt><dd>{{ client_name }} <code>{{ client_id }}</code></dd>
{% if document_host %}<dt>Described by</dt><dd>its metadata document, published by <strong>{{ document_host }}</strong>
at <code>{{ client_id }}</code> (the name above is what that document says)</dd>{% endif %}
<dt>Sends you back to</dt><dd><code>{{ redirect_uri }}</code></dd>
<dt>Space</dt><dd><code>{{ space }}</code></dd>
<dt>Resource</dt><dd><code>{{ resource }}</code></dd>
<dt>Scopes</dt><dd>{% for scope in scopes %}<code>{{ scope }}</code>{% if scope == "afi:write" %} (change and
delete notes and files){% elif scope == "afi:read" %} (read and search){% endif %}{% if not loop.last %}, {% endif %}
{% endfor %}</dd>
</dl>
<form method="post" action="{{ action }}">
<input type="hidden" name="request" value="{{ request_id }}">
<input type="hidden" name="csrf" value="{{ csrf }}">
{% if keyless %}<p>This server has no API key yet: as this machine's owner you may approve without one.</p>
{% else %}<label for="key">An admin key of this space, or the owner's token (<code>afi auth token</code>)</label>
<input id="key" name="key" type="password" autocomplete="off" required>{% endif %}
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button>
</form>
</main>
</body>
</html>
"""

_REFUSAL = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Client refused · afi-memory</title>
<link rel="stylesheet" href="/ui/static/app.css"></head>
<body><main id="main" class="consent">
<h1>This client cannot be authorized</h1>
<p class="error" role="alert">{{ problem }}</p>
<p>Nothing was granted. Tell the client's publisher, or ask this server's operator.</p>
</main></body>
</html>
"""

_ENV = Environment(autoescape=True)
_PAGE = _ENV.from_string(_TEMPLATE)
_REFUSED = _ENV.from_string(_REFUSAL)


def render_consent(**fields: Any) -> str:
    """The page, every value escaped."""
    return _PAGE.render(**fields)


def render_refusal(problem: str) -> str:
    """The page for an authorization request whose client cannot be used (its metadata document)."""
    return _REFUSED.render(problem=problem)


def _source(uri: str) -> str:
    """A CSP source for where the approval redirects: the origin of an http(s) URI, else its scheme."""
    parts = urlsplit(uri)
    source = f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else f"{parts.scheme}:"
    return source if _SOURCE.match(source) else ""  # nothing that could end the directive or the header


def consent_headers(redirect_uri: str) -> dict[str, str]:
    """What the consent page (and the answer to its form) is sent with: no caching, no framing, no script."""
    policy = (
        "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'; "
        f"form-action 'self' {_source(redirect_uri)}"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        # same-origin, not no-referrer: under no-referrer a browser posts the form with ``Origin: null``,
        # which the origin check must refuse; no Referer leaves for the client's site either way.
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }

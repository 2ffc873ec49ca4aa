"""What each page shows, gathered through the provider's own verbs for one caller (no second code path).

Every function runs in a worker thread (the provider is synchronous) and returns the template's
context; an :class:`~afi.errors.AfiError` from a verb goes to the page as it would to the API.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import urlencode

from afi.errors import AfiError, Unsupported
from afi.model import Entry
from afi.provider import AdminProvider, Caller, ConflictsProvider, Provider, SyncProvider

from .markdown import RENDER_MAX_CHARS, RENDER_MAX_MARKS, ordered_fields, render_markdown, split_front_matter

__all__ = ["audit", "browse", "conflicts", "href", "keys", "ledger", "parent", "timeline"]

MAX_SHOWN_BYTES = 1024 * 1024  # a bigger file shows its first MiB
MAX_VERSIONS = 50
MAX_CONFLICTS = 200  # a page lists this many open conflicts; afi diff and GET /sync/conflicts list all
# what a version is, as the timeline says it: one valid at the instant read is that instant's current one
_STATUS = {"active": "current"}
_AT = re.compile(r"^(/\.afi/at/[^/]+)(/.*)?$")
_MESSAGE = re.compile(r"^\[(?P<id>[^\]]+)\] \((?P<at>[^)]*)\) (?P<role>[^:]+): (?P<text>.*)$")
_LEDGER_LINE = re.compile(r"^> (?P<type>observation|reflection) (?P<ref>\S+) \((?P<at>[^)]*)\): (?P<text>.*)$")


def href(view: str, **params: Any) -> str:
    """The page URL of a view with its query parameters (None values left out)."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"/ui/{view}" + (f"?{query}" if query else "")


def parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) or "/"


def crumbs(path: str) -> list[tuple[str, str]]:
    """The path's folders from the root down, each with its browse link."""
    parts = [p for p in path.split("/") if p]
    out = [("/", href("browse", path="/"))]
    for i in range(len(parts)):
        sub = "/" + "/".join(parts[: i + 1])
        out.append((parts[i], href("browse", path=sub)))
    return out


def _writable(caller: Caller, entry: Entry) -> bool:
    return caller.has("afi:write") and "w" in str(entry.attributes.get("permissions", ""))


def _row(entry: Entry) -> dict[str, Any]:
    name = posixpath.basename(entry.path) or "/"
    return {
        "name": name + ("/" if entry.type == "directory" else ""),
        "path": entry.path,
        "href": href("browse", path=entry.path),
        "type": entry.type,
        "size": entry.size if entry.type == "file" else None,
        "mtime": entry.mtime,
        "kind": entry.attributes.get("x-kind"),
    }


def browse(provider: Provider, caller: Caller, path: str, cursor: str | None) -> dict[str, Any]:
    """A folder's entries (with sizes and times), or a file's page when the path is a file."""
    entry = provider.stat(caller, path)
    if entry.type != "directory":
        return note(provider, caller, entry)
    page = provider.list(caller, entry.path, limit=200, cursor=cursor)
    area = entry.path.split("/")[1] if entry.path != "/" else ""
    return {
        "template": "browse.html",
        "title": entry.path,
        "path": entry.path,
        "crumbs": crumbs(entry.path),
        "rows": [_row(e) for e in page.entries],
        "more": href("browse", path=entry.path, cursor=page.next_cursor) if page.next_cursor else None,
        "can_create": _writable(caller, entry) and area in ("facts", "procedures", "working", "files"),
        "at_root": entry.path == "/",
        "conflicts": conflicts(provider, caller) if entry.path == "/" else None,
    }


def conflicts(provider: Provider, caller: Caller) -> dict[str, Any] | None:
    """The space's open conflicts (the first :data:`MAX_CONFLICTS`), each with links to the current
    version and to each it won over; None when the provider keeps none."""
    if not isinstance(provider, ConflictsProvider):
        return None
    found = provider.open_conflicts(caller)
    rows = [
        {**c, "href": href("browse", path=c["path"]), "winner_href": href("browse", path=c["history"]),
         "losers": [{**loser, "href": href("browse", path=loser["path"])} for loser in c["losers"]]}
        for c in found[:MAX_CONFLICTS]
    ]  # fmt: skip
    return {"rows": rows, "total": len(found)}


def _history_prefix(path: str) -> str:
    found = _AT.match(path)
    return f"{found.group(1)}/history" if found else "/history"


def _entry(vid: str, where: str, fields: dict[str, Any], here: bool) -> dict[str, Any]:
    status = fields.get("status")
    return {
        "id": vid, "href": href("browse", path=where), "valid_from": fields.get("valid_from"),
        "valid_to": fields.get("valid_to"), "status": _STATUS.get(str(status), status), "here": here,
        "missing": False,
    }  # fmt: skip


def _fields(provider: Provider, caller: Caller, where: str) -> dict[str, Any] | None:
    """The front matter of the version at ``where``, or None when it cannot be read."""
    try:
        text = provider.read(caller, where, length=MAX_SHOWN_BYTES).data.decode("utf-8")
    except (AfiError, UnicodeDecodeError):
        return None
    return split_front_matter(text)[0]


def timeline(provider: Provider, caller: Caller, path: str, fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The note's versions, newest first: those that superseded it, itself, then each version it
    supersedes, read from /history (or the instant's history under /.afi/at), each with what it is
    there: current, superseded, expired or scheduled."""
    prefix = _history_prefix(path)
    here = str(fields["id"])
    seen = {here}
    newer: list[dict[str, Any]] = []
    later = fields.get("superseded_by")
    while later and str(later) not in seen and len(newer) < MAX_VERSIONS - 1:
        seen.add(str(later))
        where = f"{prefix}/{later}.md"
        found = _fields(provider, caller, where)
        if found is None:
            newer.append({"id": str(later), "href": None, "missing": True, "here": False})
            break
        newer.append(_entry(str(later), where, found, False))
        later = found.get("superseded_by")
    versions = [*reversed(newer), _entry(here, f"{prefix}/{here}.md", fields, True)]
    older = fields.get("supersedes")
    while older and str(older) not in seen and len(versions) < MAX_VERSIONS:
        seen.add(str(older))
        where = f"{prefix}/{older}.md"
        found = _fields(provider, caller, where)
        if found is None:
            versions.append({"id": str(older), "href": None, "missing": True, "here": False})
            break
        versions.append(_entry(str(older), where, found, False))
        older = found.get("supersedes")
    return versions


def _transcript(text: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line or line.startswith("# "):
            continue
        found = _MESSAGE.match(line) or _LEDGER_LINE.match(line)
        if found is None:
            rows.append({"type": "scope" if line.startswith("> scope") else "other", "text": line.removeprefix("> ")})
            continue
        row = found.groupdict()
        row.setdefault("type", "message")
        rows.append(row)
    return rows


def note(provider: Provider, caller: Caller, entry: Entry) -> dict[str, Any]:
    """A file's page: a note's fields, rendered content and versions; a transcript; or a file's text."""
    result = provider.read(caller, entry.path, length=MAX_SHOWN_BYTES)
    context: dict[str, Any] = {
        "template": "note.html",
        "title": entry.path,
        "path": entry.path,
        "entry": entry,
        "crumbs": crumbs(parent(entry.path))[:],
        "name": posixpath.basename(entry.path),
        "can_edit": _writable(caller, entry),
        "truncated": not result.eof,
        "fields": [],
        "versions": [],
        "transcript": None,
        "html": None,
        "text": None,
        "plain": False,
        "render_chars": f"{RENDER_MAX_CHARS:,}",
        "render_marks": f"{RENDER_MAX_MARKS:,}",
        "at_form": entry.path.startswith(("/facts/", "/procedures/", "/files/", "/history/")),
        "history": _history_prefix(entry.path),
    }
    try:
        text = result.data.decode("utf-8")
    except UnicodeDecodeError:
        return context  # bytes a page cannot show: the size and times only
    context["text"] = text
    if entry.path.startswith("/sessions/") or (entry.path.startswith("/.afi/at/") and "/sessions/" in entry.path):
        context["transcript"] = _transcript(text)
        return context
    if entry.content_type.startswith("text/markdown") or entry.path.endswith(".md"):
        fields, body = split_front_matter(text)
        context["fields"] = ordered_fields(fields)
        context["html"] = render_markdown(body)
        context["plain"] = context["html"] is None
        if context["plain"]:
            context["text"] = body
        if fields.get("id") and entry.attributes.get("x-kind") not in (None, "episode", "session"):
            context["versions"] = timeline(provider, caller, entry.path, fields)
    return context


def ledger(provider: Provider, caller: Caller) -> dict[str, Any]:
    """The ledger: its sessions (transcripts) and its observations (episodes)."""
    sessions = provider.list(caller, "/sessions", limit=500)
    episodes = provider.list(caller, "/episodes", limit=500)
    return {
        "template": "ledger.html",
        "title": "Ledger",
        "sessions": [_row(e) for e in sorted(sessions.entries, key=lambda e: e.mtime, reverse=True)],
        "episodes": [_row(e) for e in sorted(episodes.entries, key=lambda e: e.mtime, reverse=True)],
    }


def _admin(provider: Provider) -> AdminProvider:
    if not isinstance(provider, AdminProvider):
        raise Unsupported("this provider keeps no audit log or keys")
    return provider


def audit(provider: Provider, caller: Caller, limit: int) -> dict[str, Any]:
    """The audit log of the caller's space, newest first."""
    rows = _admin(provider).audit_rows(caller, limit=limit)
    return {"template": "audit.html", "title": "Audit log", "rows": rows, "limit": limit}


def keys(provider: Provider, caller: Caller) -> dict[str, Any]:
    """The keys of the caller's space (needs afi:admin), and the stores it has synced with."""
    rows = _admin(provider).keys_list(caller)
    peers = provider.sync_status(caller) if isinstance(provider, SyncProvider) else []
    return {"template": "keys.html", "title": "API keys", "keys": rows, "peers": peers,
            "conflicts": conflicts(provider, caller)}  # fmt: skip

"""Every error AFI speaks, and how each binding renders it.

The hierarchy, one class per stable code (docs/afi.md, "Errors")::

    AfiError                      code        HTTP  errno          SSH exit
    ├── NotFound                  not_found    404  ENOENT         2
    ├── InvalidPath               invalid_path 400  EINVAL         2
    ├── Unsupported               unsupported  405  ENOSYS         2
    ├── Unauthorized              unauthorized 401  EACCES         2
    ├── Forbidden                 forbidden    403  EACCES/EROFS   2
    ├── RateLimited               rate_limited 429  EAGAIN         2  (retry_after is mandatory)
    ├── Conflict                  conflict     409  EEXIST         2
    ├── TooLarge                  too_large    413  EFBIG          2
    └── Internal                  internal     500  EIO            2

Bindings never invent codes: they map through :data:`HTTP_STATUS`, :data:`ERRNO` and
:data:`SSH_EXIT`, and a test fails when a code is missing from any of them.
"""

from __future__ import annotations

import errno
from typing import Any, ClassVar, Literal

ErrorCode = Literal[
    "not_found",
    "invalid_path",
    "unsupported",
    "unauthorized",
    "forbidden",
    "rate_limited",
    "conflict",
    "too_large",
    "internal",
]

__all__ = [
    "ERRNO",
    "ERROR_CODES",
    "HTTP_STATUS",
    "SSH_EXIT",
    "AfiError",
    "Conflict",
    "ErrorCode",
    "Forbidden",
    "Internal",
    "InvalidPath",
    "NotFound",
    "RateLimited",
    "TooLarge",
    "Unauthorized",
    "Unsupported",
    "error_from_dict",
]


class AfiError(Exception):
    """An AFI error: a stable ``code``, a message a person understands, and the path concerned.

    Raise a subclass; ``AfiError`` itself is only caught. ``to_dict()`` is the wire shape
    ``{code, message, path?, retry_after?}`` every binding sends.
    """

    code: ClassVar[ErrorCode] = "internal"

    def __init__(self, message: str, *, path: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.path is not None:
            body["path"] = self.path
        if self.retry_after is not None:
            body["retry_after"] = self.retry_after
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, path={self.path!r})"


class NotFound(AfiError):
    """The path does not exist, or the caller may not see it (the two are indistinguishable)."""

    code = "not_found"


class InvalidPath(AfiError):
    """The path (or, as the draft does for a bad regex, the request) is malformed."""

    code = "invalid_path"


class Unsupported(AfiError):
    """The provider does not offer this verb, mode or operation on this path."""

    code = "unsupported"


class Unauthorized(AfiError):
    """Credentials are missing or bad. Never used for a path the caller may not see."""

    code = "unauthorized"


class Forbidden(AfiError):
    """Valid credentials without the scope the operation needs (a write with a read-only key)."""

    code = "forbidden"


class RateLimited(AfiError):
    """Too many requests; ``retry_after`` (seconds) says when to come back."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: float, path: str | None = None) -> None:
        super().__init__(message, path=path, retry_after=retry_after)


class Conflict(AfiError):
    """The target exists, is not empty, or changed since the caller read it (``if_match``)."""

    code = "conflict"


class TooLarge(AfiError):
    """A body, file or note is over the configured cap."""

    code = "too_large"


class Internal(AfiError):
    """The provider failed; nothing was changed."""

    code = "internal"


_CLASSES: dict[str, type[AfiError]] = {
    cls.code: cls
    for cls in (
        NotFound,
        InvalidPath,
        Unsupported,
        Unauthorized,
        Forbidden,
        RateLimited,
        Conflict,
        TooLarge,
        Internal,
    )
}

ERROR_CODES: tuple[ErrorCode, ...] = tuple(_CLASSES)  # type: ignore[arg-type]

HTTP_STATUS: dict[str, int] = {
    "not_found": 404,
    "invalid_path": 400,
    "unsupported": 405,
    "unauthorized": 401,
    "forbidden": 403,
    "rate_limited": 429,
    "conflict": 409,
    "too_large": 413,
    "internal": 500,
}

ERRNO: dict[str, int] = {
    "not_found": errno.ENOENT,
    "invalid_path": errno.EINVAL,
    "unsupported": errno.ENOSYS,
    "unauthorized": errno.EACCES,
    "forbidden": errno.EACCES,
    "rate_limited": errno.EAGAIN,
    "conflict": errno.EEXIST,
    "too_large": errno.EFBIG,
    "internal": errno.EIO,
}

SSH_EXIT: dict[str, int] = dict.fromkeys(_CLASSES, 2)


def error_from_dict(body: dict[str, Any]) -> AfiError:
    """Given the wire shape of an error, return the matching :class:`AfiError` subclass instance."""
    code = str(body.get("code", "internal"))
    cls = _CLASSES.get(code, Internal)
    message = str(body.get("message", code))
    path = body.get("path")
    retry_after = body.get("retry_after")
    if cls is RateLimited:
        return RateLimited(message, path=path, retry_after=float(retry_after or 1.0))
    err = cls(message, path=path, retry_after=retry_after)
    return err

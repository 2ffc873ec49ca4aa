"""The HTTP/JSON binding: the FastAPI app (:mod:`.app`) and the uvicorn server it runs in (:mod:`.server`)."""

from .app import DEFAULT_MAX_BODY_BYTES, create_app
from .server import Limits, ServerConfig, default_max_connections

__all__ = ["DEFAULT_MAX_BODY_BYTES", "Limits", "ServerConfig", "create_app", "default_max_connections"]

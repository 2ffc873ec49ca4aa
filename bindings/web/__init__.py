"""The web page for people (``/``): browse, search, edit and trace the memory in a browser (:mod:`.app`)."""

from .app import mount_web

__all__ = ["mount_web"]

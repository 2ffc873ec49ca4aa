"""The SSH binding: a shell of file commands, SFTP and a JSON-RPC subsystem over one server."""

from .server import KeyVerifier, SshLimits, agents_snippet, load_host_key, start_ssh_server

__all__ = ["KeyVerifier", "SshLimits", "agents_snippet", "load_host_key", "start_ssh_server"]

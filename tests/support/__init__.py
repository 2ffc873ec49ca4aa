"""Helpers the tests share: servers, mounts, SSH and MCP clients, the CLI, hostile corpora. No test lives here."""

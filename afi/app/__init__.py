"""The wiring room: the one place that assembles a provider with its bindings.

Dependencies point ``bindings → afi ← providers``; this package sits on top and alone imports both,
so the command modules (:mod:`afi.commands`) only parse options and call it:

- :mod:`.local`: :func:`~.local.open_provider` (the memory provider over a store file and a workspace
  root), the local owner, a space's fabric and ledger, for the CLI's one-shot commands;
- :mod:`.serve`: the HTTP app with MCP at ``/mcp`` (:class:`~.serve.AppSpec`), one process or workers;
- :mod:`.mcp`: the MCP binding over the memory provider (a fabric per session), stdio and HTTP;
- :mod:`.ssh`: the SSH server, alone or beside the HTTP one;
- :mod:`.mount`: the FUSE mount;
- :mod:`.db`: the store file's schema (``afi db status``, ``afi db migrate``).

Each submodule imports its binding (FastAPI, the MCP SDK, asyncssh, pyfuse3) at the top, so this
package imports none of them: a command loads only the room it uses.
"""

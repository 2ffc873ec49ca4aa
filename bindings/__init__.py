"""The transport bindings (import name ``afi.bindings``): thin translations into provider verbs."""

"""AFI providers shipped with afi-memory (import name ``afi.providers``)."""

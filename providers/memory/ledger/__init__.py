"""The observational ledger: sessions, their branch of entries, observations, and conversation search over them."""

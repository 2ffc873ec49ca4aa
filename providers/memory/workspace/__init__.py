"""A space's workspace: the file jail, the jailed real files and their text index, quotas, the write lock."""

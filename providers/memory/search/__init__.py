"""Search over a space's tree: grep paged from trigram candidates (and their cache), semantic, x-conversation."""

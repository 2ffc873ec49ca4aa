"""The tree a space shows: where a path lands (locate), and one handler per area answering its verbs."""

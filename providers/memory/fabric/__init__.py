"""The engine: typed notes on SQLite, recall, consolidation, working blocks and the governed tools.

See docs/memory-fabric.md.
"""

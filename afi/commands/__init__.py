"""The ``afi`` subcommands, one module per concern; ``afi.cli`` registers them."""

"""The composition root: the `vigil` command line (`main.py`) and one module per subcommand
that wires the layered packages together, importing each only when its subcommand runs."""

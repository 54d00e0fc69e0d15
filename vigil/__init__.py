"""Vigil's composition root: the shared settings object and the `vigil` command line.

The layered packages (serving, drift, storage, alerts, dashboards) keep their one-way arrows;
this package sits beside them: `vigil.config` is a leaf every package may import, and
`vigil.cli` is the root that wires them together (importing each lazily, per subcommand).
"""

"""Tools for trying and developing Vigil, apart from the product: `vigil doctor` (what the
machine has; readies the tests, standard library only) and `vigil demo` (a drift caught end to
end on a fresh database)."""

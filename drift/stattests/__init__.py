"""The built-in drift tests, one module each; every module registers its TestSpec on import
(drift.registry discovers them). A new test is a new module here plus its tests."""

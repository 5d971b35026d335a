"""minimm: a small, readable re-implementation of MMEngine's registry, hooks and runner."""
__version__ = '0.1.0'

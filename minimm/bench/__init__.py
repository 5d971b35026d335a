"""Benchmarks run by `minimm bench NAME` (not timed tests): each prints a table of ratios."""

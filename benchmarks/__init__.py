"""Benchmarks (never run as tests): `python -m benchmarks` runs them all and prints one table.

They import the mock runtime from `tests/harness.py` (the same recorder the tests use), so the
numbers describe exactly the program the tests check.
"""

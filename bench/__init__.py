"""Benchmarks: ``python -m bench remember|recall|locomo|all``; each prints a table and writes JSON.

Every figure is measured against a baseline in the same run (ratios), never asserted by a timed test.
"""

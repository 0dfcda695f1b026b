"""Benchmarks: ``python -m benchmarks.run [NAME ...]`` (or ``make bench``)."""

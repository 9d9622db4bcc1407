"""amibuild's benchmarks: commands that print figures and ratios (see README.md, run.py)."""

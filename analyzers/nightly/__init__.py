"""Nightly reports of production jobs (docs/nightly.md): one night's model (night.py), the
thresholds of `--fail-if` (checks.py) and the job's history (history.py).
"""

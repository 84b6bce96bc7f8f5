"""Where the step time went (docs/attribution.md): the attribution tables written at ingest
(attribution.py), the idle split (idle.py) and the stragglers (stragglers.py).
"""

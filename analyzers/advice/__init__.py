"""Recommendations with predicted gains (docs/advisor.md): the checks and their wording
(recommend.py), the all_to_all imbalance check (alltoall.py) and the memory checks (memory.py).
"""

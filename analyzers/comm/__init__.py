"""Communication (docs/attribution.md, docs/alltoall.md): collective statistics and links
(collectives.py), what each collective is for (roles.py), all_to_all imbalance
(alltoall.py), and NCCL's own evidence (nccl.py).
"""

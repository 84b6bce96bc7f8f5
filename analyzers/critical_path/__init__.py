"""The cross-rank critical path (docs/critical_path.md): the run's dependency graph as arrays
(graph.py), one step's path as segments (path.py), the what-if's max-plus re-evaluation
(whatif.py), and the report section and `stepscope whatif` built on them (analysis.py).
"""

"""The parallel layout (layout.py) and the pipeline: stages and microbatches (pipeline.py),
the bubble against the 1F1B theory (bubble.py).
"""

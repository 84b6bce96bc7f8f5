"""What changed between two runs and what it cost in MFU (docs/diff.md).
"""

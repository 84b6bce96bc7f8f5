"""The layout planner (docs/planner.md): layouts ranked by predicted MFU (layouts.py), the
calibration on a measured run (calibrate.py), predictions of another layout from it
(predict.py), `plan --from RUN` (from_run.py) and run B as expected from run A (expected.py).
"""

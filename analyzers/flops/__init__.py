"""FLOPs and how far from the hardware (docs/mfu.md, docs/roofline.md): the peak table
(peaks.py), the model spec (model_spec.py), the counted ops (counted_ops.py) and what
shapes may claim (bound.py), MFU/HFU with its waterfall (mfu.py), kernels against their
roofline (roofline.py).
"""

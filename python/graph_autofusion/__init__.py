"""graph-autofusion from Python: fuse ONNX models, run them, explain and verify the fusion.

    import graph_autofusion as gaf
    fused, report = gaf.fuse("model.onnx", opt_level=3)    # fused ONNX bytes, report dict
    s = gaf.Session("model.onnx")                          # fused in memory, compiled for the CPU runtime
    outputs = s.run({"x": numpy_array})                    # {output name: numpy array}
"""
import json as _json

from ._core import Session, explain, verify
from ._core import fuse as _fuse

__all__ = ["Session", "explain", "fuse", "verify"]


def fuse(model, opt_level=3, rules=None, target="cpu-host"):
    """Fuses `model` (a path or ONNX bytes); returns (fused ONNX bytes, the fusion report as a dict)."""
    data, report = _fuse(model, opt_level, rules, target)
    return data, _json.loads(report)

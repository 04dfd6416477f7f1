"""graph-autofusion from Python: fuse ONNX models, run them, explain and verify the fusion.

    import graph_autofusion as gaf
    fused, report = gaf.fuse("model.onnx", opt_level=3)    # fused ONNX bytes, report dict
    s = gaf.Session("model.onnx")                          # fused in memory, compiled for the CPU runtime
    outputs = s.run({"x": numpy_array})                    # {output name: numpy array}
"""
import json as _json

from ._core import Session, explain, profile, verify
from ._core import fuse as _fuse

__all__ = ["Session", "explain", "from_torch", "fuse", "profile", "verify"]


def fuse(model, opt_level=3, rules=None, target="cpu-host"):
    """Fuses `model` (a path or ONNX bytes); returns (fused ONNX bytes, the fusion report as a dict)."""
    data, report = _fuse(model, opt_level, rules, target)
    return data, _json.loads(report)


def from_torch(module, example_inputs, path=None, dynamic_axes=None, opset=17, **session_args):
    """Exports a PyTorch module with torch.onnx.export and returns a Session over it.

    `example_inputs` is a tensor or a tuple of them; inputs are named input_0, input_1, ... and outputs output_0,
    ...; `dynamic_axes` is torch.onnx.export's ({name: {axis: symbol}}). The model is written to `path` (a
    temporary file when None, removed once loaded). `session_args` go to Session (opt_level, rules, device).
    Needs torch (ImportError naming it otherwise)."""
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("from_torch needs PyTorch (pip install torch, or Debian's python3-torch)") from e
    import os
    import tempfile
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    names = [f"input_{i}" for i in range(len(inputs))]
    with torch.no_grad():
        probe = module(*inputs)
    outputs = [f"output_{i}" for i in range(len(probe) if isinstance(probe, (tuple, list)) else 1)]
    target = path or tempfile.NamedTemporaryFile(suffix=".onnx", delete=False).name
    try:
        torch.onnx.export(module, inputs, target, input_names=names, output_names=outputs,
                          dynamic_axes=dynamic_axes, opset_version=opset)
        return Session(target, **session_args)
    finally:
        if path is None and os.path.exists(target):
            os.remove(target)

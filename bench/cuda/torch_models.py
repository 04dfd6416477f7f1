#!/usr/bin/env python3
"""PyTorch definitions of the CUDA benchmark models, and their ONNX export.

    python3 bench/cuda/torch_models.py export DIR [--only a,b] [--opset 13] [--budget-s 150]
    python3 bench/cuda/torch_models.py list

`export` writes DIR/<name>/model.onnx and DIR/<name>/inputs.json (input names, shapes, dtype, the exporter used,
the bytes a bandwidth model must move). torch_peers.py builds the same modules from this file, so the ONNX graphs
our binary runs and the modules PyTorch times are one definition. torch is imported lazily: `list` and the
metadata below work without it (torch_peers.py's `merge` uses them on a machine with no torch).

The first four match /work/shared/models (made with PyTorch 1.13, opset 13); `attention` is written with
matmul/softmax (not F.scaled_dot_product_attention) so its graph is MatMul/Div/Softmax/MatMul; ew, softmax and
layernorm are bandwidth models on 4096 x 4096 fp32 tensors (64 MiB each).
"""
import argparse
import json
import math
import os
import sys
import time

MiB = 1 << 20
N_BW = 4096
T_BW = N_BW * N_BW * 4  # one 4096 x 4096 fp32 tensor: 64 MiB

# name -> inputs [(name, shape)], bytes moved at least (each input read once, each output written once; None for
# compute-bound models), and what it is.
MODELS = {
    "transformer_layer": {
        "inputs": [("x", [1, 128, 768])],
        "bytes_moved": None,
        "what": "nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True), eval",
    },
    "mlp": {
        "inputs": [("x", [256, 1024])],
        "bytes_moved": None,
        "what": "Linear(1024,4096) -> GELU (erf) -> Linear(4096,1024)",
    },
    "resnet18": {
        "inputs": [("x", [1, 3, 224, 224])],
        "bytes_moved": None,
        "what": "torchvision resnet18(weights=None), eval",
    },
    "mobilenet_v2": {
        "inputs": [("x", [1, 3, 224, 224])],
        "bytes_moved": None,
        "what": "torchvision mobilenet_v2(weights=None), eval",
    },
    "attention": {
        "inputs": [("q", [1, 12, 512, 64]), ("k", [1, 12, 512, 64]), ("v", [1, 12, 512, 64])],
        "bytes_moved": 4 * (1 * 12 * 512 * 64 * 4),  # q, k, v read, output written
        "what": "softmax(q @ k^T / sqrt(64), -1) @ v, matmul/softmax written out",
    },
    "ew": {
        "inputs": [("x", [N_BW, N_BW]), ("y", [N_BW, N_BW])],
        "bytes_moved": 3 * T_BW,
        "what": "x * sigmoid(x) + y on 4096 x 4096 fp32",
    },
    "softmax": {
        "inputs": [("x", [N_BW, N_BW])],
        "bytes_moved": 2 * T_BW,
        "what": "softmax over the last axis of 4096 x 4096 fp32",
    },
    "layernorm": {
        "inputs": [("x", [N_BW, N_BW])],
        "bytes_moved": 2 * T_BW + 2 * N_BW * 4,
        "what": "nn.LayerNorm(4096) on 4096 x 4096 fp32",
    },
}
ORDER = list(MODELS)
BANDWIDTH_MODELS = ["ew", "softmax", "layernorm"]


def log(msg):
    print(f"[torch_models {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def build(name):
    """A fresh module for `name` (fp32, eval, on the CPU), weights from torch.manual_seed(0)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "transformer_layer":
        m = nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, batch_first=True)
    elif name == "mlp":
        m = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
    elif name == "resnet18":
        import torchvision

        m = torchvision.models.resnet18(weights=None)
    elif name == "mobilenet_v2":
        import torchvision

        m = torchvision.models.mobilenet_v2(weights=None)
    elif name == "attention":
        m = Attention()
    elif name == "ew":
        m = SiluAdd()
    elif name == "softmax":
        m = LastAxisSoftmax()
    elif name == "layernorm":
        m = nn.LayerNorm(N_BW)
    else:
        raise KeyError(f"unknown model {name!r} (known: {', '.join(ORDER)})")
    return m.eval()


def make_inputs(name, device="cpu", dtype=None, seed=0):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for _, shape in MODELS[name]["inputs"]:
        t = torch.randn(*shape, generator=g)
        if dtype is not None:
            t = t.to(dtype)
        out.append(t.to(device))
    return tuple(out)


def _modules():
    # The small modules are defined lazily too, so importing this file needs no torch.
    import torch
    from torch import nn

    class _Attention(nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(64)
            return torch.matmul(torch.softmax(s, dim=-1), v)

    class _SiluAdd(nn.Module):
        def forward(self, x, y):
            return x * torch.sigmoid(x) + y

    class _LastAxisSoftmax(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)

    return _Attention, _SiluAdd, _LastAxisSoftmax


def Attention():
    return _modules()[0]()


def SiluAdd():
    return _modules()[1]()


def LastAxisSoftmax():
    return _modules()[2]()


def _internalize(path):
    """Fold an external-data side file back into model.onnx (our loader wants one file)."""
    side = [f for f in os.listdir(os.path.dirname(path)) if f not in ("model.onnx", "inputs.json")]
    if not side:
        return None
    import onnx

    m = onnx.load(path, load_external_data=True)
    onnx.save_model(m, path, save_as_external_data=False)
    for f in side:
        try:
            os.remove(os.path.join(os.path.dirname(path), f))
        except OSError:
            pass
    return side


def export_one(name, out_dir, opset, allow_dynamo=True):
    import torch

    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    model = build(name)
    args = make_inputs(name)
    in_names = [n for n, _ in MODELS[name]["inputs"]]
    info = {"name": name, "what": MODELS[name]["what"], "dtype": "float32",
            "inputs": [{"name": n, "shape": s, "dtype": "float32"} for n, s in MODELS[name]["inputs"]],
            "outputs": ["output"], "bytes_moved": MODELS[name]["bytes_moved"], "torch": torch.__version__}
    # The fused native TransformerEncoderLayer/MHA path cannot be exported: take the decomposed one (switched off
    # where torch can; and grad stays enabled, which the fast path also refuses).
    fast = None
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        fast = mha.get_fastpath_enabled()
        mha.set_fastpath_enabled(False)
    errors = []
    try:
        t0 = time.time()
        try:
            torch.onnx.export(model, args, path, input_names=in_names, output_names=["output"],
                              opset_version=opset, do_constant_folding=True, dynamo=False)
            info.update(exporter="torchscript (dynamo=False)", opset=opset)
        except Exception as e:  # noqa: BLE001 - any exporter failure: try the other exporter
            errors.append(f"dynamo=False: {type(e).__name__}: {e}")
            log(f"{name}: dynamo=False export failed ({type(e).__name__}: {str(e)[:300]}); retrying with dynamo=True")
            if not allow_dynamo:
                raise
            done = False
            for kw in ({"opset_version": opset, "external_data": False}, {"opset_version": opset},
                       {"external_data": False}, {}):
                try:
                    torch.onnx.export(model, args, path, input_names=in_names, output_names=["output"],
                                      dynamo=True, **kw)
                    info.update(exporter=f"dynamo (dynamo=True, {kw})", opset=kw.get("opset_version"))
                    done = True
                    break
                except Exception as e2:  # noqa: BLE001
                    errors.append(f"dynamo=True {kw}: {type(e2).__name__}: {e2}")
                    log(f"{name}: dynamo=True {kw} failed: {type(e2).__name__}: {str(e2)[:300]}")
            if not done:
                raise RuntimeError(f"{name}: every exporter failed")
        info["export_s"] = round(time.time() - t0, 2)
    finally:
        if fast is not None:
            mha.set_fastpath_enabled(fast)
    info["export_errors"] = [e[:2000] for e in errors]
    try:
        side = _internalize(path)
        if side:
            info["internalized_external_data"] = side
    except Exception as e:  # noqa: BLE001
        info["internalize_error"] = f"{type(e).__name__}: {e}"
    try:
        import onnx

        m = onnx.load(path)
        ops = {}
        for n in m.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        info["nodes"] = len(m.graph.node)
        info["op_types"] = dict(sorted(ops.items()))
        info["opset_imports"] = {o.domain or "ai.onnx": o.version for o in m.opset_import}
        info["graph_inputs"] = [i.name for i in m.graph.input]
    except Exception as e:  # noqa: BLE001
        info["onnx_inspect_error"] = f"{type(e).__name__}: {e}"
    info["model_bytes"] = os.path.getsize(path)
    with open(os.path.join(d, "inputs.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def cmd_export(a):
    t_start = time.time()
    names = a.only.split(",") if a.only else ORDER
    failed = []
    for name in names:
        left = a.budget_s - (time.time() - t_start)
        if left < 5:
            log(f"{name}: SKIPPED (export budget of {a.budget_s} s spent)")
            failed.append(name)
            continue
        t0 = time.time()
        try:
            info = export_one(name, a.dir, a.opset, allow_dynamo=left > 30)
            log(f"{name}: OK {info['exporter']}, {info.get('nodes', '?')} nodes, {info['model_bytes'] / MiB:.1f} MiB,"
                f" {time.time() - t0:.1f} s; ops {info.get('op_types', {})}")
        except Exception as e:  # noqa: BLE001
            log(f"{name}: EXPORT FAILED after {time.time() - t0:.1f} s: {type(e).__name__}: {str(e)[:1000]}")
            failed.append(name)
    log(f"exported {len(names) - len(failed)}/{len(names)} in {time.time() - t_start:.1f} s"
        + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 0 if not failed else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write DIR/<name>/model.onnx and inputs.json")
    e.add_argument("dir")
    e.add_argument("--only", default="", help="comma-separated model names (default: all)")
    e.add_argument("--opset", type=int, default=13)
    e.add_argument("--budget-s", type=float, default=150.0, help="skip the remaining models after this long")
    sub.add_parser("list", help="print the models and their inputs")
    a = p.parse_args(argv)
    if a.cmd == "list":
        for n in ORDER:
            print(f"{n:18} {MODELS[n]['inputs']}  {MODELS[n]['what']}")
        return 0
    import torch  # noqa: F401 - fail here, clearly, when there is no torch

    log(f"torch {torch.__version__}, exporting to {a.dir} (opset {a.opset})")
    return cmd_export(a)


if __name__ == "__main__":
    sys.exit(main())

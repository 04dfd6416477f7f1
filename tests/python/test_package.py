"""The Python package against the models gaf_make_test_models writes: fuse, Session.run, explain, verify, generate,
errors as exceptions; then the README's Python example, run as written.

    test_package.py MODELS_DIR README.md        (PYTHONPATH: <build>/python)
"""
import json
import os
import re
import sys
import tempfile

import numpy as np

import graph_autofusion as gaf

models, readme = sys.argv[1], sys.argv[2]
mlp = os.path.abspath(os.path.join(models, "mlp", "model.onnx"))
failures = []


def check(name, cond, detail=""):
    if not cond:
        failures.append(f"{name}: {detail}")


# fuse: bytes back, a report with kernels before and after.
fused, report = gaf.fuse(mlp, opt_level=3)
check("fuse-bytes", isinstance(fused, bytes) and len(fused) > 1000, type(fused))
check("fuse-report", report["after"]["kernels"] < report["before"]["kernels"], json.dumps(report)[:300])

# Session on the path (fused) and unfused: the same outputs on the same input.
s = gaf.Session(mlp)
plain = gaf.Session(mlp, opt_level=0)
check("inputs", s.input_names == plain.input_names, (s.input_names, plain.input_names))
name = s.input_names[0]
shape = [d if isinstance(d, int) else 2 for d in s.input_shapes[0]]
a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
out_fused, out_plain = s.run({name: a}), plain.run({name: a})
check("outputs", list(out_fused) == s.output_names, (list(out_fused), s.output_names))
for k in out_plain:
    check("run-match-" + k, np.allclose(out_fused[k], out_plain[k], rtol=1e-3, atol=1e-5),
          float(np.abs(out_fused[k] - out_plain[k]).max()))
from_bytes = gaf.Session(fused, opt_level=0)
for k in out_plain:
    check("bytes-session-" + k, np.allclose(from_bytes.run({name: a})[k], out_plain[k], rtol=1e-3, atol=1e-5))

# explain and verify
check("explain", "fused" in gaf.explain(mlp), gaf.explain(mlp)[:200])
v = gaf.verify(mlp)
check("verify", v["ok"] and "match" in v["text"], v["text"])

# generate with the GPT-2-style decoder: the unfused session picks the same tokens.
dec = os.path.join(models, "decoders", "gpt2.onnx")
g1 = gaf.Session(dec).generate([5, 17, 3], tokens=8, prefill_runs=2)
g0 = gaf.Session(dec, opt_level=0).generate([5, 17, 3], tokens=8)
check("generate", g1["ids"] == g0["ids"] and len(g1["ids"]) == 8, (g1, g0))
check("generate-prefill-warm", g1["prefill_warm_ms"] > 0 and g0["prefill_warm_ms"] == 0, (g1, g0))
check("generate-prefill-after-steps", g1["prefill_after_steps_ms"] > 0 and g0["prefill_after_steps_ms"] == 0, (g1, g0))
check("generate-kv", g1["kv_pairs"] == 4 and g0["kv_pairs"] == 4, (g1, g0))
# Only the last position's logits: the same tokens, one row of logits for the prompt instead of three.
g2 = gaf.Session(dec, last_logits=True).generate([5, 17, 3], tokens=8)
check("generate-last-logits", g2["ids"] == g1["ids"] and g2["prefill_logits_rows"] == 1
      and g1["prefill_logits_rows"] == 3, (g2, g1))
try:
    gaf.Session(mlp, last_logits=True)
    check("last-logits-refused", False, "no error")
except Exception as e:  # noqa: BLE001 - the binding raises gaf's error as RuntimeError
    check("last-logits-refused", "last_logits=True" in str(e), str(e))
check("generate-weights", g1["weights_mb"] > 0 and 0 <= g1["weights_packed_only_mb"] <= g1["weights_mb"], g1)
check("generate-rss", g1["rss_anon_mb"] >= g1["weights_mb"] - g1["weights_packed_only_mb"] > 0.1
      and g1["rss_file_mb"] > 0 and g1["rss_anon_mb"] + g1["rss_file_mb"] <= g1["peak_rss_mb"] + 1e-6, g1)

# A decode loop written in Python with the KV cache in place: the same logits as a loop fed plain arrays; each
# present is a strided view of one buffer that stays where it is, and fed back it crosses without a copy.
cached, loop = gaf.Session(dec), gaf.Session(dec)
pairs = cached.enable_kv_cache(64)
check("kv-pairs", len(pairs) == 4 and all(p.startswith("past") and q.startswith("present") for p, q in pairs), pairs)
past_shape = [0 if d == "past" else (1 if isinstance(d, str) else d) for d in loop.input_shapes[1]]
pasts_a = {p: np.zeros(past_shape, np.float32) for p, _ in pairs}
pasts_b = dict(pasts_a)
ids, where = np.array([[5, 17, 3]], np.int64), {}
for step in range(6):
    ra, rb = loop.run({"input_ids": ids, **pasts_a}), cached.run({"input_ids": ids, **pasts_b})
    check(f"kv-logits-{step}", np.array_equal(ra["logits"], rb["logits"]), step)
    for p, q in pairs:
        check(f"kv-{q}-{step}", np.array_equal(ra[q], rb[q]) and not rb[q].flags["C_CONTIGUOUS"], rb[q].strides)
        addr = rb[q].__array_interface__["data"][0]
        check(f"kv-in-place-{q}-{step}", where.setdefault(q, addr) == addr, (where[q], addr))
        pasts_a[p], pasts_b[p] = ra[q], rb[q]
    ids = np.array([[int(np.argmax(ra["logits"][0, -1]))]], np.int64)

# A sequence in and out (seq_scores): a list of arrays in, a list back; fused and unfused agree with numpy.
seq_model = os.path.join(models, "seq_scores", "model.onnx")
boxes = [np.random.default_rng(k).uniform(-1, 1, (n, 4)).astype(np.float32) for k, n in enumerate([2, 0, 4])]
for level in (0, 3):
    r = gaf.Session(seq_model, opt_level=level).run({"boxes": boxes})
    check(f"seq-list-{level}", isinstance(r["per_image"], list) and [len(x) for x in r["per_image"]] == [2, 0, 4],
          type(r["per_image"]))
    check(f"seq-concat-{level}", r["scores"].shape == (6,) and np.allclose(np.concatenate(r["per_image"]), r["scores"]),
          r["scores"])
    if level:
        check("seq-fused", np.allclose(r["scores"], plain_scores, rtol=1e-5, atol=1e-6), (r["scores"], plain_scores))
    else:
        plain_scores = r["scores"]
v = gaf.verify(seq_model, inputs={"boxes": boxes})
check("seq-verify", v["ok"] and "per_image: match" in v["text"], v["text"])
check("seq-profile", "SequenceMap" in gaf.profile(seq_model, inputs={"boxes": boxes}, iterations=2), "")
try:
    gaf.verify(seq_model)
    check("seq-random", False, "random inputs made a sequence")
except Exception as e:  # noqa: BLE001
    check("seq-random", "inputs= in Python" in str(e), str(e))
try:
    gaf.Session(seq_model).run({"boxes": boxes[0]})
    check("seq-not-list", False, "an array fed a sequence input")
except Exception as e:  # noqa: BLE001
    check("seq-not-list", "give a list of arrays" in str(e), str(e))

# Errors are exceptions with the tool's message.
try:
    gaf.Session(os.path.join(models, "nope.onnx"))
    failures.append("missing file: no exception")
except RuntimeError as e:
    check("missing-file-message", "no such file" in str(e), str(e))
try:
    s.run({name: np.zeros((2, 3), dtype=np.float32)})
    failures.append("wrong shape: no exception")
except RuntimeError as e:
    check("wrong-shape-message", name in str(e) or "shape" in str(e), str(e))

try:
    s.run({name: np.zeros(shape, dtype=np.complex64)})
    failures.append("complex input: no exception")
except RuntimeError as e:
    check("dtype-message", "complex64" in str(e) and name in str(e), str(e))

# Outputs share the session's memory (no copy) and stay valid after the session is gone.
out_again = gaf.Session(mlp).run({name: a})
check("zero-copy-owned", all(not v.flags["OWNDATA"] for v in out_again.values()), [v.flags for v in out_again.values()])
check("zero-copy-values", all(np.allclose(out_again[k], out_plain[k], rtol=1e-3, atol=1e-5) for k in out_plain))

# profile: the table as text.
check("profile", "by op type" in gaf.profile(mlp, iterations=1), "")

# from_torch, where PyTorch is installed: the module's outputs.
try:
    import torch
except ImportError:
    torch = None
    print("python: no torch here: from_torch not checked")
if torch is not None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    xt = torch.randn(3, 8)
    ts = gaf.from_torch(net, xt)
    got = ts.run({"input_0": xt.numpy()})["output_0"]
    check("from-torch", np.allclose(got, net(xt).detach().numpy(), rtol=1e-4, atol=1e-5), got)

# device="cuda": the same outputs as the CPU where a GPU is; elsewhere one RuntimeError saying why.
try:
    g = gaf.Session(mlp, device="cuda")
    out_gpu = g.run({name: a})
    out_cpu = s.run({name: a})
    check("cuda-matches-cpu", all(np.allclose(out_gpu[k], out_cpu[k], rtol=1e-4, atol=1e-5) for k in out_cpu))
except RuntimeError as e:
    check("cuda-absent-message", "device='cuda'" in str(e) and "CUDA" in str(e), str(e))
# max_memory: a run needing more raises before it allocates; enough runs; a bad size is an error naming it.
try:
    gaf.Session(mlp, max_memory="10K").run({name: a})
    failures.append("max_memory 10K: no exception")
except RuntimeError as e:
    check("max-memory-message", "--max-memory" in str(e) and "needs" in str(e), str(e))
check("max-memory-enough", np.allclose(gaf.Session(mlp, max_memory=1 << 30).run({name: a})[s.output_names[0]],
                                       out_plain[s.output_names[0]], rtol=1e-3, atol=1e-5))
try:
    gaf.Session(mlp, max_memory="lots")
    failures.append("max_memory lots: no exception")
except RuntimeError as e:
    check("max-memory-bad", "max_memory='lots'" in str(e), str(e))
try:
    gaf.Session(mlp, device="tpu")
    failures.append("device tpu: no exception")
except RuntimeError as e:
    check("device-message", "'tpu'" in str(e), str(e))

# The README's example, as written (MODEL replaced by the generated mlp).
blocks = re.findall(r"```python\n(.*?)```", open(readme).read(), re.S)
check("readme-example", len(blocks) == 1, f"{len(blocks)} python blocks in the README")
if blocks:
    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            code = blocks[0].replace('"model.onnx"', repr(mlp))
            exec(compile(code, "README.md", "exec"), {})
        except Exception as e:  # noqa: BLE001 - any failure of the example is a test failure
            failures.append(f"readme-example: {type(e).__name__}: {e}")
        finally:
            os.chdir(cwd)

for f in failures:
    print("FAIL", f)
print(f"python: {'FAILED' if failures else 'ok'} ({len(failures)} failures)")
sys.exit(1 if failures else 0)

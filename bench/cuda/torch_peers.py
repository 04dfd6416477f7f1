#!/usr/bin/env python3
"""PyTorch eager and torch.compile on the CUDA benchmark models; and the merge of one device check's results.

    python3 bench/cuda/torch_peers.py run OUT.json [--budget-s 280] [--iters 100]
    python3 bench/cuda/torch_peers.py merge --res-dir /tmp/res --models-dir DIR --peers OUT.json \
            --out-json results.json --out-md summary.md

`run` (needs torch and a CUDA GPU) times, with CUDA events around each of >= 50 runs after a warm-up (median ms),
the modules of torch_models.py at batch 1 in fp32 (TF32 off) and bf16: eager, and torch.compile(model) (default mode;
the first call's compile time is recorded). For each it counts the CUDA kernels one run launches (torch.profiler: the
events whose device_type is CUDA, after warm-up). It also measures the device-to-device copy bandwidth (1 GiB,
median of 20, bytes read + written). Cheap items run first, then the compiles in priority order; an item that would
not fit in what is left of --budget-s is skipped and named. OUT.json is rewritten after every item, so a run killed
from outside still leaves what it measured.

`merge` needs no torch: it gathers check.sh's files (our verify/bench JSON, step timings, failures, GPU facts) and
the peers' JSON into one results.json and a readable summary.md.
"""
import argparse
import json
import os
import signal
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402

GiB = 1 << 30


def log(msg):
    print(f"[torch_peers {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------------------------------------------
# run
# ----------------------------------------------------------------------------------------------------------------


class ItemTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise ItemTimeout("item time limit reached")


class Runner:
    def __init__(self, out_path, budget_s, iters, device="cuda", only=()):
        import torch

        self.torch = torch
        self.device = device  # "cpu" only to test this script's plumbing on a machine without a GPU
        self.only = set(only)  # model names; empty: all
        self.out_path = out_path
        self.t0 = time.time()
        self.budget_s = budget_s
        self.iters = max(50, iters)
        self.res = {"env": {}, "copy_bandwidth": None, "items": {}, "skipped": [], "errors": [],
                    "budget_s": budget_s, "iters": self.iters}
        signal.signal(signal.SIGALRM, _alarm)

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def left(self):
        return self.budget_s - (time.time() - self.t0)

    def save(self):
        self.res["elapsed_s"] = round(time.time() - self.t0, 1)
        tmp = self.out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.res, f, indent=1, default=str)
        os.replace(tmp, self.out_path)

    def put(self, model, dtype, variant, value):
        if value is None:  # failed or skipped: named in errors / skipped
            return
        self.res["items"].setdefault(model, {}).setdefault(dtype, {})[variant] = value

    # One item: skipped when `need_s` does not fit in what is left; stopped by SIGALRM at what is left.
    def item(self, label, need_s, fn):
        if self.only and label.split()[0] not in self.only | {"env", "copy_bandwidth"}:
            return None
        left = self.left()
        if left < need_s:
            log(f"SKIP {label}: needs ~{need_s:.0f} s, {left:.0f} s left")
            self.res["skipped"].append({"item": label, "need_s": need_s, "left_s": round(left, 1)})
            self.save()
            return None
        t = time.time()
        signal.alarm(max(1, int(left)))
        try:
            v = fn()
            signal.alarm(0)
            log(f"done {label} in {time.time() - t:.1f} s: {_short(v)}")
            return v
        except BaseException as e:  # noqa: BLE001 - also ItemTimeout; KeyboardInterrupt/SystemExit re-raised
            signal.alarm(0)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            msg = f"{type(e).__name__}: {str(e)[:1500]}"
            log(f"FAIL {label} after {time.time() - t:.1f} s: {msg}")
            self.res["errors"].append({"item": label, "error": msg, "trace": traceback.format_exc()[-3000:]})
            try:
                self.sync()
            except Exception as e2:  # noqa: BLE001
                self.res["errors"].append({"item": label + " (synchronize after)", "error": str(e2)[:500]})
            if isinstance(e, ItemTimeout):
                try:
                    self.torch._dynamo.reset()
                except Exception:  # noqa: BLE001
                    pass
            return None
        finally:
            self.save()

    # -- measurement primitives --------------------------------------------------------------------------------

    def time_cuda(self, fn, iters=None, warmup=5):
        torch = self.torch
        iters = iters or self.iters
        for _ in range(warmup):
            fn()
        if self.device == "cpu":
            ms = []
            for _ in range(iters):
                t = time.perf_counter()
                fn()
                ms.append((time.perf_counter() - t) * 1e3)
            ms.sort()
            return {"median_ms": round(statistics.median(ms), 5), "min_ms": round(ms[0], 5), "iters": iters,
                    "timer": "perf_counter (cpu test mode)"}
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i in range(iters):
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        ms = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
        # Back to back (no event between runs): the throughput view.
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        torch.cuda.synchronize()
        return {"median_ms": round(statistics.median(ms), 5), "min_ms": round(ms[0], 5),
                "p10_ms": round(ms[len(ms) // 10], 5), "p90_ms": round(ms[(len(ms) * 9) // 10], 5),
                "back_to_back_mean_ms": round(a.elapsed_time(b) / iters, 5), "iters": iters}

    def count_kernels(self, fn):
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        fn()
        self.sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            self.sync()
        cuda_t = torch.autograd.DeviceType.CUDA
        evs = [e for e in prof.events() if getattr(e, "device_type", None) == cuda_t]
        names = [e.name for e in evs]
        copies = [n for n in names if n.startswith(("Memcpy", "Memset", "memcpy", "memset"))]
        kernels = [n for n in names if n not in copies]
        uniq = {}
        for n in kernels:
            uniq[n[:120]] = uniq.get(n[:120], 0) + 1
        top = sorted(uniq.items(), key=lambda kv: -kv[1])[:25]
        return {"kernels": len(kernels), "cuda_events": len(names), "memcpy_memset": len(copies),
                "kernel_names": [f"{c}x {n}" for n, c in top]}

    def measure(self, fn, profile=True):
        r = self.time_cuda(fn)
        if profile:
            try:
                r.update(self.count_kernels(fn))
            except Exception as e:  # noqa: BLE001
                r["profile_error"] = f"{type(e).__name__}: {str(e)[:500]}"
        return r

    # -- setup ---------------------------------------------------------------------------------------------------

    def env(self):
        torch = self.torch
        e = self.res["env"]
        e["torch"] = torch.__version__
        e["cuda"] = torch.version.cuda
        e["cuda_available"] = torch.cuda.is_available()
        try:
            import torchvision

            e["torchvision"] = torchvision.__version__
        except Exception as ex:  # noqa: BLE001
            e["torchvision"] = f"unavailable: {ex}"
        try:
            import triton

            e["triton"] = triton.__version__
        except Exception as ex:  # noqa: BLE001
            e["triton"] = f"unavailable: {ex}"
        if self.device == "cpu":
            e["gpu"] = "none (cpu test mode)"
            return
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        p = torch.cuda.get_device_properties(0)
        e["gpu"] = p.name
        e["sms"] = p.multi_processor_count
        e["gpu_mem_gib"] = round(p.total_memory / GiB, 1)
        e["capability"] = f"{p.major}.{p.minor}"
        e["cudnn"] = torch.backends.cudnn.version()
        try:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        except Exception as ex:  # noqa: BLE001
            e["tf32_set_error"] = str(ex)
        try:
            e["matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
            e["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
        except Exception as ex:  # noqa: BLE001
            e["tf32_read_error"] = str(ex)
        mha = getattr(torch.backends, "mha", None)
        e["mha_fastpath"] = mha.get_fastpath_enabled() if mha is not None and hasattr(mha, "get_fastpath_enabled") \
            else "n/a"
        log(f"env: {json.dumps(e)}")

    def setup(self, name, dtype_name):
        torch = self.torch
        dtype = torch.float32 if dtype_name == "fp32" else torch.bfloat16
        model = tm.build(name).to(self.device, dtype)
        inputs = tm.make_inputs(name, device=self.device, dtype=dtype)
        return model, inputs

    # -- items ---------------------------------------------------------------------------------------------------

    def eager(self, name, dtype_name, fastpath=None):
        torch = self.torch
        model, inputs = self.setup(name, dtype_name)
        mha = getattr(torch.backends, "mha", None)
        old = None
        if fastpath is not None and mha is not None and hasattr(mha, "set_fastpath_enabled"):
            old = mha.get_fastpath_enabled()
            mha.set_fastpath_enabled(fastpath)
        try:
            with torch.no_grad():
                r = self.measure(lambda: model(*inputs))
        finally:
            if old is not None:
                mha.set_fastpath_enabled(old)
        bm = tm.MODELS[name]["bytes_moved"]
        if bm and dtype_name == "fp32" and r.get("median_ms"):
            r["GBps"] = round(bm / (r["median_ms"] * 1e-3) / 1e9, 1)
        return r

    def compiled(self, name, dtype_name, target=None):
        torch = self.torch
        model, inputs = self.setup(name, dtype_name)
        cm = torch.compile(target if target is not None else model)
        with torch.no_grad():
            t = time.time()
            cm(*inputs)
            self.sync()
            compile_s = time.time() - t
            r = self.measure(lambda: cm(*inputs))
        r["compile_s"] = round(compile_s, 2)
        bm = tm.MODELS[name]["bytes_moved"]
        if bm and dtype_name == "fp32" and r.get("median_ms"):
            r["GBps"] = round(bm / (r["median_ms"] * 1e-3) / 1e9, 1)
        return r

    def sdpa(self, dtype_name):
        torch = self.torch
        import torch.nn.functional as F

        _, (q, k, v) = self.setup("attention", dtype_name)
        with torch.no_grad():
            return self.measure(lambda: F.scaled_dot_product_attention(q, k, v))

    def copy_bandwidth(self):
        torch = self.torch
        n = GiB // 4 if self.device == "cuda" else (64 << 20) // 4
        src = torch.randn(n, device=self.device)
        dst = torch.empty_like(src)
        r = self.time_cuda(lambda: dst.copy_(src), iters=20, warmup=3)
        ok = bool(torch.equal(dst[:1024], src[:1024]))
        r.update(bytes_per_copy=8 * n, GBps=round(8 * n / (r["median_ms"] * 1e-3) / 1e9, 1), checked=ok)
        del src, dst
        if self.device == "cuda":
            torch.cuda.empty_cache()
        return r

    def run(self):
        self.item("env", 0, self.env)
        self.save()
        if not self.res["env"].get("gpu"):
            log("no GPU: stopping")
            return 1
        self.res["copy_bandwidth"] = self.item("copy_bandwidth", 5, self.copy_bandwidth)

        # 1. eager: cheap, everything.
        four = ["transformer_layer", "mlp", "resnet18", "mobilenet_v2"]
        for dt in ("fp32", "bf16"):
            for name in four + ["attention"]:
                self.put(name, dt, "eager", self.item(f"{name} {dt} eager", 4, lambda n=name, d=dt: self.eager(n, d)))
            self.put("attention", dt, "sdpa", self.item(f"attention {dt} sdpa", 3, lambda d=dt: self.sdpa(d)))
        for name in tm.BANDWIDTH_MODELS:
            self.put(name, "fp32", "eager", self.item(f"{name} fp32 eager", 4, lambda n=name: self.eager(n, "fp32")))
        self.put("transformer_layer", "fp32", "eager_no_fastpath",
                 self.item("transformer_layer fp32 eager (MHA fast path off)", 4,
                           lambda: self.eager("transformer_layer", "fp32", fastpath=False)))

        # 2. torch.compile, most wanted first; `need` is a guess of compile + timing seconds on an H200 host.
        compiles = [("transformer_layer", "fp32", 45), ("mlp", "fp32", 20), ("resnet18", "fp32", 60),
                    ("attention", "bf16", 20), ("transformer_layer", "bf16", 40), ("mlp", "bf16", 20),
                    ("resnet18", "bf16", 60), ("attention", "fp32", 20), ("ew", "fp32", 15),
                    ("softmax", "fp32", 15), ("layernorm", "fp32", 15), ("mobilenet_v2", "fp32", 90),
                    ("mobilenet_v2", "bf16", 90)]
        for name, dt, need in compiles:
            self.put(name, dt, "compile",
                     self.item(f"{name} {dt} torch.compile", need, lambda n=name, d=dt: self.compiled(n, d)))

        # 3. TF32 eager, to set beside our --rules precision_mode tf32 runs (flags restored after).
        torch = self.torch

        def tf32(name):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            try:
                return self.eager(name, "fp32")
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False

        for name in ("transformer_layer", "mlp", "resnet18"):
            self.put(name, "fp32", "eager_tf32", self.item(f"{name} fp32 eager TF32", 4, lambda n=name: tf32(n)))
        log(f"finished in {time.time() - self.t0:.1f} s: {len(self.res['errors'])} error(s),"
            f" {len(self.res['skipped'])} skipped")
        self.save()
        return 0


def _short(v):
    if isinstance(v, dict):
        keys = ("median_ms", "kernels", "compile_s", "GBps", "gpu")
        return ", ".join(f"{k}={v[k]}" for k in keys if k in v) or "ok"
    return str(v)[:200]


def cmd_run(a):
    r = Runner(a.out, a.budget_s, a.iters, a.device, [x for x in a.only.split(",") if x])
    try:
        return r.run()
    finally:
        r.save()
        log(f"wrote {a.out}")


# ----------------------------------------------------------------------------------------------------------------
# merge (no torch)
# ----------------------------------------------------------------------------------------------------------------


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001
        return {"_unreadable": f"{type(e).__name__}: {e}", "_path": path}


def _read_text(path, limit=200000):
    try:
        with open(path, errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _f(x, digits=3):
    x = _num(x)
    if x is None:
        return "—"
    return f"{x:.{digits}f}"


def _g(d, *path):
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def merge(a):
    res_dir = a.res_dir
    out = {"generated": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    env = {}
    for line in (_read_text(os.path.join(res_dir, "env.txt")) or "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip()
    out["env"] = env
    gpu_csv = (_read_text(os.path.join(res_dir, "gpu.csv")) or "").strip()
    if gpu_csv:
        parts = [p.strip() for p in gpu_csv.splitlines()[0].split(",")]
        keys = ["name", "driver_version", "memory_total", "clocks_max_sm", "clocks_max_mem", "power_limit"]
        out["gpu"] = dict(zip(keys, parts))
    out["nvcc"] = (_read_text(os.path.join(res_dir, "nvcc.txt")) or "").strip() or None
    out["nvidia_smi"] = (_read_text(os.path.join(res_dir, "nvidia-smi.txt")) or "").strip() or None
    out["ldd"] = (_read_text(os.path.join(res_dir, "ldd.txt")) or "").strip() or None
    steps = []
    for line in (_read_text(os.path.join(res_dir, "steps.tsv")) or "").splitlines():
        f = line.split("\t")
        if len(f) >= 3:
            steps.append({"step": f[0], "rc": f[1], "seconds": _try_float(f[2])})
    out["steps"] = steps
    out["failures"] = [x for x in (_read_text(os.path.join(res_dir, "failures.txt")) or "").splitlines() if x]

    peers = _read_json(a.peers) if a.peers else None
    out["torch"] = peers
    copy_gbps = _num(_g(peers, "copy_bandwidth", "GBps"))

    ours = {}
    ours_dir = os.path.join(res_dir, "ours")
    for name in tm.ORDER:
        entry = {}
        for kind in ("verify", "bench", "bench_tf32", "verify_bf16", "bench_bf16", "bench_bf16_simt"):
            j = _read_json(os.path.join(ours_dir, f"{name}.{kind}.json"))
            rc = (_read_text(os.path.join(ours_dir, f"{name}.{kind}.rc")) or "").strip()
            if j is not None or rc:
                entry[kind] = j
                entry[kind + "_rc"] = int(rc) if rc.lstrip("-").isdigit() else rc or None
        info = _read_json(os.path.join(a.models_dir, name, "inputs.json")) if a.models_dir else None
        if info is not None:
            entry["export"] = {k: info.get(k) for k in ("exporter", "opset", "nodes", "op_types", "model_bytes",
                                                        "export_s", "export_errors", "internalized_external_data")}
        bm = tm.MODELS[name]["bytes_moved"]
        fused = _num(_g(entry, "bench", "fused_ms"))
        if bm:
            entry["bytes_moved"] = bm
            for key in ("fused_ms", "fused_graph_ms", "unfused_ms"):
                ms = _num(_g(entry, "bench", key))
                if ms:
                    gbps = bm / (ms * 1e-3) / 1e9
                    entry[key.replace("_ms", "_GBps")] = round(gbps, 1)
                    if copy_gbps:
                        entry[key.replace("_ms", "_share_of_copy")] = round(gbps / copy_gbps, 3)
        if fused is not None and _num(_g(entry, "bench", "unfused_ms")):
            entry["fused_speedup"] = round(entry["bench"]["unfused_ms"] / fused, 3)
        if entry:
            ours[name] = entry
    out["ours"] = ours

    with open(a.out_json + ".tmp", "w") as f:
        json.dump(out, f, indent=1, default=str)
    os.replace(a.out_json + ".tmp", a.out_json)
    if a.out_md:
        md = summary_md(out)
        with open(a.out_md + ".tmp", "w") as f:
            f.write(md)
        os.replace(a.out_md + ".tmp", a.out_md)
    print(f"merged: {len(ours)} model(s) of ours, torch peers {'present' if peers else 'absent'},"
          f" {len(out['failures'])} failure line(s) -> {a.out_json}" + (f", {a.out_md}" if a.out_md else ""))
    return 0


def _try_float(s):
    try:
        return float(s)
    except ValueError:
        return s


def summary_md(r):
    L = []
    gpu = r.get("gpu") or {}
    t = r.get("torch") or {}
    tenv = t.get("env") or {}
    L.append("# graph-autofusion CUDA device check")
    L.append("")
    L.append(f"- generated {r.get('generated')}; GPU {gpu.get('name', tenv.get('gpu', '?'))}, driver "
             f"{gpu.get('driver_version', '?')}, torch {tenv.get('torch', '?')} (CUDA {tenv.get('cuda', '?')}, "
             f"cuDNN {tenv.get('cudnn', '?')}, triton {tenv.get('triton', '?')})")
    env = r.get("env") or {}
    if env:
        ok = {"1": "loads", "0": "DOES NOT LOAD (see failures)"}.get(env.get("binary_ok"), "?")
        L.append(f"- our binary: {ok} (bundle {env.get('bundle_git_rev', '?')}); CUDA libraries from {env.get('cuda_lib_dirs', '?')}; "
                 f"GAF_CXX={env.get('GAF_CXX', '(unset)')}")
    cb = t.get("copy_bandwidth") or {}
    copy_gbps = _num(cb.get("GBps"))
    L.append(f"- device-to-device copy (torch, 1 GiB, read + write): {_f(copy_gbps, 0)} GB/s "
             f"(median {_f(cb.get('median_ms'))} ms of 20)")
    L.append(f"- torch timings: CUDA events around each of {t.get('iters', '?')} runs after warm-up, median; "
             f"fp32 with TF32 off (matmul {tenv.get('matmul_allow_tf32', '?')}, cuDNN "
             f"{tenv.get('cudnn_allow_tf32', '?')}); MHA fast path {tenv.get('mha_fastpath', '?')} in eager")
    L.append("")

    ours = r.get("ours") or {}
    items = t.get("items") or {}

    def tv(model, dt, variant, key="median_ms"):
        return _g(items, model, dt, variant, key)

    L.append("## Per model, fp32, batch 1 (ms; kernels per run)")
    L.append("")
    L.append("| model | verify | ours unfused | ours fused | ours fused+graph | fused speed-up | torch eager | "
             "torch.compile | kernels ours unfused→fused | kernels eager | kernels Inductor |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for name in ["transformer_layer", "mlp", "resnet18", "mobilenet_v2", "attention"] + tm.BANDWIDTH_MODELS:
        o = ours.get(name, {})
        b = o.get("bench") or {}
        v = o.get("verify")
        if isinstance(v, dict) and "ok" in v:
            ver = "ok" if v.get("ok") else "**MISMATCH**"
        elif o.get("verify_rc") not in (None, 0):
            ver = f"rc {o.get('verify_rc')}"
        else:
            ver = "—"
        kin = f"{b.get('unfused_kernels', '—')}→{b.get('fused_kernels', '—')}" if b else "—"
        L.append(f"| {name} | {ver} | {_f(b.get('unfused_ms'))} | {_f(b.get('fused_ms'))} | "
                 f"{_f(b.get('fused_graph_ms'))} | {_f(o.get('fused_speedup'), 2)} | "
                 f"{_f(tv(name, 'fp32', 'eager'))} | {_f(tv(name, 'fp32', 'compile'))} | {kin} | "
                 f"{tv(name, 'fp32', 'eager', 'kernels') or '—'} | {tv(name, 'fp32', 'compile', 'kernels') or '—'} |")
    L.append("")

    L.append("## Reduced precision (ms): ours with `precision_mode` tf32 and bf16_mixed; torch TF32 eager and bf16")
    L.append("")
    L.append("| model | ours tf32 fused | ours tf32 fused+graph | ours bf16 fused | ours bf16 fused+graph | "
             "ours bf16 verify (max rel) | torch eager TF32 | torch eager bf16 | torch.compile bf16 | "
             "kernels Inductor bf16 |")
    L.append("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for name in ["transformer_layer", "mlp", "resnet18", "mobilenet_v2"]:
        o = ours.get(name, {})
        b = o.get("bench_tf32") or {}
        h = o.get("bench_bf16") or {}
        v = o.get("verify_bf16") or {}
        rels = [x.get("max_abs", 0) / x["scale"] for x in v.get("outputs", []) if x.get("scale")]
        verdict = "—" if not v else ("ok" if v.get("ok") else "MISMATCH") + (f" ({max(rels):.2g})" if rels else "")
        L.append(f"| {name} | {_f(b.get('fused_ms'))} | {_f(b.get('fused_graph_ms'))} | "
                 f"{_f(h.get('fused_ms'))} | {_f(h.get('fused_graph_ms'))} | {verdict} | "
                 f"{_f(tv(name, 'fp32', 'eager_tf32'))} | {_f(tv(name, 'bf16', 'eager'))} | "
                 f"{_f(tv(name, 'bf16', 'compile'))} | {tv(name, 'bf16', 'compile', 'kernels') or '—'} |")
    L.append("")

    L.append("## Bandwidth models (fp32, 4096 x 4096): achieved GB/s = bytes moved / time")
    L.append("")
    L.append("| model | MiB moved | ours fused ms | ours GB/s | share of copy | ours fused+graph GB/s | "
             "torch eager GB/s | torch.compile GB/s |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in tm.BANDWIDTH_MODELS:
        o = ours.get(name, {})
        b = o.get("bench") or {}
        bm = tm.MODELS[name]["bytes_moved"]
        share = o.get("fused_share_of_copy")
        L.append(f"| {name} | {bm / (1 << 20):.0f} | {_f(b.get('fused_ms'))} | {_f(o.get('fused_GBps'), 0)} | "
                 f"{_f(share * 100 if _num(share) is not None else None, 1)}{'%' if _num(share) is not None else ''} | "
                 f"{_f(o.get('fused_graph_GBps'), 0)} | {_f(tv(name, 'fp32', 'eager', 'GBps'), 0)} | "
                 f"{_f(tv(name, 'fp32', 'compile', 'GBps'), 0)} |")
    L.append("")

    L.append("## Attention block (1 x 12 x 512 x 64; ms)")
    L.append("")
    o = ours.get("attention", {})
    b = o.get("bench") or {}
    L.append("| variant | fp32 | bf16 | kernels (fp32 / bf16) |")
    L.append("|---|---:|---:|---|")
    h = o.get("bench_bf16") or {}
    hs = o.get("bench_bf16_simt") or {}
    v = o.get("verify_bf16") or {}
    L.append(f"| ours unfused | {_f(b.get('unfused_ms'))} | {_f(h.get('unfused_ms'))} | "
             f"{b.get('unfused_kernels', '—')} / {h.get('unfused_kernels', '—')} |")
    L.append(f"| ours fused (bf16: tensor-core attention) | {_f(b.get('fused_ms'))} | {_f(h.get('fused_ms'))} | "
             f"{b.get('fused_kernels', '—')} / {h.get('fused_kernels', '—')} |")
    L.append(f"| ours fused+graph | {_f(b.get('fused_graph_ms'))} | {_f(h.get('fused_graph_ms'))} | |")
    L.append(f"| ours fused, CUDA-core attention (GAF_CUDA_ATTENTION=simt) | — | {_f(hs.get('fused_ms'))} | |")
    if v:
        L.append(f"| ours bf16 verify | | {'ok' if v.get('ok') else 'MISMATCH'} | |")
    for variant, label in (("eager", "torch eager matmul/softmax"), ("sdpa", "F.scaled_dot_product_attention"),
                           ("compile", "torch.compile of the eager version")):
        L.append(f"| {label} | {_f(tv('attention', 'fp32', variant))} | {_f(tv('attention', 'bf16', variant))} | "
                 f"{tv('attention', 'fp32', variant, 'kernels') or '—'} / "
                 f"{tv('attention', 'bf16', variant, 'kernels') or '—'} |")
    L.append("")

    comp = []
    for name, per in items.items():
        for dt, vs in (per or {}).items():
            c = (vs or {}).get("compile")
            if isinstance(c, dict) and "compile_s" in c:
                comp.append(f"{name} {dt} {c['compile_s']} s")
    if comp:
        L.append("torch.compile first-call (compile) time: " + "; ".join(comp))
        L.append("")

    L.append("## Steps")
    L.append("")
    L.append("| step | rc | seconds |")
    L.append("|---|---:|---:|")
    for s in r.get("steps") or []:
        L.append(f"| {s['step']} | {s['rc']} | {s['seconds']} |")
    L.append("")
    fails = list(r.get("failures") or [])
    for e in t.get("errors") or []:
        fails.append(f"torch_peers: {e.get('item')}: {e.get('error', '')[:300]}")
    for s in t.get("skipped") or []:
        fails.append(f"torch_peers skipped (budget): {s.get('item')}")
    if fails:
        L.append("## Failures and skips")
        L.append("")
        for x in fails:
            L.append(f"- {x}")
        L.append("")
    return "\n".join(L) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="time torch eager / torch.compile (needs torch + CUDA)")
    r.add_argument("out")
    r.add_argument("--budget-s", type=float, default=280.0)
    r.add_argument("--iters", type=int, default=100)
    r.add_argument("--only", default="", help="comma-separated model names (default: all)")
    r.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: only to test the plumbing")
    m = sub.add_parser("merge", help="merge a device check's files into results.json + summary.md (no torch)")
    m.add_argument("--res-dir", required=True)
    m.add_argument("--models-dir", default="")
    m.add_argument("--peers", default="")
    m.add_argument("--out-json", required=True)
    m.add_argument("--out-md", default="")
    a = p.parse_args(argv)
    if a.cmd == "run":
        return cmd_run(a)
    return merge(a)


if __name__ == "__main__":
    sys.exit(main())

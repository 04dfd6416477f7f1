#!/usr/bin/env bash
# The one command run on the lent GPU machine (see bench/cuda/README.md):
#
#   bash tools/device/check.sh .device/bundle.tar.xz          (made here by tools/device/pack.sh)
#
# Steps, each under `timeout`, each timed; a failed step is logged and the rest go on:
#   a. GPU facts (nvidia-smi, nvcc)              b. unpack the bundle to /tmp/gaf, find the CUDA libraries, ldd
#   c. export the models with PyTorch there      d. our verify + bench per model (--device cuda), and tf32 benches
#   e. PyTorch eager / torch.compile peers       f. merge into $OUT/results.json and $OUT/summary.md
# The whole run keeps within GAF_CHECK_BUDGET seconds (default 450); later steps get what is left, and the
# torch peers are guaranteed PEERS_MIN seconds (default 150) by ending our runs early if they run long.
# Everything goes to stdout (the device command tees it to $OUT/log.txt). $OUT gets results.json and summary.md
# (merged once after our runs and again at the end, so a run cut short still leaves a results.json).
set -u
set -o pipefail

T0=$(date +%s)
BUDGET=${GAF_CHECK_BUDGET:-450}
PEERS_MIN=${PEERS_MIN:-150}
PEERS_MAX=${PEERS_MAX:-300}
MERGE_RESERVE=20
DEADLINE=$((T0 + BUDGET))
BUNDLE=${1:-.device/bundle.tar.xz}
OUT=${OUT:-/tmp/gaf-out}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
GAF=/tmp/gaf
BIN=$GAF/bin/graph-autofusion
RES=/tmp/res
MODELS=/tmp/gaf-models
RULES_TF32=/tmp/gaf_tf32_rules.json
RULES_BF16=/tmp/gaf_bf16_rules.json
ITERS=${GAF_BENCH_ITERS:-100}
MODEL_ORDER=(mlp transformer_layer resnet18 mobilenet_v2 attention ew softmax layernorm)
TF32_MODELS=(transformer_layer mlp resnet18)

mkdir -p "$OUT"
rm -rf "$RES" "$MODELS"
mkdir -p "$RES/ours" "$MODELS"
: >"$RES/steps.tsv"
: >"$RES/failures.txt"
: >"$RES/env.txt"
export PYTHONUNBUFFERED=1
export PATH=$PATH:/usr/local/nvidia/bin:/usr/local/cuda/bin
export XDG_CACHE_HOME=/tmp/gaf-cache # our kernel cache: writable, fresh

now() { date +%s; }
elapsed() { echo $(($(now) - T0)); }
left() { echo $((DEADLINE - $(now))); }
say() { echo "[check $(date +%H:%M:%S) +$(elapsed)s] $*"; }
fail() {
	say "FAIL: $*"
	echo "$*" >>"$RES/failures.txt"
}
setenv() { echo "$1=$2" >>"$RES/env.txt"; }

STEP_NAME=""
STEP_T=0
step_begin() {
	STEP_NAME=$1
	STEP_T=$(now)
	echo
	say "==== step $STEP_NAME (budget left $(left) s)"
}
step_end() { # rc
	local s=$(($(now) - STEP_T))
	printf '%s\t%s\t%s\n' "$STEP_NAME" "$1" "$s" >>"$RES/steps.tsv"
	say "==== step $STEP_NAME: rc=$1, ${s} s (total $(elapsed) s)"
}

# limited SECONDS_MAX RESERVE CMD...: runs CMD under timeout min(SECONDS_MAX, left - RESERVE); 125 = no time left.
limited() {
	local max=$1 reserve=$2
	shift 2
	local t=$(($(left) - reserve))
	((t > max)) && t=$max
	if ((t < 5)); then
		say "no time left for: $*"
		return 125
	fi
	timeout -k 10 "$t" "$@"
	local rc=$?
	((rc == 124 || rc == 137)) && say "TIMED OUT after ${t} s: $*"
	return $rc
}

# ---------------------------------------------------------------------------------------------------------------
step_begin a_gpu
say "repo $ROOT; bundle $BUNDLE; OUT $OUT; budget ${BUDGET} s"
uname -a
nproc
free -g 2>/dev/null | head -2
rc=0
if command -v nvidia-smi >/dev/null; then
	limited 30 0 nvidia-smi | tee "$RES/nvidia-smi.txt" || rc=$?
	limited 30 0 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit \
		--format=csv,noheader >"$RES/gpu.csv" || rc=$?
	cat "$RES/gpu.csv"
else
	rc=127
	fail "nvidia-smi not found"
fi
if command -v nvcc >/dev/null; then
	limited 20 0 nvcc --version | tee "$RES/nvcc.txt"
else
	say "nvcc not on PATH"
fi
command -v "$PY" || fail "no $PY"
step_end $rc

# ---------------------------------------------------------------------------------------------------------------
step_begin b_bundle
BINARY_OK=1
rc=0
rm -rf "$GAF" "$GAF.x"
mkdir -p "$GAF.x"
if [[ ! -f $BUNDLE ]]; then
	fail "bundle $BUNDLE not found (run tools/device/pack.sh here first and carry .device)"
	BINARY_OK=0
	rc=2
elif limited 60 0 tar -xJf "$BUNDLE" -C "$GAF.x" && [[ -x $GAF.x/bundle/bin/graph-autofusion ]]; then
	mv "$GAF.x/bundle" "$GAF"
else
	say "tar -xJ failed (no xz here?): unpacking with Python's tarfile"
	rm -rf "$GAF.x" && mkdir -p "$GAF.x"
	if limited 60 0 "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
		"$BUNDLE" "$GAF.x" && [[ -x $GAF.x/bundle/bin/graph-autofusion ]]; then
		mv "$GAF.x/bundle" "$GAF"
	else
		fail "could not unpack $BUNDLE"
		BINARY_OK=0
		rc=3
	fi
fi
rm -rf "$GAF.x"
if [[ -f $GAF/MANIFEST.txt ]]; then
	sed -n '1,12p' "$GAF/MANIFEST.txt"
	grep -E '^[a-z_]+=' "$GAF/MANIFEST.txt" | sed 's/^/bundle_/' >>"$RES/env.txt"
fi
# Generic libraries with a stable ABI: where this system has its own, use it rather than our Debian copy (the
# compiler our CPU path starts inherits LD_LIBRARY_PATH).
if [[ -d $GAF/lib ]]; then
	mkdir -p "$GAF/lib-spare"
	for n in libz.so.1 libcrypto.so.3 libssl.so.3 libOpenCL.so.1; do
		if [[ -f $GAF/lib/$n ]] && ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$n "; then
			mv "$GAF/lib/$n" "$GAF/lib-spare/$n"
			say "using the system's $n"
		fi
	done
fi

GAF_LD=$GAF/lib
if ((BINARY_OK)); then
	# Where CUDA's libraries may be: the toolkit, the system, and the pip wheels' nvidia/ (and torch/lib) folders.
	roots=()
	for d in /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
		/usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
		[[ -d $d ]] && roots+=("$d")
	done
	pyroots=$(limited 30 0 "$PY" - <<'EOF' 2>/dev/null
import os, site, sys
out = []
try:
    import nvidia
    out += list(nvidia.__path__)
except Exception:
    pass
sps = []
try:
    sps = site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    sps = [p for p in sys.path if p.endswith("-packages")]
for sp in sps:
    for sub in ("nvidia", "torch/lib"):
        p = os.path.join(sp, sub)
        if os.path.isdir(p):
            out.append(p)
seen = set()
for p in out:
    p = os.path.realpath(p)
    if p not in seen:
        seen.add(p)
        print(p)
EOF
	)
	while IFS= read -r d; do [[ -n $d && -d $d ]] && roots+=("$d"); done <<<"$pyroots"
	say "library search roots: ${roots[*]}"

	# find_lib SONAME: prints the folder of the first root (searched in order) that holds SONAME.
	find_lib() {
		local r hit
		for r in "${roots[@]}"; do
			hit=$(find "$r" -maxdepth 4 \( -type f -o -type l \) -name "$1" -print -quit 2>/dev/null)
			if [[ -n $hit ]]; then
				dirname "$hit"
				return 0
			fi
		done
		return 1
	}
	lib_dirs=()
	add_dir() {
		local d
		for d in "${lib_dirs[@]}"; do [[ $d == "$1" ]] && return 0; done
		lib_dirs+=("$1")
	}
	# What the binary needs and this system cannot resolve by itself, plus the brief's list.
	wanted=(libnvrtc.so.13 libcublasLt.so.13 libcublas.so.13 libcudnn.so.9)
	# The driver library: the statically linked CUDA runtime opens it at run time (not in ldd's list).
	ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' || wanted+=(libcuda.so.1)
	while IFS= read -r n; do
		[[ -n $n ]] && wanted+=("$n")
	done < <(LD_LIBRARY_PATH=$GAF/lib ldd "$BIN" 2>/dev/null | awk '/=> not found/ {print $1}' | sort -u)
	for n in "${wanted[@]}"; do
		if d=$(find_lib "$n"); then
			say "found $n in $d"
			add_dir "$d"
		else
			say "did not find $n under the search roots"
		fi
	done
	# NVRTC loads its builtins, cuDNN its sub-libraries, from the folders on the path: make sure they are there.
	for n in 'libnvrtc-builtins.so.13*' 'libcudnn_ops.so.9' 'libcudnn_cnn.so.9' 'libcudnn_graph.so.9' \
		'libcudnn_engines_precompiled.so.9' 'libcudnn_engines_runtime_compiled.so.9' 'libcudnn_heuristic.so.9' \
		'libcudnn_adv.so.9'; do
		have=0
		for d in "${lib_dirs[@]}"; do compgen -G "$d/$n" >/dev/null && have=1 && break; done
		if ((!have)); then
			if d=$(find_lib "$n"); then
				say "found $n apart, in $d"
				add_dir "$d"
			else
				say "WARNING: $n not found (the library that loads it at run time may fail)"
			fi
		fi
	done
	GAF_LD=$GAF/lib
	for d in "${lib_dirs[@]}"; do GAF_LD=$GAF_LD:$d; done
	say "LD_LIBRARY_PATH for our binary: $GAF_LD"
	setenv cuda_lib_dirs "$(
		IFS=:
		echo "${lib_dirs[*]}"
	)"
	LD_LIBRARY_PATH=$GAF_LD ldd "$BIN" | tee "$RES/ldd.txt"
	if grep -q 'not found' "$RES/ldd.txt" && compgen -G "$GAF/lib-spare/*" >/dev/null; then
		say "something is not found: putting back our copies of the generic libraries"
		mv "$GAF"/lib-spare/* "$GAF/lib/"
		LD_LIBRARY_PATH=$GAF_LD ldd "$BIN" | tee "$RES/ldd.txt"
	fi
	if grep -q 'not found' "$RES/ldd.txt" && [[ -d $GAF/fallback ]]; then
		say "something is not found: trying the bundle's fallback copies of libstdc++/libgcc_s/libgomp"
		GAF_LD=$GAF_LD:$GAF/fallback
		LD_LIBRARY_PATH=$GAF_LD ldd "$BIN" | tee "$RES/ldd.txt"
		setenv used_fallback_libs 1
	fi
	if grep -q 'not found' "$RES/ldd.txt"; then
		fail "STOP (our binary): ldd reports missing libraries: $(grep 'not found' "$RES/ldd.txt" | tr -s ' \t' ' ' | tr '\n' ';')"
		say "our binary cannot load here: skipping steps c and d (the torch peers still run)"
		BINARY_OK=0
		rc=4
	fi
fi
if ((BINARY_OK)); then
	if ! command -v c++ >/dev/null && command -v g++ >/dev/null; then
		export GAF_CXX=g++
		say "no c++ on PATH: GAF_CXX=g++"
	fi
	setenv GAF_CXX "${GAF_CXX:-c++ ($(command -v c++ || echo missing))}"
	if ! LD_LIBRARY_PATH=$GAF_LD limited 20 0 "$BIN" --help >"$RES/help.txt" 2>&1; then
		fail "STOP (our binary): '$BIN --help' failed: $(head -c 600 "$RES/help.txt")"
		BINARY_OK=0
		rc=5
	else
		head -n 40 "$RES/help.txt"
		LD_LIBRARY_PATH=$GAF_LD limited 20 0 "$BIN" bench --help 2>&1 | head -n 40
	fi
fi
setenv binary_ok "$BINARY_OK"
step_end $rc

# ---------------------------------------------------------------------------------------------------------------
step_begin c_export
rc=0
if ((BINARY_OK)); then
	# The export needs only the CPU; it must leave time for our runs and the peers.
	t=$(($(left) - PEERS_MIN - MERGE_RESERVE - 60))
	((t > 150)) && t=150
	if [[ -n ${GAF_PREEXPORTED:-} ]]; then # testing: models exported elsewhere (DIR/<name>/model.onnx)
		cp -r "$GAF_PREEXPORTED"/. "$MODELS"/ || rc=$?
	else
		limited "$t" 0 "$PY" "$ROOT/bench/cuda/torch_models.py" export "$MODELS" --budget-s $((t - 15)) || rc=$?
	fi
	((rc != 0)) && fail "model export: rc $rc (see the torch_models lines above; exported models still run)"
	ls -la "$MODELS"/*/model.onnx 2>/dev/null
else
	say "skipped: our binary cannot run"
	rc=125
fi
step_end $rc

# ---------------------------------------------------------------------------------------------------------------
# ours KIND MODEL TIMEOUT ARGS...: one run of our binary; JSON to $RES/ours/MODEL.KIND.json, rc beside it.
ours() {
	local kind=$1 m=$2 max=$3
	shift 3
	local json=$RES/ours/$m.$kind.json
	local t0 rc
	t0=$(now)
	say "-- ours $kind $m: $BIN $* --json $json"
	LD_LIBRARY_PATH=$GAF_LD limited "$max" $((PEERS_MIN + MERGE_RESERVE)) "$BIN" "$@" --json "$json" \
		2>&1 | tail -n 200
	rc=${PIPESTATUS[0]}
	echo "$rc" >"$RES/ours/$m.$kind.rc"
	say "-- ours $kind $m: rc=$rc, $(($(now) - t0)) s"
	if ((rc != 0)); then
		fail "ours $kind $m: rc $rc$( ((rc == 124 || rc == 137)) && echo ' (timeout)')$( ((rc == 125)) && echo ' (no time left)')"
	fi
	if [[ -f $json ]]; then
		head -c 3000 "$json"
		echo
	fi
	return "$rc"
}

step_begin d_ours
rc=0
if ((BINARY_OK)); then
	for m in "${MODEL_ORDER[@]}"; do
		f=$MODELS/$m/model.onnx
		if [[ ! -f $f ]]; then
			fail "ours $m: no exported model"
			continue
		fi
		vrc=0
		ours verify "$m" 90 verify "$f" --device cuda || vrc=$?
		((vrc != 0)) && rc=1
		if ((vrc == 124 || vrc == 137)); then
			fail "ours bench $m: skipped (its verify timed out: the bench would likely hang too)"
			continue
		fi
		ours bench "$m" 90 bench "$f" --device cuda -n "$ITERS" || rc=1
	done
	echo '{"global": {"precision_mode": "tf32"}}' >"$RULES_TF32"
	for m in "${TF32_MODELS[@]}"; do
		f=$MODELS/$m/model.onnx
		[[ -f $f ]] || continue
		ours bench_tf32 "$m" 90 bench "$f" --device cuda -n "$ITERS" --rules "$RULES_TF32" || rc=1
	done
	# bf16_mixed: bfloat16 storage and tensor-core products (fp32 accumulation), against the CPU's fp32 within 2e-2.
	echo '{"global": {"precision_mode": "bf16_mixed"}}' >"$RULES_BF16"
	for m in "${TF32_MODELS[@]}"; do
		f=$MODELS/$m/model.onnx
		[[ -f $f ]] || continue
		ours verify_bf16 "$m" 90 verify "$f" --device cuda --rules "$RULES_BF16" || rc=1
		ours bench_bf16 "$m" 90 bench "$f" --device cuda -n "$ITERS" --rules "$RULES_BF16" || rc=1
	done
	# The attention block in bf16: the tensor-core flash kernel, and the CUDA-core one beside it
	# (GAF_CUDA_ATTENTION=simt) for the comparison.
	f=$MODELS/attention/model.onnx
	if [[ -f $f ]]; then
		ours verify_bf16 attention 90 verify "$f" --device cuda --rules "$RULES_BF16" || rc=1
		ours bench_bf16 attention 90 bench "$f" --device cuda -n "$ITERS" --rules "$RULES_BF16" || rc=1
		GAF_CUDA_ATTENTION=simt ours bench_bf16_simt attention 90 bench "$f" --device cuda -n "$ITERS" \
			--rules "$RULES_BF16" || rc=1
	fi
	# Where the time goes, step by step (to the log only).
	for m in transformer_layer resnet18; do
		f=$MODELS/$m/model.onnx
		[[ -f $f ]] || continue
		say "-- ours profile $m"
		LD_LIBRARY_PATH=$GAF_LD limited 60 $((PEERS_MIN + MERGE_RESERVE)) "$BIN" profile "$f" --device cuda \
			--iterations 20 --top 12 2>&1 | tail -n 40
	done
else
	say "skipped: our binary cannot run"
	rc=125
fi
step_end $rc

merge() {
	limited 30 0 "$PY" "$ROOT/bench/cuda/torch_peers.py" merge --res-dir "$RES" --models-dir "$MODELS" \
		--peers "$RES/torch_peers.json" --out-json "$OUT/results.json" --out-md "$OUT/summary.md" ||
		say "merge failed (rc $?)"
}
say "interim merge (so a run cut short still leaves results)"
merge

# ---------------------------------------------------------------------------------------------------------------
step_begin e_torch_peers
rc=0
t=$(($(left) - MERGE_RESERVE))
((t > PEERS_MAX)) && t=$PEERS_MAX
# The script keeps within --budget-s itself (skipping what will not fit); the timeout is the backstop.
limited $((t + 15)) 0 "$PY" "$ROOT/bench/cuda/torch_peers.py" run "$RES/torch_peers.json" --budget-s $((t - 10)) \
	--iters "$ITERS" || rc=$?
((rc != 0)) && fail "torch peers: rc $rc (partial results kept)"
step_end $rc

# ---------------------------------------------------------------------------------------------------------------
step_begin f_merge
say "total $(elapsed) s"
merge
step_end 0
# The steps table above is in the log; put the final one into the results too.
merge >/dev/null 2>&1
echo
[[ -f $OUT/summary.md ]] && cat "$OUT/summary.md"
say "done in $(elapsed) s; results in $OUT: $(cd "$OUT" && echo *)"
exit 0

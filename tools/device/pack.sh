#!/usr/bin/env bash
# Packs graph-autofusion for the lent GPU machine, which has none of our Debian libraries:
#
#   bash tools/device/pack.sh BUILD_BINARY OUT_DIR        e.g. build/release/graph-autofusion .device
#
# Makes OUT_DIR/bundle.tar.xz holding bundle/bin/graph-autofusion (stripped), bundle/lib/ (every shared library the
# binary loads per ldd that is not glibc, the GCC runtime or CUDA: those the device has, CUDA's from its toolkit or
# PyTorch's wheels), bundle/fallback/ (our libstdc++, libgcc_s and libgomp, used there only when its own are missing
# or too old) and bundle/MANIFEST.txt. Only the tarball is left in OUT_DIR (it travels with `carry`, which counts
# towards the 64 MiB the working tree may take). Fails if the tarball is over 60 MiB.
set -euo pipefail

die() {
	echo "pack.sh: $*" >&2
	exit 1
}
[[ $# -eq 2 ]] || die "usage: pack.sh BUILD_BINARY OUT_DIR"
bin=$1
out=$2
[[ -f $bin && -x $bin ]] || die "no executable at '$bin' (build it first)"
command -v ldd >/dev/null || die "ldd is missing"
command -v xz >/dev/null || die "xz is missing"
limit_mib=60

# Base system and CUDA: left behind. (libcuda* covers libcudart and libcudnn too.)
skip_re='^(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libmvec\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libstdc\+\+\.so|libgcc_s\.so|libgomp\.so|libcuda|libcudart|libnvrtc|libcublas|libcudnn|libnvJitLink)'
# Excluded, but carried apart in case the device lacks them (or has older ones).
fallback_re='^(libstdc\+\+\.so|libgcc_s\.so|libgomp\.so)'

mkdir -p "$out"
stage=$(mktemp -d "${TMPDIR:-/tmp}/gaf-pack.XXXXXX")
trap 'rm -rf "$stage"' EXIT
b=$stage/bundle
mkdir -p "$b/bin" "$b/lib" "$b/fallback"

ldd_out=$(ldd "$bin") || die "ldd '$bin' failed"
missing=()
left_behind=()
while read -r line; do
	[[ -z $line ]] && continue
	name=${line%% *}
	name=${name##*/}
	path=""
	if [[ $line == *" => not found"* ]]; then
		path=NOTFOUND
	elif [[ $line == *" => "* ]]; then
		path=${line#* => }
		path=${path%% (*}
	fi
	if [[ $name =~ $skip_re ]]; then
		left_behind+=("$name")
		if [[ $name =~ $fallback_re && -n $path && $path != NOTFOUND ]]; then
			cp -L "$path" "$b/fallback/$name"
		fi
		continue
	fi
	if [[ $path == NOTFOUND ]]; then
		missing+=("$name")
		continue
	fi
	[[ -n $path && -f $path ]] || continue
	cp -L "$path" "$b/lib/$name"
	chmod u+w "$b/lib/$name"
	strip --strip-unneeded "$b/lib/$name" 2>/dev/null || true
	echo "  lib  $name  <- $path ($(du -h "$b/lib/$name" | cut -f1))"
done <<<"$ldd_out"
((${#missing[@]} == 0)) || die "ldd cannot find: ${missing[*]} (these are not base-system or CUDA libraries)"

strip -o "$b/bin/graph-autofusion" "$bin" || cp "$bin" "$b/bin/graph-autofusion"
chmod 755 "$b/bin/graph-autofusion"

glibc_max=$(objdump -T "$bin" "$b"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n1 || true)
glibcxx_max=$(objdump -T "$bin" "$b"/lib/* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n1 || true)
root=$(cd "$(dirname "$0")/../.." && pwd)
{
	echo "packed=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "git_rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo '+dirty')"
	echo "binary_sha256=$(sha256sum "$bin" | cut -d' ' -f1)"
	# shellcheck source=/dev/null
	echo "built_on=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(ldd --version | head -n1)"
	echo "needs_glibc=${glibc_max:-?}"
	echo "needs_glibcxx=${glibcxx_max:-?}"
	echo "left_behind=${left_behind[*]}"
	echo
	echo "ldd $bin:"
	echo "$ldd_out"
} >"$b/MANIFEST.txt"

tarball=$out/bundle.tar.xz
rm -f "$tarball"
tar -C "$stage" -cf - bundle | xz -T2 -6 >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"
bytes=$(stat -c %s "$tarball")
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "bundle: $(du -sh "$b" | cut -f1) unpacked ($(find "$b/lib" -type f | wc -l) libraries;" \
	"left behind: ${left_behind[*]}); needs ${glibc_max:-?}, ${glibcxx_max:-?}"
echo "wrote $tarball: $mib MiB ($bytes bytes)"
if ((bytes > limit_mib * 1048576)); then
	rm -f "$tarball"
	die "the bundle is $mib MiB, over the $limit_mib MiB limit (the device call carries at most 64 MiB in all)"
fi

#!/usr/bin/env bash
# A build with the gpu target that travels (issue 21): a Release build into build-gpu/ with
# RPATH $ORIGIN/../lib, and the libraries it needs that are not part of the base system or
# the CUDA toolkit (oneDNN, protobuf, gRPC, ...) copied into build-gpu/lib, so a GPU machine
# that has the CUDA 13 toolkit but no package registry runs it as it is:
#
#   scripts/gpu-bundle.sh            # here (JOBS=N for the build; ccache is used when found)
#   (on the GPU machine, in the repository root, with build-gpu/ carried)
#   bench/gpu-check.sh "$OUT"        # finds build-gpu/ and builds nothing
#
# It builds only kiln (the tool), libkiln, its gpu module and the two gpu test binaries in build-gpu-tree/,
# then assembles build-gpu/bin and build-gpu/lib from them (no object files), strips the
# copies, and packs the folder as build-gpu.tar.xz, what travels: it fails when that exceeds
# 40 MiB (KILN_BUNDLE_MAX_MIB). (The folder itself is ~76 MiB: oneDNN is 38 of them, as long
# as the cpu target is required.) The CUDA
# libraries (cudart, NVRTC, cuBLASLt, cuDNN) are not copied: the GPU machine's toolkit has
# them, and libcuda comes with its driver (Kiln never links it).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build-gpu
TREE=build-gpu-tree
MAX_MIB=${KILN_BUNDLE_MAX_MIB:-40}
JOBS=${JOBS:-$(nproc)}
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

cmake -S . -B "$TREE" -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_GPU=ON "${launcher[@]}" \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN/../lib' > "$TREE.configure.log"
cmake --build "$TREE" -j "$JOBS" --target kiln_tool kiln_gpu_tests kiln_gpu_device_tests kiln_conformance
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
cp "$TREE"/bin/kiln "$TREE"/bin/kiln_gpu_tests "$TREE"/bin/kiln_gpu_device_tests "$TREE"/bin/kiln_conformance "$OUT/bin/"
cp -P "$TREE"/lib/libkiln.so* "$TREE"/lib/libkiln_c.so* "$TREE"/lib/libkiln_gpu.so "$OUT/lib/"

# What the binaries need, resolved here; copy what is neither base system nor CUDA.
system_lib() {
  case $(basename "$1") in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*|libcuda.so*) return 0 ;;
  esac
  case $1 in
    /usr/local/cuda*|*/cuda-13*/*) return 0 ;;
  esac
  # cuDNN, cuBLAS and NVRTC wherever they were found: the toolkit's.
  case $(basename "$1") in
    libcudnn*|libcublas*|libnvrtc*|libcudart*|libnvJitLink*) return 0 ;;
  esac
  return 1
}
copied=0
for elf in "$OUT"/bin/kiln "$OUT"/bin/kiln_gpu_tests "$OUT"/bin/kiln_gpu_device_tests "$OUT"/lib/libkiln*.so*; do
  [ -f "$elf" ] || continue
  while read -r lib; do
    [ -n "$lib" ] && [ -f "$lib" ] || continue
    system_lib "$lib" && continue
    dest="$OUT/lib/$(basename "$lib")"
    case $lib in "$(pwd)/$OUT"/*|"$OUT"/*|"$(pwd)/$TREE"/*|"$TREE"/*) continue ;; esac
    if [ ! -f "$dest" ]; then
      cp -L "$lib" "$dest"
      chmod u+w "$dest"
      strip --strip-unneeded "$dest" 2> /dev/null || true
      copied=$((copied + 1))
    fi
  done < <(ldd "$elf" | awk '/=>/ && $3 ~ /^\// {print $3}')
done
# The binaries find those copies (and libkiln) through $ORIGIN/../lib.
for elf in "$OUT"/bin/kiln "$OUT"/bin/kiln_gpu_tests "$OUT"/bin/kiln_gpu_device_tests; do
  readelf -d "$elf" | grep -q 'ORIGIN/../lib' || { echo "gpu-bundle: $elf lacks RPATH \$ORIGIN/../lib" >&2; exit 1; }
  if readelf -d "$elf" | grep -q 'NEEDED.*libcuda\.so'; then echo "gpu-bundle: $elf needs libcuda" >&2; exit 1; fi
done
strip --strip-unneeded "$OUT"/bin/* "$OUT"/lib/libkiln*.so* 2> /dev/null || true
size=$(du -cbL "$OUT"/bin/kiln "$OUT"/bin/kiln_gpu_tests "$OUT"/bin/kiln_gpu_device_tests "$OUT"/lib/*.so* | tail -n 1 | cut -f1)
mib=$(( (size + 1048575) / 1048576 ))
echo "gpu-bundle: $OUT: $copied libraries copied into $OUT/lib; bin + lib: $mib MiB"
# oneDNN alone is ~38 MiB (the cpu target is still required), so the folder travels as an
# archive: bench/gpu-check.sh unpacks build-gpu.tar.xz where no build-gpu/ is found.
rm -f "$OUT.tar.xz"
tar -cf - "$OUT" | xz -T0 -6 > "$OUT.tar.xz"
archive=$(stat -c %s "$OUT.tar.xz")
amib=$(( (archive + 1048575) / 1048576 ))
echo "gpu-bundle: $OUT.tar.xz: $amib MiB (limit $MAX_MIB)"
if [ "$amib" -gt "$MAX_MIB" ]; then
  echo "gpu-bundle: over $MAX_MIB MiB" >&2
  exit 1
fi

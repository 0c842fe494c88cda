#!/usr/bin/env bash
# The one script a session with a lent GPU (an H200) runs, in the repository root on the GPU
# machine, within about 8 minutes (issue 21). That machine has the CUDA 13 toolkit but cannot
# install packages and reaches nothing outside. It:
#   1. finds a build with the gpu target (KILN_BUILD_DIR, build-gpu/ or build-gpu.tar.xz from
#      scripts/gpu-bundle.sh, or build/), else configures and builds one (KILN_ENABLE_GPU=ON,
#      only the targets below);
#   2. records the GPU, driver and library versions (nvidia-smi, kiln targets);
#   3. runs kiln_gpu_tests (no device needed; a sanity check of the carried build) and
#      kiln_gpu_device_tests (every program-level check against ref; the shared models in
#      KILN_GPU_DEVICE_MODELS, the quick ones by default);
#   4. ResNet-50 and MobileNetV2 exported there (bench/export_torchvision.py) when PyTorch
#      is at hand and the models folder lacks them; `kiln verify --target gpu` on every model
#      against ref (their test inputs), and on gpt_kv and bert_dyn (tests/data/dynamic_models)
#      at one test set's shapes; `kiln verify --target gpu --fp16` on bert_small and resnet50;
#   5. a .kiln save/load of bert_small for the gpu, then `kiln perf --target gpu` on
#      bert_small, vit_tiny, resnet50 and mobilenet_v2 at batch 1 and 8, with per-instruction
#      profiles (where the time goes), and with --fp16 on bert_small and resnet50;
#   6. the peer: PyTorch eager on the same architectures (bench/torch_gpu_peer.py);
#   7. the ONNX backend tests on the gpu target (gpu-models/onnx-backend-tests.tar.xz, 2.3 MB:
#      kiln_conformance --target gpu; its failures with reasons in conformance-gpu.txt);
#   8. the host CPU (an Intel Xeon with AMX there): bench/device_cpu_compare.py, Kiln's cpu
#      target against ONNX Runtime's Python package.
# Each step runs under `timeout`, inside one overall budget (KILN_GPU_CHECK_BUDGET seconds,
# default 500), and the summary is rewritten after every step, so a run cut off still reports:
#   OUT_DIR/gpu-summary.json   one record per step: name, exit status, seconds, log, last line
#   OUT_DIR/gpu-summary.md     the same as a table, with the device lines
#   OUT_DIR/<step>.log         each step's output (gtest JSON for the test binaries too)
# OUT_DIR: the first argument, else $OUT, else ./gpu-check-out.
# Models: KILN_MODELS_DIR, else ../shared/models, else shared/models, else gpu-models/ (a
# carried subset: the device machine takes at most 64 MiB a call, tracked files (8.5 MiB)
# included. Measured on 2026-12-04 (twentieth session): build-gpu.tar.xz 18.3 MB, fashion_resnet +
# bert_small + vit_tiny with only test_data_set_0, make_models.py and the node + simple backend
# tests as a 2.3 MB tar.xz: 38.2 MB, 65.0 MB (62 MiB) in all. lstm_seq (3.5 MB) no longer fits;
# the device tests' synthetic LSTMs stand in for it. resnet50 (100 MB) cannot travel, and step 4
# exports it there); missing models are recorded as skipped.
#
# From a checkout without a GPU, for a session that is lent one (loans can pause after the
# first call: put everything into that one call; the 2026-12-04 run took 42 s of 470):
#   scripts/gpu-bundle.sh
#   rm -rf gpu-models && for m in fashion_resnet bert_small vit_tiny; do mkdir -p gpu-models/$m &&
#     cp -r ../shared/models/$m/model.onnx ../shared/models/$m/test_data_set_0 gpu-models/$m/; done &&
#     cp ../shared/models/make_models.py gpu-models/ &&
#     tar -cJf gpu-models/onnx-backend-tests.tar.xz -C ../shared onnx-backend-tests/node onnx-backend-tests/simple
#   check that build-gpu.tar.xz + gpu-models + the tracked files stay under 64 MiB (du -sb), then
#   run, carrying build-gpu.tar.xz and gpu-models, timeout_s 570 (at most 8 files come back):
#     timeout 540 bench/gpu-check.sh /tmp/gco; tar czf $OUT/gco.tgz -C /tmp gco; cp /tmp/gco/gpu-summary.md $OUT/
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${1:-${OUT:-$ROOT/gpu-check-out}}
mkdir -p "$OUT_DIR"
BUDGET=${KILN_GPU_CHECK_BUDGET:-500}
START=$(date +%s)
JSON="$OUT_DIR/gpu-summary.json"
MD="$OUT_DIR/gpu-summary.md"
RECORDS=()

elapsed() { echo $(( $(date +%s) - START )); }
json_escape() { sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/ /g' | tr -d '\r' | tr '\n' ' '; }

write_summary() {
  {
    echo "{"
    echo "  \"script\": \"bench/gpu-check.sh\","
    echo "  \"commit\": \"$(git rev-parse HEAD 2>/dev/null || echo unknown)\","
    echo "  \"elapsed_s\": $(elapsed),"
    echo "  \"device\": \"$(printf '%s' "${DEVICE_LINE:-unknown}" | json_escape)\","
    echo "  \"steps\": ["
    local n=${#RECORDS[@]} i=0
    for r in "${RECORDS[@]}"; do
      i=$((i + 1))
      if [ "$i" -lt "$n" ]; then echo "    $r,"; else echo "    $r"; fi
    done
    echo "  ]"
    echo "}"
  } > "$JSON.tmp" && mv "$JSON.tmp" "$JSON"
  {
    echo "# bench/gpu-check.sh ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null))"
    echo
    echo "Device: ${DEVICE_LINE:-unknown}"
    echo
    echo "| step | status | seconds | last line |"
    echo "| --- | --- | --- | --- |"
    for r in "${MD_ROWS[@]:-}"; do [ -n "$r" ] && echo "$r"; done
  } > "$MD"
}
MD_ROWS=()

# record NAME RC SECONDS LOG NOTE
record() {
  local name=$1 rc=$2 secs=$3 log=$4 note=$5
  local status=ok
  if [ "$rc" = skipped ]; then status=skipped; elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=timeout
  elif [ "$rc" != 0 ]; then status=failed; fi
  local rc_json=$rc
  [ "$rc" = skipped ] && rc_json=null
  RECORDS+=("{\"step\": \"$name\", \"status\": \"$status\", \"rc\": $rc_json, \"seconds\": $secs, \"log\": \"$(basename "$log")\", \"note\": \"$(printf '%s' "$note" | json_escape)\"}")
  MD_ROWS+=("| $name | $status | $secs | $(printf '%s' "$note" | tr '|' '/' | tr '\n' ' ' | cut -c1-200) |")
  write_summary
  echo "[gpu-check] $name: $status (${secs}s) $note"
}

# step NAME TIMEOUT_S COMMAND...: runs it under timeout within the overall budget.
step() {
  local name=$1 limit=$2
  shift 2
  local log="$OUT_DIR/$name.log"
  local left=$((BUDGET - $(elapsed) - 5))
  if [ "$left" -lt 15 ]; then
    record "$name" skipped 0 "$log" "no time left in the ${BUDGET}s budget"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  local rc=$?
  local note
  note=$(grep -v '^\s*$' "$log" | tail -n 1)
  [ "$rc" = 124 ] && note="timed out after ${limit}s; $note"
  record "$name" "$rc" $(( $(date +%s) - t0 )) "$log" "$note"
  return 0
}

skip() { record "$1" skipped 0 "$OUT_DIR/$1.log" "$2"; }

# 1. A build with the gpu target (a carried scripts/gpu-bundle.sh archive is unpacked first).
if [ ! -d build-gpu ] && [ -f build-gpu.tar.xz ]; then
  step unpack_bundle 60 tar -xJf build-gpu.tar.xz
fi
BUILD=""
for cand in "${KILN_BUILD_DIR:-}" build-gpu build; do
  if [ -n "$cand" ] && [ -x "$cand/bin/kiln" ] && [ -x "$cand/bin/kiln_gpu_device_tests" ]; then BUILD=$cand; break; fi
done
if [ -z "$BUILD" ]; then
  BUILD=build-gpu-check
  step configure 120 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_GPU=ON
  step build 300 cmake --build "$BUILD" -j "$(nproc)" --target kiln_tool kiln_gpu_tests kiln_gpu_device_tests kiln_conformance
else
  skip build "using $BUILD"
fi
BUILD=$(cd "$BUILD" 2>/dev/null && pwd || echo "$ROOT/$BUILD")
# A carried build: its libraries are found next to it, wherever the checkout lies.
export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
KILN="$BUILD/bin/kiln"

# CUDA libraries the build links that the machine's loader does not find (cuDNN, say, may come
# only with a Python wheel there): look for each in the usual places and add its folder.
find_missing_libs() {
  local lib dir
  for lib in $(ldd "$KILN" "$BUILD"/lib/libkiln.so "$BUILD"/lib/libkiln_gpu.so 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
    dir=$(find /usr/local /opt /usr/lib -name "$lib" -print 2>/dev/null | head -n 1 | xargs -r dirname)
    if [ -n "$dir" ]; then
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
      echo "found $lib in $dir"
    else
      echo "MISSING $lib"
    fi
  done
}
LIB_SEARCH=$(find_missing_libs)
while read -r line; do
  case $line in "found "*) export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:${line##* in }" ;; esac
done <<< "$LIB_SEARCH"

# 2. The device.
DEVICE_LINE=$( (nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1) || true)
[ -z "$DEVICE_LINE" ] && DEVICE_LINE="nvidia-smi not found or no GPU"
step environment 30 bash -c "nvidia-smi 2>&1 | head -n 20; echo; lscpu | grep -E 'Model name|^CPU\(s\)'; grep -o -E 'avx512[a-z_0-9]*|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo; echo 'library search:'; echo '$LIB_SEARCH'; echo LD_LIBRARY_PATH=\$LD_LIBRARY_PATH; ldd '$KILN' | grep -E 'cuda|cudnn|cublas|nvrtc|not found'; echo; '$KILN' targets; echo; ls /usr/local/cuda/lib64 2>/dev/null | grep -E 'libcudart|libnvrtc|libcublasLt|libcudnn.so' | head"
step targets 20 "$KILN" targets

# 3. The tests.
# gpu_build checks the build tree's files by their paths here: not in a carried bundle.
filter=()
[ "$(basename "$BUILD")" = build-gpu ] && filter=(--gtest_filter=-gpu_build.*)
step gpu_tests 120 "$BUILD/bin/kiln_gpu_tests" "${filter[@]}" --gtest_output="json:$OUT_DIR/gpu_tests.json"
MODELS=""
for cand in "${KILN_MODELS_DIR:-}" ../shared/models shared/models gpu-models; do
  if [ -n "$cand" ] && [ -f "$cand/resnet50/model.onnx" -o -f "$cand/bert_small/model.onnx" ]; then MODELS=$(cd "$cand" && pwd); break; fi
done
export KILN_MODELS_DIR=$MODELS
export KILN_GPU_DEVICE_MODELS=${KILN_GPU_DEVICE_MODELS:-fashion_resnet,lstm_seq,bert_small,vit_tiny}
step gpu_device_tests 200 "$BUILD/bin/kiln_gpu_device_tests" --gtest_output="json:$OUT_DIR/gpu_device_tests.json"

# Static shapes at the test inputs' (a dynamic program's generic program runs on the host
# until a specialization is compiled: measure and verify the device code directly).
dims() {
  case $1 in
    bert_small) echo "--input-dim @input_ids 1 128 --input-dim @attention_mask 1 128" ;;
    lstm_seq) echo "--input-dim @features 1 100 80" ;;
    fashion_resnet) echo "--batch 16" ;;
    *) echo "--batch 1" ;;
  esac
}

# 4. ResNet-50 and MobileNetV2, which cannot travel (64 MiB a call), exported here with
#    torchvision when PyTorch is at hand; then verify on every model at hand (its test
#    inputs; ref alongside).
if [ -n "$MODELS" ] && [ -w "$MODELS" ] && [ ! -f "$MODELS/resnet50/model.onnx" ] &&
  python3 -c 'import torch, torchvision, onnx' 2> /dev/null; then
  step export_cnns 90 python3 bench/export_torchvision.py "$MODELS" resnet50 mobilenet_v2
fi
verify_models() {
  for m in "$@"; do
    [ -f "$MODELS/$m/model.onnx" ] || { skip "verify_$m" "no $MODELS/$m/model.onnx"; continue; }
    step "verify_$m" 60 "$KILN" verify "$MODELS/$m/model.onnx" --target gpu --input "$MODELS/$m/test_data_set_0" $(dims "$m")
  done
}
if [ -z "$MODELS" ]; then
  skip verify "no models (KILN_MODELS_DIR, ../shared/models, shared/models)"
else
  verify_models fashion_resnet lstm_seq bert_small vit_tiny mobilenet_v2 resnet50
  # fp16 (quantize_fp16: 16-bit generated kernels, cuBLASLt and cuDNN summing in fp32),
  # against the float32 reference within the mode's bound.
  for m in bert_small resnet50; do
    [ -f "$MODELS/$m/model.onnx" ] || { skip "verify_${m}_fp16" "no $MODELS/$m/model.onnx"; continue; }
    step "verify_${m}_fp16" 60 "$KILN" verify "$MODELS/$m/model.onnx" --target gpu --fp16 --input "$MODELS/$m/test_data_set_0" $(dims "$m")
  done
fi

# The dynamic models at one test set's shapes (their Split/Concat/Gather/reshape copies run
# as generated kernels; tests/data travels with the checkout).
DYN=tests/data/dynamic_models
KV="1 4 9 16"
if [ -f "$DYN/gpt_kv/model.onnx" ]; then
  step verify_gpt_kv 60 "$KILN" verify "$DYN/gpt_kv/model.onnx" --target gpu --input "$DYN/gpt_kv/test_data_set_7" \
    --input-dim @input_ids 1 4 --input-dim @past_key_0 $KV --input-dim @past_value_0 $KV \
    --input-dim @past_key_1 $KV --input-dim @past_value_1 $KV
  step verify_bert_dyn 60 "$KILN" verify "$DYN/bert_dyn/model.onnx" --target gpu --input "$DYN/bert_dyn/test_data_set_3" \
    --input-dim @input_ids 2 77 --input-dim @attention_mask 2 77
fi

# A .kiln round trip: compiled for the gpu, saved, loaded (no NVRTC when the arch matches) and run.
if [ -n "$MODELS" ] && [ -f "$MODELS/bert_small/model.onnx" ]; then
  step save_bert_small 60 "$KILN" compile "$MODELS/bert_small/model.onnx" --target gpu $(dims bert_small) -o "$OUT_DIR/bert_small.kiln"
  step load_bert_small 60 "$KILN" perf "$OUT_DIR/bert_small.kiln" --target gpu --input "$MODELS/bert_small/test_data_set_0" -n 5 --warmup 1
  rm -f "$OUT_DIR/bert_small.kiln"
fi

# 5. perf at batch 1 and 8, and where the time goes (per instruction) at batch 1.
perf_model() {  # NAME BATCH_ARGS... : one perf step, and a per-instruction one at batch 1
  local m=$1
  [ -f "$MODELS/$m/model.onnx" ] || { skip "perf_$m" "no $MODELS/$m/model.onnx"; return; }
  case $m in
    bert_small)
      step perf_${m}_b1 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu $(dims $m) -n 50 --warmup 5
      step perf_${m}_b8 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu --input-dim @input_ids 8 128 --input-dim @attention_mask 8 128 -n 50 --warmup 5 ;;
    *)
      step perf_${m}_b1 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu --batch 1 -n 50 --warmup 5
      step perf_${m}_b8 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu --batch 8 -n 20 --warmup 3 ;;
  esac
  step perf_${m}_per_instruction 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu $(dims $m) -n 3 --warmup 1 --per-instruction
  # What CUDA graphs give (eval_graphs.hpp): the same batch-1 run launching kernel by kernel.
  step perf_${m}_b1_no_graphs 60 env KILN_GPU_GRAPHS=0 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu $(dims $m) -n 50 --warmup 5
}
if [ -z "$MODELS" ]; then
  skip perf "no models"
else
  for m in bert_small vit_tiny resnet50 mobilenet_v2; do perf_model $m; done
  # fp16 at batch 1 and 8 (against the float32 steps above).
  for m in bert_small resnet50; do
    [ -f "$MODELS/$m/model.onnx" ] || { skip "perf_${m}_fp16" "no $MODELS/$m/model.onnx"; continue; }
    if [ "$m" = bert_small ]; then
      step perf_${m}_fp16_b1 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu --fp16 $(dims $m) -n 50 --warmup 5
      step perf_${m}_fp16_b8 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu --fp16 --input-dim @input_ids 8 128 --input-dim @attention_mask 8 128 -n 50 --warmup 5
    else
      step perf_${m}_fp16_b1 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu --fp16 --batch 1 -n 50 --warmup 5
      step perf_${m}_fp16_b8 60 "$KILN" perf "$MODELS/$m/model.onnx" --target gpu --fp16 --batch 8 -n 20 --warmup 3
    fi
  done
fi

# 6. The peer on the GPU: PyTorch eager, strict fp32, the same architectures (bert_small and
#    vit_tiny from make_models.py when it was carried into the models folder).
if python3 -c 'import torch, torchvision; assert torch.cuda.is_available()' 2> /dev/null; then
  mm=""
  [ -n "$MODELS" ] && [ -f "$MODELS/make_models.py" ] && mm="--make-models $MODELS/make_models.py"
  step torch_peer 120 python3 bench/torch_gpu_peer.py $mm --out "$OUT_DIR/torch-peer.md"
else
  skip torch_peer "no PyTorch with CUDA"
fi

# 7. The ONNX backend tests on gpu (the issue's goal: 98% of what ref passes). The runner
#    forks a child per test (each its own CUDA context); failures and reasons are listed.
OBT=""
for cand in ../shared/onnx-backend-tests shared/onnx-backend-tests; do [ -d "$cand/node" ] && OBT=$cand && break; done
if [ -z "$OBT" ] && [ -f gpu-models/onnx-backend-tests.tar.xz ]; then
  mkdir -p /tmp/kiln-obt && tar -xJf gpu-models/onnx-backend-tests.tar.xz -C /tmp/kiln-obt && OBT=/tmp/kiln-obt/onnx-backend-tests
fi
if [ -n "$OBT" ] && [ -x "$BUILD/bin/kiln_conformance" ]; then
  step conformance_gpu 150 "$BUILD/bin/kiln_conformance" --target gpu --dir "$OBT" --jobs "$(nproc)" --timeout 60 \
    --expected tests/conformance/expected_failures.txt --tolerances tests/conformance/tolerances.txt \
    --write-expected "$OUT_DIR/conformance-gpu.txt"
else
  skip conformance_gpu "no backend tests (gpu-models/onnx-backend-tests.tar.xz) or no kiln_conformance in $BUILD"
fi

# 8. The host CPU (an Intel Xeon with AMX on the lent machine: issues 19 and 20 have no other
#    such CPU): Kiln's cpu target against ONNX Runtime's Python package, fp32 and Kiln --bf16,
#    2 and all cores.
if [ -n "$MODELS" ] && python3 -c 'import onnxruntime, onnx' 2> /dev/null; then
  step cpu_compare 180 python3 bench/device_cpu_compare.py --kiln "$KILN" --models-dir "$MODELS" \
    --models bert_small,vit_tiny,lstm_seq,mobilenet_v2,resnet50 --threads "2,$(nproc)" --rounds 2 -n 10 --bf16 \
    --timeout 30 --out "$OUT_DIR/cpu-compare.md"
else
  skip cpu_compare "no models or no onnxruntime for python3"
fi
write_summary
echo "[gpu-check] done in $(elapsed)s: $JSON"

#!/usr/bin/env bash
# The main job end to end on the model the repository ships (examples/fashion_resnet):
# compile for the CPU, run, save the compiled program, load it back, compare.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
KILN="$BUILD/bin/kiln"
MODEL=examples/fashion_resnet/model.onnx
DATA=examples/fashion_resnet/test_data_set_0
OUT="$BUILD/demo"
TARGET=${KILN_DEMO_TARGET:-cpu}
rm -rf "$OUT" && mkdir -p "$OUT"

step() { printf '\n== %s\n' "$*"; }

step "the model's inputs and outputs"
"$KILN" params "$MODEL"

step "compile for $TARGET and save the compiled program (its batch stays dynamic: one .kiln for any batch)"
"$KILN" compile "$MODEL" --target "$TARGET" -o "$OUT/fashion_resnet.kiln"

step "run the ONNX model on 16 test images"
"$KILN" run "$MODEL" --target "$TARGET" --input "$DATA" --output "$OUT/from_onnx"

step "load the saved program and run it on the same 16 images (batch 16: compiled on this first call)"
"$KILN" run "$OUT/fashion_resnet.kiln" --input "$DATA" --output "$OUT/from_kiln"

step "outputs of the loaded program are identical to the freshly compiled one"
if cmp -s "$OUT/from_onnx/output_0.pb" "$OUT/from_kiln/output_0.pb"; then
    echo "identical: $OUT/from_onnx/output_0.pb == $OUT/from_kiln/output_0.pb"
else
    echo "DIFFERENT outputs after save/load" >&2
    exit 1
fi

step "compare with ONNX Runtime's outputs for the same images"
"$KILN" verify "$OUT/fashion_resnet.kiln" --input "$DATA" --expected "$DATA"

step "timing"
"$KILN" perf "$OUT/fashion_resnet.kiln" --input "$DATA" -n 20

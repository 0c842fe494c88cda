#!/usr/bin/env bash
# Installs the Debian packages Kiln needs; does nothing when they are all present.
#
#     scripts/install_deps.sh               what `make demo` and `make test` need
#     scripts/install_deps.sh --build-only  only what building the library and the tool needs
#                                           (-DKILN_BUILD_TESTS=OFF -DKILN_BUILD_PYTHON=OFF; the
#                                           serving image, deploy/kserve/Dockerfile)
set -euo pipefail

build_packages=(
  build-essential cmake g++ make pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev
  libdnnl-dev ocl-icd-opencl-dev  # dnnl-config.cmake looks for OpenCL (a Recommends, not a Depends)
  libmsgpack-cxx-dev nlohmann-json3-dev
  libboost-dev libssl-dev  # kiln serve's HTTP server (src/serve): Boost.Beast and Asio, TLS
  libgrpc++-dev protobuf-compiler-grpc  # kiln serve's gRPC server: the library, protoc's grpc_cpp_plugin
  libjpeg-dev libpng-dev libwebp-dev libopenjp2-7-dev
)
test_packages=(
  libgtest-dev
  pybind11-dev python3-dev python3-numpy python3-pytest libdlpack-dev
  python3-yaml  # tests/tools/test_deploy.py reads deploy/kserve's manifests
  python3-grpcio python3-protobuf  # tests/tools/test_serve_grpc.py's client (stubs from grpc_python_plugin)
  clang-format
  # examples/resnet50 (and its test): PyTorch's export, OpenCV's preprocessing in Python and C++.
  python3-torch python3-torchvision python3-opencv libopencv-dev
  # The clang check of `make test` (scripts/clang_check.py) and the fuzz build (scripts/fuzz.sh):
  # clang 14, its OpenMP header (-fopenmp), libFuzzer and the sanitizer runtimes.
  clang-14 libomp-14-dev libclang-rt-14-dev
)

packages=("${build_packages[@]}")
case "${1:-}" in
  --build-only) ;;
  "") packages+=("${test_packages[@]}") ;;
  *) echo "usage: scripts/install_deps.sh [--build-only]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

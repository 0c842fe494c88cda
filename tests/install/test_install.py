"""`cmake --install` into a fresh prefix, then two programs built outside the tree against it:
consumer.c through pkg-config, consumer.cpp through find_package(Kiln CONFIG). Both run on a
model from tests/data. Needs the build folder (KILN_BUILD_DIR, default build)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build"))
MODELS = os.path.join(ROOT, "tests", "data", "models")


def run(cmd, **kw):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("prefix"))
    run(["cmake", "--install", BUILD, "--prefix", p])
    return p


def test_layout(prefix):
    for rel in ["include/kiln/kiln.h", "include/kiln/kiln.hpp", "lib/libkiln_c.so", "lib/libkiln.so", "bin/kiln",
                "lib/cmake/Kiln/KilnConfig.cmake", "lib/cmake/Kiln/KilnConfigVersion.cmake", "lib/pkgconfig/kiln.pc"]:
        assert os.path.exists(os.path.join(prefix, rel)), rel
    # The installed tool finds its library through its RPATH ($ORIGIN/../lib).
    assert run([os.path.join(prefix, "bin", "kiln"), "--version"]).startswith("kiln ")


def test_installed_tool_loads_its_gpu_module(prefix):
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        if "KILN_HAVE_GPU:INTERNAL=ON\n" not in f.readlines():
            pytest.skip("built without the gpu target")
    # libkiln loads the gpu target from its own folder on first use: the install has it there.
    assert os.path.exists(os.path.join(prefix, "lib", "libkiln_gpu.so"))
    out = run([os.path.join(prefix, "bin", "kiln"), "targets"])
    gpu = next(line for line in out.splitlines() if line.startswith("gpu: "))
    assert "cannot load" not in gpu and "built without" not in gpu, out


def test_c_program_through_pkg_config(prefix, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "kiln"], env=env).split()
    exe = str(tmp_path / "consumer_c")
    run(["cc", "-std=c11", "-Wall", "-Werror", os.path.join(HERE, "consumer.c"), "-o", exe, *flags,
         "-Wl,-rpath," + os.path.join(prefix, "lib")])
    assert run([exe, os.path.join(MODELS, "add_relu.onnx")]).strip() == "2 0 4 0 6 0"


def test_cpp_program_through_find_package(prefix, tmp_path):
    build = str(tmp_path / "build")
    run(["cmake", "-S", HERE, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", build])
    out = run([os.path.join(build, "consumer"), os.path.join(MODELS, "mlp_dynamic.onnx")])
    assert out.split() == ["1.0000"] * 3

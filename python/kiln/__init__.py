"""Kiln: compile ONNX models and run them.

    import numpy as np, kiln
    model = kiln.parse_onnx("resnet50.onnx")
    model.compile(kiln.get_target("cpu"))
    out = np.asarray(model.run({"input": x})[0])
"""
import os as _os

# OpenMP (under oneDNN and Kiln's kernels) reads its wait policy when it loads: with its default
# spin, two processes running models on the same cores each become 5-10x slower. A short spin
# costs nothing on an idle machine. Set here, before the extension (and libgomp) loads, unless
# the user chose a policy. See docs/performance.md.
if "GOMP_SPINCOUNT" not in _os.environ and "OMP_WAIT_POLICY" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "1000"

from ._kiln import *  # noqa: F401,F403
from ._kiln import (  # noqa: F401
    Error,
    ParseError,
    UnsupportedError,
    ShapeError,
    TypeError,
    IOError,
    RuntimeError,
    OutOfMemoryError,
    InvalidArgumentError,
)

try:
    from ._kiln import __version__  # noqa: F401
except ImportError:  # pragma: no cover
    __version__ = "unknown"

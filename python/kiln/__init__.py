"""Kiln: compile ONNX models and run them.

    import numpy as np, kiln
    model = kiln.parse_onnx("resnet50.onnx")
    model.compile(kiln.get_target("cpu"))
    out = np.asarray(model.run({"input": x})[0])
"""
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

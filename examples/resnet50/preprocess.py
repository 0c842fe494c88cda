"""The guide's preprocessing, shared by export.py (for PyTorch's answers) and classify.py."""
import cv2
import numpy as np


def blob_from_image(image):
    """cv2.dnn.blobFromImage(image, 1/127.5, (224, 224), mean 127.5, swapRB): BGR uint8 HxWx3 in,
    float32 1x3x224x224 RGB in [-1, 1] out."""
    blob = cv2.dnn.blobFromImage(image, 1.0 / 127.5, (224, 224), (127.5, 127.5, 127.5), swapRB=True)
    return np.ascontiguousarray(blob, dtype=np.float32)

"""sensor_msgs/Image <-> numpy without cv_bridge.

Works on any object with the Image fields (``height``, ``width``, ``encoding``, ``is_bigendian``, ``step``,
``data``), so it is usable and testable without rclpy. The PyPI cv_bridge is not used: it fails with
numpy >= 2.3 and OpenCV 5.

Supported encodings (sensor_msgs/image_encodings names):

=================  ========  ========
encoding           dtype     channels
=================  ========  ========
rgb8, bgr8, 8UC3   uint8     3
rgba8, bgra8, 8UC4 uint8     4
mono8, 8UC1        uint8     1
mono16, 16UC1      uint16    1
32FC1              float32   1
=================  ========  ========

Arrays are (H, W) for one channel and (H, W, C) otherwise, in native byte order.
"""
import sys

import numpy as np

#: encoding -> (numpy dtype, channels)
ENCODINGS = {
    'rgb8': (np.uint8, 3),
    'bgr8': (np.uint8, 3),
    '8UC3': (np.uint8, 3),
    'rgba8': (np.uint8, 4),
    'bgra8': (np.uint8, 4),
    '8UC4': (np.uint8, 4),
    'mono8': (np.uint8, 1),
    '8UC1': (np.uint8, 1),
    'mono16': (np.uint16, 1),
    '16UC1': (np.uint16, 1),
    '32FC1': (np.float32, 1),
}

_NATIVE_BIG = sys.byteorder == 'big'


class ImageConversionError(ValueError):
    """The image cannot be converted (unsupported encoding, inconsistent sizes, wrong array)."""


def encoding_info(encoding):
    """(dtype, channels) of a supported encoding; ImageConversionError otherwise."""
    try:
        dtype, channels = ENCODINGS[encoding]
    except KeyError:
        raise ImageConversionError(
            f"unsupported image encoding '{encoding}' (supported: {', '.join(ENCODINGS)})") from None
    return np.dtype(dtype), channels


def image_to_numpy(msg, copy=True):
    """Array of an Image-like message: (H, W) or (H, W, C), dtype of the encoding, native byte order.

    Respects ``step`` (row padding) and ``is_bigendian``. With ``copy=False`` the array may be a read-only
    view of ``msg.data`` when no byte swap is needed.
    """
    dtype, channels = encoding_info(msg.encoding)
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    row = w * channels * dtype.itemsize
    if h <= 0 or w <= 0:
        raise ImageConversionError(f"image size {w}x{h} is empty")
    if step < row:
        raise ImageConversionError(
            f"step {step} is smaller than width * channels * bytes = {w} * {channels} * {dtype.itemsize} = {row}")
    buf = msg.data
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        # rclpy gives array.array('B') or a list; anything supporting the buffer protocol is fine.
        try:
            buf = memoryview(buf)
        except TypeError:
            buf = bytes(buf)
    raw = np.frombuffer(buf, dtype=np.uint8)
    if raw.size != step * h:
        raise ImageConversionError(
            f"image data has {raw.size} bytes, expected step * height = {step} * {h} = {step * h} "
            f"({msg.encoding} {w}x{h})")
    raw = raw.reshape(h, step)[:, :row]
    if dtype.itemsize > 1 and step != row:
        raw = np.ascontiguousarray(raw)  # numpy < 1.23 (Ubuntu 22.04) cannot view padded rows as wider items
    big = bool(msg.is_bigendian) and dtype.itemsize > 1
    src = dtype.newbyteorder('>' if big else '<') if dtype.itemsize > 1 else dtype
    arr = raw.view(src).reshape((h, w) if channels == 1 else (h, w, channels))
    # astype to the native dtype: copies when asked or when the bytes must be swapped, else a view.
    arr = arr.astype(dtype.newbyteorder('='), copy=copy)
    return arr


def fill_image(msg, array, encoding, step=None, bigendian=None):
    """Fill an Image-like object from an array; returns msg. Header fields are left alone.

    ``step``: row length in bytes (default: no padding, larger values pad each row with zeros).
    ``bigendian``: byte order of the data (default: this machine's).
    """
    dtype, channels = encoding_info(encoding)
    a = np.asarray(array)
    expected_ndim = 2 if channels == 1 else 3
    if a.ndim == 3 and channels == 1 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim != expected_ndim or (channels > 1 and a.shape[2] != channels):
        want = '(H, W)' if channels == 1 else f'(H, W, {channels})'
        raise ImageConversionError(f"{encoding} needs an array of shape {want}, got {a.shape}")
    if a.dtype != dtype:
        raise ImageConversionError(f"{encoding} needs dtype {dtype.name}, got {a.dtype.name}")
    h, w = a.shape[:2]
    if h == 0 or w == 0:
        raise ImageConversionError(f"image size {w}x{h} is empty")
    row = w * channels * dtype.itemsize
    step = row if step is None else int(step)
    if step < row:
        raise ImageConversionError(f"step {step} is smaller than the row size {row}")
    big = _NATIVE_BIG if bigendian is None else bool(bigendian)
    a = np.ascontiguousarray(a, dtype=dtype.newbyteorder('>' if big else '<'))
    if step == row:
        data = a.tobytes()
    else:
        padded = np.zeros((h, step), np.uint8)
        padded[:, :row] = a.view(np.uint8).reshape(h, row)
        data = padded.tobytes()
    msg.height, msg.width = int(h), int(w)
    msg.encoding = encoding
    msg.is_bigendian = int(big)
    msg.step = step
    msg.data = data  # bytes: much faster to assign than an ndarray or a list
    return msg


def numpy_to_image(array, encoding, header=None, step=None, bigendian=None):
    """A new sensor_msgs/msg/Image (imported lazily) filled from ``array``."""
    from sensor_msgs.msg import Image
    msg = Image()
    if header is not None:
        msg.header = header
    return fill_image(msg, array, encoding, step=step, bigendian=bigendian)


def to_mono8(array, encoding):
    """8-bit grey image of an rgb8/bgr8/rgba8/bgra8/mono8 array (for stereo matching)."""
    import cv2
    codes = {'rgb8': cv2.COLOR_RGB2GRAY, 'bgr8': cv2.COLOR_BGR2GRAY, '8UC3': cv2.COLOR_BGR2GRAY,
             'rgba8': cv2.COLOR_RGBA2GRAY, 'bgra8': cv2.COLOR_BGRA2GRAY, '8UC4': cv2.COLOR_BGRA2GRAY}
    if encoding in ('mono8', '8UC1'):
        return np.ascontiguousarray(array)
    if encoding in codes:
        return cv2.cvtColor(np.ascontiguousarray(array), codes[encoding])
    if encoding in ('mono16', '16UC1'):
        return (np.asarray(array) >> 8).astype(np.uint8)
    if encoding == '32FC1':
        a = np.asarray(array, dtype=np.float32)
        if not np.all(np.isfinite(a)):
            raise ImageConversionError('32FC1 intensity image holds NaN or inf')
        lo, hi = float(a.min()), float(a.max())
        scale = 255.0 / (hi - lo) if hi > lo else 0.0
        return np.clip((a - lo) * scale, 0, 255).astype(np.uint8)
    encoding_info(encoding)  # raises for unknown encodings
    raise ImageConversionError(f"no grey conversion for '{encoding}'")


def to_rgb8(array, encoding):
    """(H, W, 3) uint8 RGB of a colour or mono8 array (for coloured point clouds)."""
    import cv2
    a = np.ascontiguousarray(array)
    if encoding == 'rgb8':
        return a
    if encoding in ('bgr8', '8UC3'):
        return cv2.cvtColor(a, cv2.COLOR_BGR2RGB)
    if encoding == 'rgba8':
        return np.ascontiguousarray(a[:, :, :3])
    if encoding in ('bgra8', '8UC4'):
        return cv2.cvtColor(a, cv2.COLOR_BGRA2RGB)
    return cv2.cvtColor(to_mono8(a, encoding), cv2.COLOR_GRAY2RGB)

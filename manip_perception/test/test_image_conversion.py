"""image_conversion: round trips for every encoding, row padding, byte order, clear errors."""
import sys
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
from sensor_msgs.msg import Image

from manip_perception.image_conversion import (ENCODINGS, ImageConversionError, encoding_info, fill_image,
                                               image_to_numpy, numpy_to_image, to_mono8, to_rgb8)

RNG = np.random.default_rng(42)


def sample(encoding, h=7, w=5):
    dtype, ch = encoding_info(encoding)
    shape = (h, w) if ch == 1 else (h, w, ch)
    if dtype == np.float32:
        return (RNG.standard_normal(shape) * 1e3).astype(np.float32)
    return RNG.integers(0, np.iinfo(dtype).max, size=shape, endpoint=True).astype(dtype)


def plain_image():
    return SimpleNamespace(height=0, width=0, encoding='', is_bigendian=0, step=0, data=b'')


@pytest.mark.parametrize('encoding', sorted(ENCODINGS))
@pytest.mark.parametrize('pad', [0, 3, 17])
@pytest.mark.parametrize('bigendian', [False, True])
def test_round_trip_every_encoding(encoding, pad, bigendian):
    a = sample(encoding)
    dtype, ch = encoding_info(encoding)
    row = a.shape[1] * ch * dtype.itemsize
    msg = numpy_to_image(a, encoding, step=row + pad, bigendian=bigendian)
    assert isinstance(msg, Image)
    assert isinstance(msg.data, (bytes, bytearray)) or len(msg.data) == msg.step * msg.height
    assert (msg.height, msg.width, msg.step, msg.encoding) == (a.shape[0], a.shape[1], row + pad, encoding)
    assert len(msg.data) == msg.step * msg.height
    assert msg.is_bigendian == int(bigendian)
    back = image_to_numpy(msg)
    assert back.dtype == a.dtype and back.dtype.isnative
    assert back.shape == a.shape
    np.testing.assert_array_equal(back, a)
    back.flat[0] = back.flat[0]  # a copy: writable


@pytest.mark.parametrize('encoding', sorted(ENCODINGS))
def test_plain_object_round_trip(encoding):
    """Any object with the Image fields works (no rclpy / message classes needed)."""
    a = sample(encoding, 4, 9)
    msg = fill_image(plain_image(), a, encoding, step=None)
    assert isinstance(msg.data, bytes)
    np.testing.assert_array_equal(image_to_numpy(msg), a)


def test_byte_layout_matches_ros_conventions():
    # mono16 big-endian: most significant byte first.
    msg = numpy_to_image(np.array([[0x0102, 0xA0B0]], np.uint16), 'mono16', bigendian=True)
    assert bytes(msg.data) == b'\x01\x02\xa0\xb0'
    msg = numpy_to_image(np.array([[0x0102, 0xA0B0]], np.uint16), '16UC1', bigendian=False)
    assert bytes(msg.data) == b'\x02\x01\xb0\xa0'
    # rgb8: R, G, B per pixel, row padding after each row.
    msg = numpy_to_image(np.array([[[1, 2, 3], [4, 5, 6]]], np.uint8), 'rgb8', step=8)
    assert bytes(msg.data) == b'\x01\x02\x03\x04\x05\x06\x00\x00'
    # A hand-made big-endian 32FC1 message decodes to native floats.
    m = plain_image()
    m.height, m.width, m.encoding, m.is_bigendian, m.step = 1, 2, '32FC1', 1, 12
    m.data = np.array([1.5, -2.25], '>f4').tobytes() + b'\xff' * 4
    np.testing.assert_array_equal(image_to_numpy(m), np.array([[1.5, -2.25]], np.float32))


def test_native_byte_order_default_and_rclpy_data_type():
    msg = numpy_to_image(sample('32FC1'), '32FC1')
    assert msg.is_bigendian == int(sys.byteorder == 'big')
    # rclpy stores uint8[] as array.array: decoding works on it too.
    from rclpy.serialization import deserialize_message, serialize_message
    back_msg = deserialize_message(serialize_message(msg), Image)
    np.testing.assert_array_equal(image_to_numpy(back_msg), image_to_numpy(msg))


def test_view_without_copy():
    a = sample('rgb8', 6, 6)
    msg = numpy_to_image(a, 'rgb8')
    v = image_to_numpy(msg, copy=False)
    np.testing.assert_array_equal(v, a)


def test_errors_are_clear():
    with pytest.raises(ImageConversionError, match="unsupported image encoding 'yuv422'"):
        image_to_numpy(SimpleNamespace(height=2, width=2, encoding='yuv422', is_bigendian=0, step=4,
                                       data=b'\0' * 8))
    with pytest.raises(ImageConversionError, match='unsupported'):
        numpy_to_image(np.zeros((2, 2), np.uint8), 'bayer_rggb8')
    msg = numpy_to_image(sample('rgb8', 4, 4), 'rgb8')
    msg.data = bytes(msg.data)[:-1]
    with pytest.raises(ImageConversionError, match='47 bytes, expected step \\* height = 12 \\* 4 = 48'):
        image_to_numpy(msg)
    msg = numpy_to_image(sample('rgb8', 4, 4), 'rgb8')
    msg.width = 5  # step now too small for the width
    with pytest.raises(ImageConversionError, match='step 12 is smaller'):
        image_to_numpy(msg)
    with pytest.raises(ImageConversionError, match='empty'):
        image_to_numpy(SimpleNamespace(height=0, width=4, encoding='mono8', is_bigendian=0, step=4, data=b''))
    with pytest.raises(ImageConversionError, match='needs dtype uint8'):
        numpy_to_image(np.zeros((2, 2, 3), np.float32), 'rgb8')
    with pytest.raises(ImageConversionError, match=r'shape \(H, W, 3\)'):
        numpy_to_image(np.zeros((2, 2), np.uint8), 'bgr8')
    with pytest.raises(ImageConversionError, match='step 2 is smaller'):
        numpy_to_image(np.zeros((2, 2), np.uint16), 'mono16', step=2)


def test_colour_conversions():
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)  # red
    rgb[1, 2] = (0, 0, 255)  # blue
    bgr = rgb[:, :, ::-1].copy()
    assert to_rgb8(bgr, 'bgr8')[0, 0].tolist() == [255, 0, 0]
    np.testing.assert_array_equal(to_mono8(rgb, 'rgb8'), cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))
    np.testing.assert_array_equal(to_mono8(bgr, 'bgr8'), to_mono8(rgb, 'rgb8'))
    rgba = np.concatenate([rgb, np.full((2, 3, 1), 255, np.uint8)], axis=2)
    np.testing.assert_array_equal(to_mono8(rgba, 'rgba8'), to_mono8(rgb, 'rgb8'))
    np.testing.assert_array_equal(to_rgb8(rgba[:, :, [2, 1, 0, 3]].copy(), 'bgra8'), rgb)
    assert to_mono8(np.array([[0, 65535]], np.uint16), 'mono16').tolist() == [[0, 255]]
    assert to_mono8(np.array([[1.0, 3.0]], np.float32), '32FC1').tolist() == [[0, 255]]
    with pytest.raises(ImageConversionError, match='NaN'):
        to_mono8(np.array([[1.0, np.nan]], np.float32), '32FC1')

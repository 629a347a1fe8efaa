"""pairing: left/right images by identical stamp, timeouts and a bounded buffer (fake clock)."""
import pytest

from manip_perception.pairing import StereoPairer


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_pairs_identical_stamps_in_any_order():
    p = StereoPairer(max_delay_s=0.5, max_pending=4, clock=FakeClock())
    assert p.add('left', (1, 0), 'L1') is None
    assert p.add('left', (2, 0), 'L2') is None
    assert p.add('right', (2, 0), 'R2') == ('L2', 'R2')
    assert p.add('right', (1, 0), 'R1') == ('L1', 'R1')
    assert p.add('right', (3, 5), 'R3') is None
    assert p.add('left', (3, 5), 'L3') == ('L3', 'R3')  # always (left, right)
    assert p.add('left', (4, 0), 'L4') is None
    assert p.add('right', (4, 1), 'R4') is None  # 1 ns apart: not a pair
    assert p.counts['paired'] == 3
    assert p.pending('left') == 1 and p.pending('right') == 1


def test_unmatched_images_expire():
    clock = FakeClock()
    p = StereoPairer(max_delay_s=0.5, max_pending=10, clock=clock)
    p.add('left', (1, 0), 'L1')
    p.add('right', (5, 0), 'R5')
    clock.t += 0.4
    p.add('left', (2, 0), 'L2')
    clock.t += 0.2  # L1 and R5 are now 0.6 s old, L2 0.2 s
    assert p.add('right', (1, 0), 'R1') is None  # its partner expired
    assert p.counts['dropped_left'] == 1 and p.counts['dropped_right'] == 1
    assert p.add('right', (2, 0), 'R2') == ('L2', 'R2')
    clock.t += 1.0
    assert p.expire() == 1  # R1
    assert p.dropped == 3


def test_buffer_is_bounded_and_duplicates_replace():
    p = StereoPairer(max_delay_s=10, max_pending=3, clock=FakeClock())
    for k in range(5):
        p.add('left', (k, 0), f'L{k}')
    assert p.pending('left') == 3 and p.counts['dropped_left'] == 2
    assert p.add('right', (0, 0), 'R0') is None  # L0 was pushed out
    p.add('left', (4, 0), 'L4 again')
    assert p.counts['replaced'] == 1
    assert p.add('right', (4, 0), 'R4') == ('L4 again', 'R4')


def test_invalid_arguments():
    with pytest.raises(ValueError):
        StereoPairer(max_delay_s=0)
    with pytest.raises(ValueError):
        StereoPairer(max_pending=0)
    with pytest.raises(ValueError):
        StereoPairer().add('middle', (0, 0), None)

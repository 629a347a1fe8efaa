"""Pairs left/right images by identical header stamp (no rclpy; the node feeds it).

A small buffer per side holds images waiting for their partner; an image left unmatched for longer than
``max_delay_s`` (arrival time, monotonic clock, so that it works with sim time and bag replay alike) or
pushed out of a full buffer is dropped and counted.
"""
import time
from collections import OrderedDict


class StereoPairer:
    SIDES = ('left', 'right')

    def __init__(self, max_delay_s=0.5, max_pending=10, clock=time.monotonic):
        if not max_delay_s > 0:
            raise ValueError(f"max_delay_s must be > 0, got {max_delay_s}")
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self.max_delay_s = float(max_delay_s)
        self.max_pending = int(max_pending)
        self._clock = clock
        self._pending = {s: OrderedDict() for s in self.SIDES}  # stamp -> (arrival, msg)
        self.counts = {'paired': 0, 'dropped_left': 0, 'dropped_right': 0, 'replaced': 0}

    def add(self, side, stamp, msg):
        """Store ``msg`` (stamp: any hashable, e.g. (sec, nanosec)); returns (left, right) when its partner
        is waiting, else None."""
        if side not in self._pending:
            raise ValueError(f"side must be 'left' or 'right', got {side!r}")
        now = self._clock()
        self.expire(now)
        other = self._pending['right' if side == 'left' else 'left']
        if stamp in other:
            _, partner = other.pop(stamp)
            self.counts['paired'] += 1
            return (msg, partner) if side == 'left' else (partner, msg)
        mine = self._pending[side]
        if stamp in mine:
            self.counts['replaced'] += 1
            del mine[stamp]
        mine[stamp] = (now, msg)
        while len(mine) > self.max_pending:
            mine.popitem(last=False)
            self.counts['dropped_' + side] += 1
        return None

    def expire(self, now=None):
        """Drop images older than max_delay_s; returns how many were dropped."""
        now = self._clock() if now is None else now
        dropped = 0
        for side, pending in self._pending.items():
            while pending:
                stamp, (arrival, _) = next(iter(pending.items()))
                if now - arrival <= self.max_delay_s:
                    break
                del pending[stamp]
                self.counts['dropped_' + side] += 1
                dropped += 1
        return dropped

    def pending(self, side):
        return len(self._pending[side])

    @property
    def dropped(self):
        return self.counts['dropped_left'] + self.counts['dropped_right']

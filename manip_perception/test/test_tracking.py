"""tracking: appear after N consecutive frames, disappear after M, matching by centre distance."""
import numpy as np
import pytest

from manip_perception.obstacles import Obstacle
from manip_perception.tracking import ObstacleTracker


def ob(x, conf=1.0):
    return Obstacle(center=np.array([x, 0.0, 0.1]), size=np.full(3, 0.1), radius=0.09, num_points=50,
                    confidence=conf)


def test_appear_and_disappear():
    tr = ObstacleTracker(appear_frames=3, disappear_frames=2, match_distance=0.05)
    assert tr.update([ob(0.0)]) == []
    assert tr.update([ob(0.01)]) == []
    out = tr.update([ob(0.02), ob(1.0)])  # third consecutive frame: confirmed; the new one is not yet
    assert len(out) == 1 and out[0].center[0] == pytest.approx(0.02)
    out = tr.update([ob(1.0)])  # first miss: kept with its last box
    assert len(out) == 1 and out[0].center[0] == pytest.approx(0.02)
    assert out[0].confidence == pytest.approx(3 / 4)  # detected in 3 of the last 4 frames
    out = tr.update([ob(1.0)])  # second miss: gone; the other one confirmed now
    assert [round(o.center[0], 3) for o in out] == [1.0]
    # A detection that jumps beyond match_distance starts a new track.
    tr2 = ObstacleTracker(2, 1, 0.05)
    tr2.update([ob(0.0)])
    assert tr2.update([ob(0.2)]) == []


def test_flicker_is_suppressed_and_pass_through():
    tr = ObstacleTracker(appear_frames=2, disappear_frames=1)
    seen = [len(tr.update([ob(0.5)] if k % 2 == 0 else [])) for k in range(8)]
    assert seen == [0] * 8  # never two frames in a row
    through = ObstacleTracker(1, 1)
    assert len(through.update([ob(0.0), ob(1.0)])) == 2 and through.update([]) == []
    with pytest.raises(ValueError, match='track_appear_frames'):
        ObstacleTracker(0, 1)

"""Temporal filter of obstacles across frames: an obstacle appears after ``appear_frames`` consecutive
frames with a detection and disappears after ``disappear_frames`` consecutive frames without one.

No rclpy import. Detections of a frame are matched to the tracks greedily, nearest box centres first,
within ``match_distance`` (m, base frame). A confirmed track that misses a frame keeps its last box until it
is dropped. ``appear_frames = disappear_frames = 1`` passes every frame's detections through unchanged.

Confidence of a published obstacle: its single-frame confidence (the share of core voxels of its cluster,
see obstacles.describe_clusters) times the share of the last ``appear_frames + disappear_frames - 1``
frames (at most) in which it was detected.
"""
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class Track:
    id: int
    obstacle: object  # the latest obstacles.Obstacle
    hits: int = 1  # consecutive frames with a detection
    misses: int = 0  # consecutive frames without one
    confirmed: bool = False
    history: deque = field(default_factory=deque)  # 1/0 per frame, newest last


class ObstacleTracker:
    def __init__(self, appear_frames=1, disappear_frames=1, match_distance=0.05):
        if appear_frames < 1 or disappear_frames < 1:
            raise ValueError(f"track_appear_frames and track_disappear_frames must be >= 1, got "
                             f"{appear_frames}, {disappear_frames}")
        if not match_distance > 0:
            raise ValueError(f"track_match_distance must be > 0, got {match_distance}")
        self.appear_frames, self.disappear_frames = int(appear_frames), int(disappear_frames)
        self.match_distance = float(match_distance)
        self.window = self.appear_frames + self.disappear_frames - 1
        self.tracks = []
        self._next_id = 0

    def update(self, obstacles):
        """Feed one frame's detections; returns the confirmed obstacles (copies with ``confidence`` set),
        sorted by track id (age)."""
        dets = list(obstacles)
        pairs = []
        for ti, tr in enumerate(self.tracks):
            for di, d in enumerate(dets):
                dist = float(np.linalg.norm(np.asarray(tr.obstacle.center) - np.asarray(d.center)))
                if dist <= self.match_distance:
                    pairs.append((dist, ti, di))
        pairs.sort()
        used_t, used_d = set(), set()
        for _, ti, di in pairs:
            if ti in used_t or di in used_d:
                continue
            used_t.add(ti)
            used_d.add(di)
            tr = self.tracks[ti]
            tr.obstacle, tr.hits, tr.misses = dets[di], tr.hits + 1, 0
            tr.history.append(1)
        kept = []
        for ti, tr in enumerate(self.tracks):
            if ti not in used_t:
                tr.hits, tr.misses = 0, tr.misses + 1
                tr.history.append(0)
                if tr.misses >= self.disappear_frames or not tr.confirmed:
                    continue
            kept.append(tr)
        for di, d in enumerate(dets):
            if di not in used_d:
                kept.append(Track(self._next_id, d, history=deque([1])))
                self._next_id += 1
        out = []
        for tr in kept:
            while len(tr.history) > self.window:
                tr.history.popleft()
            if tr.hits >= self.appear_frames:
                tr.confirmed = True
            if tr.confirmed:
                share = sum(tr.history) / len(tr.history)
                out.append(replace(tr.obstacle, confidence=float(tr.obstacle.confidence * share)))
        self.tracks = kept
        return out

    def reset(self):
        self.tracks = []

"""Counters inside the viewer's page: what reached it from the viewer and what it drew, apart from how fast the
browser renders.

``PAGE_STATS_JS`` is installed before the page's own scripts (``Browser.add_init_script``) and keeps
``window.__manipStats``:
- ``arm`` / ``cloud``: message batches that viser's websocket worker handed to the page holding a new pose of the
  arm (a ``SetPositionMessage`` of a ``/robot/...`` node) / a new point cloud (``/cloud``'s points, created or
  updated); ``tip``: the newest position received for the node named ``tipNode`` (m, base frame);
- ``frames``: frames the page drew (animation-frame turns with at least one WebGL draw call); ``armFrames`` /
  ``cloudFrames``: drawn frames that showed a new arm pose / cloud (one that arrived after the previous drawn
  frame: viser applies the messages at the start of each frame, so several updates between two frames are one);
- ``t_ms``: the page's clock (performance.now()) when read.
Rates are differences of two ``read`` results over the page's own clock (``rates``).
"""
from __future__ import annotations

import json

__all__ = ["PAGE_STATS_JS", "install", "read", "rates"]

PAGE_STATS_JS = r"""(() => {
  if (window.__manipStats) return;
  const s = window.__manipStats = {arm: 0, cloud: 0, batches: 0, frames: 0, armFrames: 0, cloudFrames: 0,
                                   tip: null, tipNode: null, t_ms: 0};
  let armNew = false, cloudNew = false, turn = 0, drawnTurn = -1;
  const onMessage = (e) => {
    const d = e.data;
    if (!d || d.type !== 'message_batch') return;
    s.batches++;
    let arm = false, cloud = false;
    for (const m of d.messages) {
      if (m.type === 'SetPositionMessage' && m.name.startsWith('/robot/')) {
        arm = true;
        if (m.name === s.tipNode) s.tip = Array.from(m.position);
      } else if ((m.type === 'SceneNodeUpdateMessage' && m.name === '/cloud' && m.updates && 'points' in m.updates)
                 || (m.type === 'PointCloudMessage' && m.name === '/cloud')) {
        cloud = true;
      }
    }
    if (arm) { s.arm++; armNew = true; }
    if (cloud) { s.cloud++; cloudNew = true; }
  };
  const W = window.Worker;  // viser's websocket client runs in a worker that posts each decoded batch
  window.Worker = class extends W {
    constructor(...a) { super(...a); this.addEventListener('message', onMessage); }
  };
  const onDraw = () => {
    if (drawnTurn === turn) return;
    drawnTurn = turn;  // the first draw call of this animation frame: a frame drawn
    s.frames++;
    if (armNew) { s.armFrames++; armNew = false; }
    if (cloudNew) { s.cloudFrames++; cloudNew = false; }
  };
  for (const C of [window.WebGL2RenderingContext, window.WebGLRenderingContext]) {
    if (!C) continue;
    for (const f of ['drawArrays', 'drawElements', 'drawArraysInstanced', 'drawElementsInstanced',
                     'drawRangeElements']) {
      const g = C.prototype[f];
      if (g) C.prototype[f] = function (...a) { onDraw(); return g.apply(this, a); };
    }
  }
  const raf = window.requestAnimationFrame.bind(window);
  const tick = () => { turn++; raf(tick); };
  raf(tick);
})()"""


def install(browser, tip_node=None):
    """Install the counters in every page ``browser`` opens from now on (call before ``browser.open``);
    ``tip_node`` (e.g. "/robot/tool0") names the node whose newest position ``tip`` holds."""
    browser.add_init_script(PAGE_STATS_JS + (f";window.__manipStats.tipNode = {json.dumps(tip_node)};"
                                             if tip_node else ""))


def read(browser, tip_node=None, timeout_s=300.0):
    """The page's counters now (a dict, see the module docstring); ``tip_node`` (e.g. "/robot/tool0") names the
    node whose position ``tip`` follows from now on."""
    set_tip = f"window.__manipStats.tipNode = {json.dumps(tip_node)};" if tip_node else ""
    return json.loads(browser.evaluate(
        f"(() => {{ {set_tip} window.__manipStats.t_ms = performance.now(); "
        "return JSON.stringify(window.__manipStats); })()", timeout_s))


def rates(before, after):
    """Per second of the page's clock between two ``read`` results: {counter: Hz} for the counts."""
    dt_s = (after["t_ms"] - before["t_ms"]) / 1e3
    keys = ("arm", "cloud", "batches", "frames", "armFrames", "cloudFrames")
    return {k: (after[k] - before[k]) / dt_s for k in keys} | {"seconds": dt_s}

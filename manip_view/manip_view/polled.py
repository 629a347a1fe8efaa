"""Subscriptions that no executor spins: the viewer takes their messages when it draws, not when they arrive.

rclpy's executors run Python for every message (wait set, task, callback): a 100 Hz joint_states, a 250 Hz
controller_state and a /tf at the joint_states rate cost the viewer more CPU than drawing them (profiled with
py-spy: about half of the viewer's samples were in the executor). A ``PolledSubscriptions`` is a hidden node of
its own (``_<name>_polled``, not added to any executor: DDS queues its messages, at most ``depth`` per topic, the
oldest dropped) from which a drawing thread ``take``s the newest message or ``take_all`` the queued ones at its own
cadence, each a C call that deserialises one message.

ROS glue only (the viewer node's): no maths here.
"""
from __future__ import annotations

__all__ = ["PolledSubscriptions"]


class PolledSubscriptions:
    """A hidden node (same context and namespace as ``node``) whose subscriptions are read by ``take`` /
    ``take_all``; ``subscribe`` returns the key to read a topic by. One thread at a time per subscription."""

    def __init__(self, node):
        from rclpy.node import Node

        self.node = Node(f"_{node.get_name()}_polled", context=node.context, namespace=node.get_namespace(),
                         start_parameter_services=False, enable_rosout=False)
        self._subs = []

    def subscribe(self, msg_type, topic, qos):
        """Queue ``topic``'s messages (KEEP_LAST of ``qos``: at most its depth); the key for take/take_all."""
        self._subs.append(self.node.create_subscription(msg_type, topic, lambda _: None, qos))
        return len(self._subs) - 1

    def _take_one(self, sub):
        with sub.handle:
            got = sub.handle.take_message(sub.msg_type, sub.raw)
        return None if got is None else got[0]

    def take_all(self, key, limit=10_000):
        """Every message queued for ``key`` since the last take, oldest first (at most ``limit``)."""
        sub, out = self._subs[key], []
        while len(out) < limit:
            msg = self._take_one(sub)
            if msg is None:
                break
            out.append(msg)
        return out

    def take(self, key):
        """The newest message queued for ``key`` (the older queued ones are dropped), or None when none came."""
        sub, newest = self._subs[key], None
        while True:
            msg = self._take_one(sub)
            if msg is None:
                return newest
            newest = msg

    def topic_name(self, key):
        return self._subs[key].topic_name

    def close(self):
        self.node.destroy_node()

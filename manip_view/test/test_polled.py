"""manip_view.polled over real DDS in one process: a subscription no executor spins keeps what its QoS depth
allows; ``take_all`` returns the queued messages oldest first, ``take`` the newest (the older ones dropped)."""
import os
import random
import time

import pytest
from rclpy.qos import HistoryPolicy, QoSProfile

from manip_view.polled import PolledSubscriptions


@pytest.fixture
def node():
    import rclpy

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=random.randint(100, 200))
    n = rclpy.create_node("polled_test", context=context)
    yield n
    n.destroy_node()
    rclpy.shutdown(context=context)


def _wait_matched(pub, timeout_s=60.0):
    """Wait until the polled subscription is matched (discovery), so that what is published next is delivered."""
    deadline = time.monotonic() + timeout_s
    while pub.get_subscription_count() < 2:
        assert time.monotonic() < deadline, "the polled subscriptions were never matched"
        time.sleep(0.05)


def _wait_taken(take, count, timeout_s=60.0):
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += take()
        time.sleep(0.02)
    return got


def test_take_all_returns_the_queue_in_order_and_take_only_the_newest(node):
    from std_msgs.msg import Int32

    polled = PolledSubscriptions(node)
    try:
        assert polled.node.get_name() == "_polled_test_polled"  # hidden: ros2 node list leaves it out
        queued = polled.subscribe(Int32, "counts", QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST))
        newest = polled.subscribe(Int32, "counts", QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST))
        assert polled.topic_name(queued) == "/counts"
        pub = node.create_publisher(Int32, "counts", 10)
        _wait_matched(pub)
        assert polled.take(newest) is None and polled.take_all(queued) == []
        for k in range(5):
            pub.publish(Int32(data=k))
        got = _wait_taken(lambda: polled.take_all(queued), 5)
        assert [m.data for m in got] == [0, 1, 2, 3, 4]
        # The depth-1 queue kept the last message only (DDS dropped the older ones as they came).
        assert polled.take(newest).data == 4
        assert polled.take(newest) is None and polled.take_all(queued) == []
        # More than the depth: the oldest are dropped, the newest 10 kept, in order (taken once the last one is
        # in: both readers are fed by the one participant, sample by sample).
        for k in range(5, 25):
            pub.publish(Int32(data=k))
        last = _wait_taken(lambda: [m for m in [polled.take(newest)] if m is not None and m.data == 24], 1)
        assert [m.data for m in last] == [24]
        assert [m.data for m in polled.take_all(queued)] == list(range(15, 25))
    finally:
        polled.close()

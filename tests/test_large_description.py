"""A large robot description never delays a control tick (issue 16): the controller parses robot_description
texts on a thread of its own (manip_core.ros.model_source), so its command stream keeps its period while a
description that takes seconds to parse arrives. Process to process over real DDS (fixtures: tests/conftest.py).

The oracle is the controller's own output: effort commands, one per control tick (250 Hz), received by this
client. While a UR5 description padded with 28000 fixed links (3.4 MB, below MAX_DESCRIPTION_BYTES) (and one changed
velocity limit, so that it is a different robot the controller installs and logs) is being parsed - about 2 s on a
quiet 2-core machine, more under load - the largest gap between two commands stays far below that parse time.
"""
import re
import time

from manip_core.robots import robot_path

UR5 = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
       "wrist_3_joint"]
Q0 = [3.0, -1.4, 1.5, -1.7, -1.6, 0.2]


def padded_ur5(links):
    """UR5 URDF text with ``links`` extra links on fixed joints and wrist_3's velocity limit changed."""
    text = robot_path("ur5").read_text()
    i = text.rindex('velocity="3.15"')   # the last joint's (wrist_3)
    text = text[:i] + 'velocity="3.1"' + text[i + len('velocity="3.15"'):]
    extra = "".join(f'<link name="pad{i}"/><joint name="pad_joint{i}" type="fixed"><parent link="base_link"/>'
                    f'<child link="pad{i}"/></joint>\n' for i in range(links))
    i = text.rindex("</robot>")
    return text[:i] + extra + text[i:]


def test_large_description_never_delays_a_control_tick(node_procs, ros_client):
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, Header, String

    from manip_core.ros.model_source import DESCRIPTION_QOS, MAX_DESCRIPTION_BYTES
    node = ros_client.node
    desc = node.create_publisher(String, "robot_description", DESCRIPTION_QOS)
    desc.publish(String(data=robot_path("ur5").read_text()))
    js = node.create_publisher(JointState, "joint_states", 10)
    node.create_timer(0.02, lambda: js.publish(JointState(
        name=UR5, position=Q0, velocity=[0.0] * 6, header=Header(stamp=node.get_clock().now().to_msg()))))
    arrivals = []
    node.create_subscription(Float64MultiArray, "effort_controller/commands",
                             lambda m: arrivals.append(time.monotonic()), 10)
    ctl = node_procs("controller", {"state_timeout": 5.0, "rate_hz": 250.0})
    ctl.wait_log(r"robot model from robot_description topic: ur5", timeout=120)
    assert ros_client.spin_until(lambda: len(arrivals) > 250, 60), ctl.log[-2000:]
    text = padded_ur5(28000)
    assert len(text.encode()) < MAX_DESCRIPTION_BYTES
    t0 = time.monotonic()
    desc.publish(String(data=text))

    def installed():
        return len(re.findall(r"robot model from robot_description topic: ur5", ctl.log)) >= 2
    assert ros_client.spin_until(installed, 120), ctl.log[-2000:]
    t1 = time.monotonic()
    ros_client.spin_until(lambda: False, 0.5)
    window = [t for t in arrivals if t0 <= t <= t1]
    gaps = [b - a for a, b in zip(window, window[1:])]
    parse_s = t1 - t0
    print(f"{len(text)} bytes parsed in {parse_s:.2f} s; {len(window)} commands meanwhile, largest gap "
          f"{max(gaps):.3f} s")
    # a parse that blocked the control loop would leave a gap of about parse_s; 0.5 s is 125 ticks (1.8 MB took
    # 0.97 s in a quiet CI run, so the 3.4 MB text keeps this well clear on a fast machine)
    assert parse_s > 0.5, "the description parsed too fast to show anything"
    assert len(window) > 10
    # one tick is 4 ms; DDS delivery and the 2-core machine's load add jitter, never a parse's seconds
    assert max(gaps) < min(0.5, parse_s / 2), (max(gaps), parse_s)
    assert "Traceback" not in ctl.log

"""Test helper process (not a test): publishes serialized stereo messages for test_node.py.

It runs in its own process so that its Fast DDS participant is created with the large-segment profile
(FASTDDS_DEFAULT_PROFILES_FILE, read once per process): a best-effort 640x480 image published with the
default profile practically never reaches another process.

Protocol: each stdin line is the path of a pickle {'steps': [...], 'repeat': seconds or None}; a step is
(key, raw CDR bytes) with key in left, right, left_info, right_info, joint_states (reliable),
known_objects (reliable, transient local), tf_static (when tf2_msgs is installed), or
('sleep', seconds). A new line
replaces the running script; with 'repeat' the script runs again every that many seconds. Prints
'ready' once the four stereo topics have a subscriber, and 'ran <n>' after each run. Ends at stdin EOF or SIGINT.
"""
import pickle
import sys
import threading
import time

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState

SD = qos_profile_sensor_data
TOPICS = {'left': ('stereo/left/image_rect', Image, SD), 'right': ('stereo/right/image_rect', Image, SD),
          'left_info': ('stereo/left/camera_info', CameraInfo, SD),
          'right_info': ('stereo/right/camera_info', CameraInfo, SD),
          'joint_states': ('joint_states', JointState, 10)}
try:
    from rclpy.qos import DurabilityPolicy, QoSProfile

    from manip_msgs.msg import SceneObjectArray
    TOPICS['known_objects'] = ('known_objects', SceneObjectArray,
                               QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
except ImportError:
    pass
STEREO = ('left', 'right', 'left_info', 'right_info')
try:  # tf2_msgs is built by scripts/setup.sh; without it there is no tf_static key
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from tf2_msgs.msg import TFMessage
    TOPICS['tf_static'] = ('/tf_static', TFMessage, QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
except ImportError:
    pass


def main():
    rclpy.init()
    node = rclpy.create_node('stereo_feeder')
    pubs = {k: node.create_publisher(t, topic, qos) for k, (topic, t, qos) in TOPICS.items()}
    state = {'script': None, 'stop': False}
    lock = threading.Lock()
    wake = threading.Event()

    def read_stdin():
        for line in sys.stdin:
            with open(line.strip(), 'rb') as f:
                script = pickle.load(f)
            with lock:
                state['script'] = script
                state['next'] = 0.0
            wake.set()
        state['stop'] = True
        wake.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    try:
        while not all(pubs[k].get_subscription_count() > 0 for k in STEREO):
            rclpy.spin_once(node, timeout_sec=0.1)
        print('ready', flush=True)
        runs = 0
        while not state['stop'] and rclpy.ok():
            with lock:
                script, due = state['script'], state.get('next', 0.0)
            if script is None or time.monotonic() < due:
                wake.wait(0.05)
                wake.clear()
                continue
            for step in script['steps']:
                if step[0] == 'sleep':
                    time.sleep(step[1])
                else:
                    pubs[step[0]].publish(step[1])
            runs += 1
            print(f'ran {runs}', flush=True)
            with lock:
                if state['script'] is script:
                    if script.get('repeat'):
                        state['next'] = time.monotonic() + script['repeat']
                    else:
                        state['script'] = None
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()

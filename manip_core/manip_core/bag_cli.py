"""``manip-bag``: record and play rosbag2 files with the ``rosbags`` package (rosbag2_py is not on PyPI).

    manip-bag record OUT --topics /a /b ... [--storage mcap|sqlite3] [--version 8|9] [--duration S]
                         [--wait S] [--use-sim-time]
    manip-bag play BAG [--rate R] [--loop] [--topics ...] [--clock-rate HZ] [--start-paused-s S]
    manip-bag info BAG

record: subscribes to each topic with the type and reliability its publishers offer (waits up to --wait s
for them to appear), stores the raw CDR bytes with their receive time (node clock: wall time, or /clock
with --use-sim-time), until Ctrl-C or --duration; progress (messages per topic) every second on stderr.
The callbacks only queue the bytes (bounded, --max-queue-mb); a writer thread writes the bag, so that a
slow write (camera images) does not make a fast topic overflow its subscription queue (--depth messages);
messages the bound refuses are counted and reported, and make the exit status 1.
play: publishes every message at its recorded time offset divided by --rate, with the recorded QoS
reliability and durability; publishes /clock (rosgraph_msgs/Clock, the bag time of the messages) at
--clock-rate Hz (default 100; 0: none; a /clock recorded in the bag is then played as recorded instead);
--loop repeats until Ctrl-C; progress (bag time, messages) on stderr.

Both apply manip's Fast DDS large-data profile (camera images cross processes) unless
FASTDDS_DEFAULT_PROFILES_FILE is set. Exit status: 0, 1 on a run-time failure, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time

from .bag import BagError, BagRecorder, PlaybackClock, QueuedWriter, read_bag


def _msg_class(msgtype):
    pkg, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def _err(text):
    print(f"manip-bag: {text}", file=sys.stderr)


def _progress(text):
    print(f"\r{text}\x1b[K", end="", file=sys.stderr, flush=True)


def _start_ros(args_use_sim_time=False, name="manip_bag"):
    from manip_core.ros.node_main import init_rclpy
    from manip_core.ros.transport import use_large_data_profile
    use_large_data_profile()
    stop = init_rclpy(None)
    import rclpy
    from rclpy.parameter import Parameter
    node = rclpy.create_node(name, parameter_overrides=[Parameter("use_sim_time", value=bool(args_use_sim_time))])
    return stop, node


def record(args):
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    try:
        bag = BagRecorder(args.out, storage=args.storage, version=args.version)
    except BagError as e:
        _err(str(e))
        return 2
    stop, node = _start_ros(args.use_sim_time, "manip_bag_record")
    from rclpy.executors import SingleThreadedExecutor
    # an executor of its own: rclpy.spin_once(node) adds and removes the node on the global executor per call
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    writer = QueuedWriter(bag, max_bytes=int(args.max_queue_mb * (1 << 20)))
    topics = [t if t.startswith("/") else "/" + t for t in args.topics]
    subs = {}
    code = 0
    t_start = time.monotonic()
    try:
        deadline = time.monotonic() + args.wait
        while len(subs) < len(topics) and not stop.is_set():
            types = dict(node.get_topic_names_and_types())
            for topic in topics:
                if topic in subs or topic not in types:
                    continue
                msgtype = types[topic][0]
                pubs = node.get_publishers_info_by_topic(topic)
                if not pubs and time.monotonic() < deadline:
                    continue
                reliable = all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in pubs) if pubs \
                    else True
                transient = bool(pubs) and all(p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                                               for p in pubs)
                bag.add_topic(topic, msgtype, reliable, transient)
                qos = QoSProfile(depth=args.depth, reliability=ReliabilityPolicy.RELIABLE if reliable
                                 else ReliabilityPolicy.BEST_EFFORT,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL if transient
                                 else DurabilityPolicy.VOLATILE)
                clock = node.get_clock()
                subs[topic] = node.create_subscription(
                    _msg_class(msgtype), topic,
                    lambda raw, topic=topic: writer.put(topic, clock.now().nanoseconds, raw), qos, raw=True)
                print(f"manip-bag: recording {topic} ({msgtype}, {'reliable' if reliable else 'best effort'}"
                      f"{', transient local' if transient else ''})", file=sys.stderr)
            if time.monotonic() > deadline and len(subs) < len(topics):
                missing = [t for t in topics if t not in subs]
                print(f"manip-bag: no publisher of {', '.join(missing)} after {args.wait:g} s; recording the "
                      f"others", file=sys.stderr)
                break
            executor.spin_once(timeout_sec=0.05)
        last_report = 0.0
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.05)
            now = time.monotonic()
            if now - last_report >= 1.0:
                last_report = now
                _progress(f"recording {now - t_start:6.1f} s: " +
                          ", ".join(f"{t} {n}" for t, n in bag.counts.items()) + f" (queued {writer.backlog})")
            if args.duration and now - t_start >= args.duration:
                break
    except BagError as e:
        _err(str(e))
        code = 1
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
        try:
            writer.close()  # writes what is still queued
        except BagError as e:
            _err(str(e))
            code = 1
    print(file=sys.stderr)
    total = sum(bag.counts.values())
    print(f"manip-bag: wrote {total} messages ({', '.join(f'{t} {n}' for t, n in bag.counts.items())}) to "
          f"{args.out} ({args.storage}, rosbag2 version {args.version}); largest write queue "
          f"{writer.peak_backlog} messages", file=sys.stderr)
    if writer.dropped:
        _err(f"the write queue (--max-queue-mb {args.max_queue_mb:g}) refused "
             f"{', '.join(f'{t} {n}' for t, n in writer.dropped.items())} messages")
        code = 1
    return code


def play(args):
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    try:
        info, start, end, messages = read_bag(args.bag, args.topics)
        clock_sched = PlaybackClock(start, end, args.rate)
    except BagError as e:
        _err(str(e))
        return 2
    stop, node = _start_ros(False, "manip_bag_play")
    pubs = {}
    generate_clock = args.clock_rate > 0
    for t in info:
        if t.name == "/clock" and generate_clock:
            print("manip-bag: the bag's own /clock is replaced by the generated one (--clock-rate 0 plays it)",
                  file=sys.stderr)
            continue
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE if t.reliable
                         else ReliabilityPolicy.BEST_EFFORT,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL if t.transient_local else DurabilityPolicy.VOLATILE)
        pubs[t.name] = node.create_publisher(_msg_class(t.msgtype), t.name, qos)
    clock_pub = node.create_publisher(Clock, "/clock", 10) if generate_clock else None
    total = sum(t.count for t in info if t.name in pubs)
    print(f"manip-bag: playing {args.bag}: {total} messages on {len(pubs)} topics, "
          f"{(end - start) * 1e-9:.2f} s at rate {args.rate:g}{', looping' if args.loop else ''}", file=sys.stderr)
    if args.delay > 0:
        time.sleep(args.delay)  # discovery: let the subscribers find the publishers first
    sent = 0
    loop = 0
    clock_period = int(1e9 / args.clock_rate) if generate_clock else 0
    try:
        clock_sched.wall0 = time.monotonic_ns()
        next_clock = clock_sched.wall0
        last_report = 0
        while not stop.is_set():
            for topic, t_ns, raw in messages():
                if topic not in pubs:
                    continue
                due = clock_sched.due(t_ns, loop)
                while not stop.is_set():
                    now = time.monotonic_ns()
                    if generate_clock and now >= next_clock:
                        bag_now = clock_sched.bag_time(now) - loop * (end - start)
                        clock_pub.publish(Clock(clock=_time_msg(min(max(bag_now, start), end))))
                        next_clock += clock_period
                    if now >= due:
                        break
                    wake = min(due, next_clock) if generate_clock else due
                    time.sleep(max(0.0, min((wake - now) * 1e-9, 0.05)))
                if stop.is_set():
                    break
                if generate_clock:  # the clock reaches the message's time before the message goes out
                    clock_pub.publish(Clock(clock=_time_msg(t_ns)))
                pubs[topic].publish(raw)
                sent += 1
                if time.monotonic_ns() - last_report > 500_000_000:
                    last_report = time.monotonic_ns()
                    _progress(f"playing: bag time {(t_ns - start) * 1e-9:7.2f} / {(end - start) * 1e-9:.2f} s, "
                              f"{sent} messages" + (f", loop {loop + 1}" if args.loop else ""))
            if not args.loop or stop.is_set():
                break
            loop += 1
        # let the last messages leave before the publishers go away
        end_wait = time.monotonic() + 0.5
        while time.monotonic() < end_wait and not stop.is_set():
            rclpy.spin_once(node, timeout_sec=0.05)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    print(file=sys.stderr)
    print(f"manip-bag: published {sent} messages", file=sys.stderr)
    return 0


def _time_msg(t_ns):
    from builtin_interfaces.msg import Time
    return Time(sec=int(t_ns // 1_000_000_000), nanosec=int(t_ns % 1_000_000_000))


def show_info(args):
    try:
        info, start, end, _ = read_bag(args.bag)
    except BagError as e:
        _err(str(e))
        return 2
    print(f"{args.bag}: {(end - start) * 1e-9:.3f} s, {sum(t.count for t in info)} messages")
    for t in info:
        print(f"  {t.name}  {t.msgtype}  {t.count}  {'reliable' if t.reliable else 'best effort'}"
              f"{', transient local' if t.transient_local else ''}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="manip-bag", description="Record and play rosbag2 files (rosbags).")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record topics into a new bag folder")
    r.add_argument("out", help="bag folder to create")
    r.add_argument("--topics", nargs="+", required=True, help="topics to record")
    r.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="default: mcap")
    r.add_argument("--version", type=int, choices=(8, 9), default=8,
                   help="rosbag2 metadata version (8: readable by Humble and later; default 8)")
    r.add_argument("--duration", type=float, default=0.0, help="s of wall time to record (0: until Ctrl-C)")
    r.add_argument("--wait", type=float, default=10.0, help="s to wait for the topics' publishers (default 10)")
    r.add_argument("--use-sim-time", action="store_true", help="receive times from /clock")
    r.add_argument("--depth", type=int, default=1000,
                   help="subscription queue per topic, messages (default 1000: 4 s of a 250 Hz topic)")
    r.add_argument("--max-queue-mb", type=float, default=1024.0,
                   help="MiB of received messages waiting for the writer before new ones are refused "
                        "(counted; default 1024)")
    pl = sub.add_parser("play", help="publish a bag with its recorded timing")
    pl.add_argument("bag")
    pl.add_argument("--rate", type=float, default=1.0, help="speed factor (default 1)")
    pl.add_argument("--loop", action="store_true", help="repeat until Ctrl-C")
    pl.add_argument("--topics", nargs="+", default=None, help="only these topics")
    pl.add_argument("--clock-rate", type=float, default=100.0, help="/clock rate in Hz (0: no /clock; default 100)")
    pl.add_argument("--delay", type=float, default=1.0, help="s between creating the publishers and the first "
                                                             "message (discovery; default 1)")
    i = sub.add_parser("info", help="topics, types, counts and QoS of a bag")
    i.add_argument("bag")
    args = p.parse_args(argv)
    if args.cmd == "play" and not args.rate > 0:
        p.error("--rate must be > 0")
    if args.cmd == "record" and (args.depth < 1 or not args.max_queue_mb > 0):
        p.error("--depth must be >= 1 and --max-queue-mb > 0")
    return {"record": record, "play": play, "info": show_info}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())

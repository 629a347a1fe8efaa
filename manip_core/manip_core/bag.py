"""rosbag2 files with the ``rosbags`` package: writing raw CDR messages, reading them back, playback timing
(no rclpy; the ``manip-bag`` command, manip_core.bag_cli, puts them on the ROS graph).

- :class:`BagRecorder`: a rosbag2 folder (mcap by default, sqlite3 on request), metadata version 8 by default
  so that ROS 2 Humble's ``ros2 bag`` reads it (version 9 adds fields that only Jazzy and later know), one
  connection per topic with its type, message definition and the publisher's offered QoS.
- :func:`message_definition`: the definition of a message type for the bag's metadata and mcap schema: from
  rosbags' bundled Kilted type store, else from the ``.msg`` files installed in the package's share folder
  (manip_msgs, control_msgs, tf2_msgs...), with the types it uses.
- :class:`QueuedWriter`: puts messages on a bounded queue that a writer thread drains into a BagRecorder, so
  that the subscriber callbacks return at once (writing a camera image took long enough for a 250 Hz topic to
  overflow its subscription queue); what the bound refuses is counted per topic, never dropped silently.
- :func:`read_bag`: the connections and the messages (topic, type, receive time ns, raw CDR bytes).
- :class:`PlaybackClock`: the wall time at which a message of bag time t is due, for a rate factor and loops.

Times are integers in nanoseconds: the bag's receive times (the recorder's clock), and wall time from
``time.monotonic_ns``.
"""
from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BagError", "BagRecorder", "QueuedWriter", "read_bag", "message_definition", "PlaybackClock", "STORAGES",
           "topic_qos", "qos_reliability"]

STORAGES = ("mcap", "sqlite3")


class BagError(ValueError):
    """A bag that cannot be written or read (path exists, unknown storage, unknown message type...)."""


def _typestore():
    from rosbags.typesys import Stores, get_typestore
    return get_typestore(Stores.ROS2_KILTED)


def _share_dirs(package):
    """Candidate share folders of an installed ROS package (AMENT_PREFIX_PATH, then ament_index_python)."""
    dirs = [Path(p) / "share" / package for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    try:
        from ament_index_python.packages import get_package_share_directory
        dirs.append(Path(get_package_share_directory(package)))
    except Exception:  # noqa: BLE001 (package not in the ament index)
        pass
    import sys
    dirs.append(Path(sys.prefix) / "share" / package)
    return dirs


def _register_from_share(ts, msgtype, seen=None):
    """Register ``pkg/msg/Name`` (and, recursively, the types it names) from installed .msg files."""
    from rosbags.typesys import get_types_from_msg
    seen = set() if seen is None else seen
    if msgtype in ts.types or msgtype in seen:
        return
    seen.add(msgtype)
    pkg, kind, name = msgtype.split("/")
    for d in _share_dirs(pkg):
        f = d / kind / f"{name}.msg"
        if f.is_file():
            types = get_types_from_msg(f.read_text(), msgtype)
            # the nested types first
            for _, fields in types.values():
                for _, ftype in fields:
                    for ref in _referenced(ftype):
                        _register_from_share(ts, ref, seen)
            ts.register(types)
            return
    raise BagError(f"message type {msgtype}: not in rosbags' Kilted types and no {kind}/{name}.msg found in the "
                   f"share folder of package {pkg}")


def _referenced(ftype):
    """Names 'pkg/msg/Name' of the message types a rosbags field type refers to."""
    from rosbags.interfaces import Nodetype
    node, arg = ftype
    if node == Nodetype.NAME:
        return [arg]
    if node in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return _referenced(arg[0])
    return []


def message_definition(msgtype, typestore=None):
    """(typestore, message definition text) of a ROS 2 message type ``pkg/msg/Name``."""
    ts = typestore or _typestore()
    if msgtype.count("/") != 2:
        raise BagError(f"message type {msgtype!r}: expected pkg/msg/Name")
    _register_from_share(ts, msgtype)
    return ts, ts.generate_msgdef(msgtype, ros_version=2)[0]


def qos_reliability(reliable):
    from rosbags.interfaces import QosReliability
    return QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT


def topic_qos(reliable=True, transient_local=False, depth=10):
    """rosbags Qos of an offered QoS profile (for the metadata's offered_qos_profiles)."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosTime
    infinite = QosTime(sec=0x7FFFFFFF, nsec=0xFFFFFFFF)
    return Qos(history=QosHistory.KEEP_LAST, depth=depth, reliability=qos_reliability(reliable),
               durability=QosDurability.TRANSIENT_LOCAL if transient_local else QosDurability.VOLATILE,
               deadline=infinite, lifespan=infinite, liveliness=QosLiveliness.AUTOMATIC,
               liveliness_lease_duration=infinite, avoid_ros_namespace_conventions=False)


class BagRecorder:
    """Writes raw CDR messages into a new rosbag2 folder ``path``.

    ``storage``: "mcap" (default) or "sqlite3"; ``version``: rosbag2 metadata version, 8 (readable by Humble
    and later, default) or 9. Use as a context manager or call :meth:`close`."""

    def __init__(self, path, storage="mcap", version=8):
        from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
        if storage not in STORAGES:
            raise BagError(f"storage must be one of {', '.join(STORAGES)}, got {storage!r}")
        if version not in (8, 9):
            raise BagError(f"rosbag2 version must be 8 or 9, got {version}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"{self.path} exists; a bag is written into a new folder")
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        try:
            self._writer = Writer(self.path, version=version, storage_plugin=plugin)
            self._writer.open()
        except WriterError as e:
            raise BagError(f"{self.path}: {e}") from e
        self._ts = _typestore()
        self._conns = {}
        self.counts = {}

    def add_topic(self, topic, msgtype, reliable=True, transient_local=False):
        """Declare a topic (once) with its type and the offered QoS of its publisher."""
        if topic in self._conns:
            return
        ts, text = message_definition(msgtype, self._ts)
        self._conns[topic] = self._writer.add_connection(
            topic, msgtype, typestore=ts,
            offered_qos_profiles=[topic_qos(reliable, transient_local)])
        self.counts[topic] = 0

    def write(self, topic, t_ns, raw):
        """Append one message (raw CDR bytes) received at ``t_ns``."""
        self._writer.write(self._conns[topic], int(t_ns), bytes(raw))
        self.counts[topic] += 1

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class QueuedWriter:
    """Writes into ``recorder`` (a BagRecorder) from a thread of its own.

    :meth:`put` never blocks: it queues (topic, t_ns, raw bytes) unless the queue already holds ``max_bytes``
    bytes (default 1 GiB) or ``max_messages`` messages; a refused message is counted in ``dropped[topic]``.
    :meth:`close` writes what is queued, stops the thread and closes the recorder; an error of the writer
    thread (disk full...) is raised there as a BagError (and later puts are refused and counted).
    ``backlog`` is the number of messages queued, ``peak_backlog`` its largest value so far."""

    def __init__(self, recorder, max_bytes=1 << 30, max_messages=1_000_000):
        self.recorder = recorder
        self.max_bytes, self.max_messages = int(max_bytes), int(max_messages)
        self.dropped = {}
        self.peak_backlog = 0
        self._q = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._bytes = 0
        self._n = 0
        self._error = None
        self._thread = threading.Thread(target=self._run, name="bag-writer", daemon=True)
        self._thread.start()

    @property
    def counts(self):
        """Messages written per topic (the recorder's counts)."""
        return self.recorder.counts

    @property
    def backlog(self):
        return self._n

    def put(self, topic, t_ns, raw):
        """Queue one message (raw CDR bytes, received at ``t_ns``); False when it was refused (counted)."""
        size = len(raw)
        with self._lock:
            if self._error is not None or self._n >= self.max_messages or self._bytes + size > self.max_bytes:
                self.dropped[topic] = self.dropped.get(topic, 0) + 1
                return False
            self._n += 1
            self._bytes += size
            self.peak_backlog = max(self.peak_backlog, self._n)
        self._q.put((topic, t_ns, raw))
        return True

    def _run(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            topic, t_ns, raw = item
            try:
                if self._error is None:
                    self.recorder.write(topic, t_ns, raw)
            except Exception as e:  # noqa: BLE001 - kept and raised by close()
                self._error = e
            with self._lock:
                self._n -= 1
                self._bytes -= len(raw)

    def close(self):
        """Write every queued message, stop the thread, close the recorder."""
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()
        self.recorder.close()
        if self._error is not None:
            raise BagError(f"{self.recorder.path}: writing failed: {type(self._error).__name__}: {self._error}") \
                from self._error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass(frozen=True)
class BagTopic:
    name: str
    msgtype: str
    count: int
    reliable: bool
    transient_local: bool


def _qos_flags(conn):
    """(reliable, transient_local) from a connection's offered QoS (reliable, volatile when unknown)."""
    from rosbags.interfaces import QosDurability, QosReliability
    profiles = getattr(conn.ext, "offered_qos_profiles", None) or []
    if isinstance(profiles, str) or not profiles:
        return True, False
    q = profiles[0]
    return q.reliability != QosReliability.BEST_EFFORT, q.durability == QosDurability.TRANSIENT_LOCAL


def read_bag(path, topics=None):
    """(list of BagTopic, time of the first and of the last message (ns), iterator factory of (topic, t_ns,
    raw bytes) in time order)."""
    from rosbags.rosbag2 import Reader
    path = Path(path)
    if not path.exists():
        raise BagError(f"{path}: no such bag")
    try:
        reader = Reader(path)
        reader.open()
    except Exception as e:  # noqa: BLE001 (rosbags' ReaderError, YAML, sqlite3, mcap errors on a damaged bag)
        raise BagError(f"{path}: cannot open the bag: {type(e).__name__}: {e}") from e
    try:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        if topics is not None:
            unknown = sorted(set(topics) - {c.topic for c in reader.connections})
            if unknown:
                raise BagError(f"{path}: no topic(s) {', '.join(unknown)} (it has "
                               f"{', '.join(sorted(c.topic for c in reader.connections))})")
        info = [BagTopic(c.topic, c.msgtype, c.msgcount, *_qos_flags(c)) for c in conns]
        # rosbags' end_time is "after the latest message" (its time + 1 ns): the last message's time instead
        start, end = reader.start_time, max(reader.start_time, reader.end_time - 1)
    finally:
        reader.close()

    def messages():
        try:
            with Reader(path) as r:
                sel = [c for c in r.connections if topics is None or c.topic in topics]
                for c, t, raw in r.messages(connections=sel):
                    yield c.topic, t, bytes(raw)
        except (BagError, GeneratorExit):
            raise
        except Exception as e:  # noqa: BLE001 (a damaged message or chunk in the middle of the bag)
            raise BagError(f"{path}: cannot read the messages: {type(e).__name__}: {e}") from e

    return info, start, end, messages


class PlaybackClock:
    """Wall-clock schedule of a bag: a message of bag time ``t_ns`` is due at
    ``wall0 + (t_ns - bag_start) / rate + loop * (bag_end - bag_start) / rate``."""

    def __init__(self, bag_start_ns, bag_end_ns, rate=1.0, wall0_ns=0):
        if not rate > 0:
            raise BagError(f"rate must be > 0, got {rate}")
        self.start, self.end, self.rate, self.wall0 = int(bag_start_ns), int(bag_end_ns), float(rate), int(wall0_ns)

    def due(self, t_ns, loop=0):
        """Wall time (ns) at which the message of bag time t_ns of loop ``loop`` is due."""
        span = self.end - self.start
        return self.wall0 + int(((t_ns - self.start) + loop * span) / self.rate)

    def bag_time(self, wall_ns):
        """Bag time (ns) that the wall time corresponds to, within the first loop's span."""
        return self.start + int((wall_ns - self.wall0) * self.rate)

#!/usr/bin/env python3
"""Decodes a zeroc run's TensorBoard event files and CSV files independently of the C
writer (formats/tfevents.h, train/monitor.h) and checks them against the run's JSONL log.

    tfevents_check.py LOG [--tensorboard DIR] [--csv DIR]

- TFRecord framing read here from the format's description, the CRC-32C of each length
  and each record computed by the `crc32c` package (Debian's python3-crc32c), masked as
  TFRecord masks it;
- each record decoded by Google's protocol-buffer library (Debian's python3-protobuf)
  from TensorBoard's own field numbers (event.proto, summary.proto), declared below;
- the first record's file_version, then one scalar per event: tag, step and value checked
  against the log (scripts/tensorboard_check.py's expected_scalars and compare), no step twice;
- each CSV file: DeepSpeed's csvMonitor's name and header, csv.writer's "\\r\\n" rows, each
  value written as Python's repr() of the log's number, the same points as the events.
Exits 1 on any problem.
"""
import csv
import io
import os
import struct
import sys

import crc32c
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from tensorboard_check import compare, expected_scalars, same  # noqa: E402


def event_class():
    """tensorflow.Event with the fields zeroc writes, declared as TensorBoard's .proto files number them."""
    fd = descriptor_pb2.FileDescriptorProto(name="zeroc_test_event.proto", package="tftest", syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto
    value = fd.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary = fd.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=".tftest.Value", label=F.LABEL_REPEATED)
    event = fd.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, type_name=".tftest.Summary", label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("tftest.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def masked_crc(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(path, Event, problems):
    """the events of one file, every CRC checked"""
    data = open(path, "rb").read()
    at, events = 0, []
    while at < len(data):
        if len(data) - at < 12:
            problems.append("%s: %d stray bytes at the end" % (path, len(data) - at))
            break
        length, length_crc = struct.unpack_from("<QI", data, at)
        if masked_crc(data[at:at + 8]) != length_crc:
            problems.append("%s: record at byte %d: the length's CRC-32C does not match" % (path, at))
            break
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        if masked_crc(body) != body_crc:
            problems.append("%s: record at byte %d: the data's CRC-32C does not match" % (path, at))
            break
        e = Event()
        e.ParseFromString(body)
        events.append(e)
        at += 12 + length + 4
    return events


def check_tensorboard(d, want, problems):
    Event = event_class()
    files = sorted(f for f in os.listdir(d) if "tfevents" in f)
    if not files:
        problems.append("%s: no event file" % d)
    got, records = {}, 0
    for name in files:
        if not name.startswith("events.out.tfevents.") or len(name.split(".")) < 7:
            problems.append("%s: not TensorBoard's file name pattern events.out.tfevents.<time>.<host>.<pid>.<n>" % name)
        events = read_events(os.path.join(d, name), Event, problems)
        if not events or events[0].file_version != "brain.Event:2":
            problems.append("%s: the first record is not file_version brain.Event:2" % name)
        for e in events[1:]:
            if len(e.summary.value) != 1:
                problems.append("%s: an event with %d values (one scalar each expected)" % (name, len(e.summary.value)))
                continue
            v = e.summary.value[0]
            got.setdefault(v.tag, []).append((e.step, v.simple_value))
            records += 1
    print("tensorboard: %d files, %d scalar records, CRC-32C verified" % (len(files), records))
    n = compare(want, got)
    if n:
        problems.append("%s: %d tags differ from the log" % (d, n))


def check_csv(d, want, problems):
    files = sorted(f for f in os.listdir(d) if f.endswith(".csv"))
    expect = {tag.replace("/", "_").replace(" ", "_") + ".csv": tag for tag in want}
    if set(files) != set(expect):
        problems.append("%s: CSV files %s, expected %s" % (d, files, sorted(expect)))
    got, rows_seen = {}, 0
    for name in files:
        tag = expect.get(name)
        text = open(os.path.join(d, name), newline="").read()
        if not text.endswith("\r\n") or "\n" in text.replace("\r\n", ""):
            problems.append("%s: rows do not end in csv.writer's \\r\\n" % name)
        rows = list(csv.reader(io.StringIO(text)))
        if not tag or rows[0] != ["step", tag.split("/")[-1]]:
            problems.append("%s: header %s" % (name, rows[0]))
            continue
        for step, value in rows[1:]:
            got.setdefault(tag, []).append((int(step), float(value)))
            logged = want[tag].get(int(step))
            if value != repr(float(value)):
                problems.append("%s: step %s: %s is not how Python's repr() writes %r" % (name, step, value, float(value)))
            elif logged is not None and not (same(float(value), logged) or abs(float(value) - logged) <= 1e-15 * abs(logged)):
                problems.append("%s: step %s: %s, the log %r" % (name, step, value, logged))
            rows_seen += 1
    print("csv_monitor: %d files, %d rows" % (len(files), rows_seen))
    # the points as compare() sees them (float32, as TensorBoard stores them); each row's full double was
    # checked above, to the log's precision (the log's cJSON writes 15 digits where they read back within 1 ulp)
    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
    n = compare(want, {t: [(s, f32(v)) for s, v in pts] for t, pts in got.items()})
    if n:
        problems.append("%s: %d CSV files differ from the log" % (d, n))


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    want = expected_scalars(argv[1])
    problems = []
    for i in range(2, len(argv) - 1, 2):
        (check_tensorboard if argv[i] == "--tensorboard" else check_csv)(argv[i + 1], want, problems)
    for p in problems:
        print("  PROBLEM " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""The CPU demo's expected training time, said before it starts (scripts/demo.sh).

    demo_expect.py RECORD STEPS NP

RECORD is bench/demo_time.txt (bench/demo_time.sh): the demo's command measured per step. The time on
idle cores is the measured wall time per step where the machine was quiet during that run; where other
processes used it, the ranks' CPU time per step spread over the cores, a lower bound. Beside other work
the NP ranks get their fair share of the cores: with a load average of L from other processes, NP/(NP + L)
of them (the record's runs beside one and two busy cores measure how close the trainer comes to it).
Prints one line; the load is /proc/loadavg's one-minute average, read before the demo starts.
Standard library only.
"""
import os
import re
import sys


def main():
    record, steps, np_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        text = open(record).read()
    except OSError:
        print("demo: no %s (bench/demo_time.sh records it): no expected time" % record)
        return
    runs = {int(m.group(1)): {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", m.group(0))}
            for m in re.finditer(r"^RESULT demo_step busy=(\d+) .*$", text, re.M)}
    date = re.search(r"^# (\d{4}-\d\d-\d\d) [0-9:]+ UTC, commit (\w+)", text, re.M)
    cpu = re.search(r"^# CPU: (.*?) \(.*?\), (\d+) cores", text, re.M)
    if 0 not in runs or not date or not cpu:
        print("demo: %s holds no measurement of the demo: no expected time" % record)
        return
    cores = int(cpu.group(2))
    alone = runs[0]
    quiet = alone["others"] <= 0.10
    step = alone["wall_s"] if quiet else alone["cpu_s"] / cores
    idle = steps * step
    load = float(open("/proc/loadavg").read().split()[0])
    here = os.cpu_count() or cores
    busy = idle * (np_ + load) / np_ * max(1.0, cores / here)
    how = "measured" if quiet else "its CPU time over the cores, a lower bound: the machine was busy when measured"
    print("demo: expected training time: about %s on %d idle cores (bench/demo_time.txt, %s, commit %s, %s: %s); "
          "the load average now is %.1f on %d cores, so about %s at the ranks' fair share"
          % (span(idle), cores, date.group(1), date.group(2), cpu.group(1), how, load, here, span(busy)))


def span(seconds):
    return "%.0f s" % seconds if seconds < 90 else "%.1f min" % (seconds / 60)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/measure.py: runs one benchmark command and says whether anything else used the CPU meanwhile.

    measure.py [--label L] [--busy-core K[,K2...]] [--max-other X] [--wait-quiet S] [--retries N] [--report FILE] -- CMD ...

The machine's CPU time (/proc/stat: user, nice, system, irq, softirq and steal of every core) over the
run, minus what the command and its descendants used (wait4's rusage) and minus the optional busy
loop, is what other processes (and, as steal, other virtual machines) took. Over --max-other cores on
average (default $BENCH_MAX_OTHER or 0.10) the run is NOISY: it is run again (--retries, default
$BENCH_RETRIES or 2) after waiting for a quiet second (at most --wait-quiet s, default $BENCH_WAIT_QUIET
or 60), and if it stays noisy the verdict says so. The command's output passes through untouched; the
verdict is one line on stderr and appended to --report:

    MEASURE <label>: wall 12.3 s | this run 1.98 cores | others 0.02 cores (steal 0.00) |
            load 0.10 0.20 0.30 -> 1.90 0.60 0.40 | quiet

--busy-core K[,K2...]: a busy loop pinned to core K (one per core listed) runs for the duration of the
command (the contention experiments, bench/cpu_contention.sh: "one core busy", bench/demo_time.sh: one
and two); their CPU time is counted as their own, not as noise. Exit status: the command's, or 3 when every attempt was noisy (the command itself succeeded).
"""
import argparse
import os
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def cpu_busy_seconds():
    """CPU seconds every core spent on anything but idle and iowait, steal counted separately"""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    return (user + nice + system + irq + softirq) / HZ, steal / HZ


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ   # utime, stime


def wait_quiet(max_other, timeout):
    """waits for a one-second window in which other processes used less than max_other cores"""
    t_end = time.time() + timeout
    while True:
        b0, s0 = cpu_busy_seconds()
        time.sleep(1.0)
        b1, s1 = cpu_busy_seconds()
        if (b1 - b0) + (s1 - s0) < max_other or time.time() >= t_end:
            return


def start_busy(core):
    """a busy loop pinned to one core (a child python process that spins)"""
    p = subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass" % core])
    time.sleep(0.3)   # let it start spinning before the measurement begins
    return p


def run_once(cmd, busy_cores):
    busy = [start_busy(k) for k in busy_cores]
    busy_cpu0 = sum(proc_cpu_seconds(b.pid) for b in busy)
    load0 = loadavg()
    b0, s0 = cpu_busy_seconds()
    t0 = time.time()
    p = subprocess.Popen(cmd)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.time() - t0
    b1, s1 = cpu_busy_seconds()
    load1 = loadavg()
    busy_cpu = sum(proc_cpu_seconds(b.pid) for b in busy) - busy_cpu0
    for b in busy:
        b.kill()
        b.wait()
    rc = os.waitstatus_to_exitcode(status)
    own = ru.ru_utime + ru.ru_stime
    other = max(0.0, (b1 - b0) - own - busy_cpu) + (s1 - s0)
    wall = max(wall, 1e-9)
    return rc, wall, own / wall, other / wall, (s1 - s0) / wall, busy_cpu / wall, load0, load1


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--label", default="run")
    ap.add_argument("--busy-core", default="")
    ap.add_argument("--max-other", type=float, default=float(os.environ.get("BENCH_MAX_OTHER", "0.10")))
    ap.add_argument("--wait-quiet", type=float, default=float(os.environ.get("BENCH_WAIT_QUIET", "60")))
    ap.add_argument("--retries", type=int, default=int(os.environ.get("BENCH_RETRIES", "2")))
    ap.add_argument("--report")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        sys.exit("measure.py: no command (usage: measure.py [options] -- CMD ...)")
    busy_cores = [int(k) for k in a.busy_core.split(",") if k]
    for attempt in range(a.retries + 1):
        wait_quiet(a.max_other, a.wait_quiet)
        rc, wall, own, other, steal, busy, load0, load1 = run_once(cmd, busy_cores)
        noisy = other > a.max_other
        verdict = ("NOISY (others used %.2f cores > %.2f)" % (other, a.max_other)) if noisy else "quiet"
        line = ("MEASURE %s: wall %.1f s | this run %.2f cores%s | others %.2f cores (steal %.2f) | load %s -> %s | %s%s"
                % (a.label, wall, own, " + busy loop%s %.2f" % ("s" if len(busy_cores) > 1 else "", busy) if busy_cores else "", other, steal,
                   load0, load1, verdict, " | attempt %d" % (attempt + 1) if attempt else ""))
        print(line, file=sys.stderr, flush=True)
        if a.report:
            with open(a.report, "a") as f:
                f.write(line + "\n")
        if rc != 0:
            return rc
        if not noisy:
            return 0
    return 3


if __name__ == "__main__":
    sys.exit(main())

"""rtt_profile.py — the per-request breakdown of rtt_profile.sh (see there).

Reads `perf script -F comm,tid,cpu,time,event,trace` on stdin; argv[1] is the
daemon's thread ids, comma-separated.
"""
import bisect
import re
import statistics
import sys

LINE = re.compile(r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)")
READ, WRITEV, URING_ENTER, STATX = 0, 20, 426, 332


def parse(stream):
    for line in stream:
        m = LINE.match(line)
        if m:
            comm, tid, cpu, t, ev, rest = m.groups()
            if ev.endswith("fuse_request_send") and comm != "bench_rtt":
                continue  # another mount's request
            yield int(tid), int(cpu), float(t) * 1e6, ev.split(":")[-1], rest


def before(ts, t):
    """The last of the sorted times ts at or before t, or None."""
    i = bisect.bisect_right(ts, t)
    return ts[i - 1] if i > 0 else None


def after(ts, t):
    """The first of the sorted times ts at or after t, or None."""
    i = bisect.bisect_left(ts, t)
    return ts[i] if i < len(ts) else None


CACHE = {}


def lists(by_tid, tid):
    """tid's events by kind, each a sorted list of times."""
    if tid not in CACHE:
        k = {"statx_in": [], "statx_out": [], "enter": [], "got": [], "on": []}
        for t, ev, nr in by_tid.get(tid, []):
            if ev == "on":
                k["on"].append(t)
            elif ev == "sys_enter":
                k["enter"].append(t)
                if nr == STATX:
                    k["statx_in"].append(t)
            else:
                if nr == STATX:
                    k["statx_out"].append(t)
                if nr in (READ, URING_ENTER):
                    k["got"].append(t)
        CACHE[tid] = k
    return CACHE[tid]


def main():
    daemon = {int(x) for x in sys.argv[1].split(",") if x}
    events = list(parse(sys.stdin))
    sends, ends = {}, {}
    by_tid = {}  # tid -> [(t, kind, nr)] of system calls and switches
    switches = wakeups = dsys = csys = 0
    idle = {}
    last_idle_in = {}
    t0 = t1 = None
    caller = None
    for tid, cpu, t, ev, rest in events:
        t0 = t if t0 is None else t0
        t1 = t
        if ev == "fuse_request_send":
            req = int(re.search(r"req (\d+)", rest).group(1))
            sends[req] = (t, tid, cpu)
            caller = tid
        elif ev == "fuse_request_end":
            req = int(re.search(r"req (\d+)", rest).group(1))
            ends[req] = (t, tid, cpu)
        elif ev in ("sys_enter", "sys_exit"):
            nr = int(re.search(r"NR (-?\d+)", rest).group(1))
            by_tid.setdefault(tid, []).append((t, ev, nr))
            if ev == "sys_enter":
                dsys += tid in daemon
                csys += tid == caller
        elif ev == "sched_switch":
            prev = int(re.search(r"prev_pid=(\d+)", rest).group(1))
            nxt = int(re.search(r"next_pid=(\d+)", rest).group(1))
            if prev in daemon or nxt in daemon or prev == caller or nxt == caller:
                switches += 1
            by_tid.setdefault(nxt, []).append((t, "on", 0))
            if nxt == 0:
                last_idle_in[cpu] = t
            elif prev == 0 and cpu in last_idle_in:
                idle[cpu] = idle.get(cpu, 0) + t - last_idle_in.pop(cpu)
        elif ev == "sched_wakeup":
            woken = int(re.search(r" pid=(\d+)", rest).group(1))
            wakeups += woken in daemon or woken == caller
    steps = {k: [] for k in ("caller", "to daemon", "handler", "commit", "wake caller", "return", "total")}
    same_cpu = 0
    done = 0
    for req, (ts, ctid, ccpu) in sends.items():
        if req not in ends:
            continue
        te, dtid, dcpu = ends[req]
        if dtid not in daemon:
            continue
        c, d = lists(by_tid, ctid), lists(by_tid, dtid)
        enter = before(c["statx_in"], ts)
        leave = after(c["statx_out"], te)
        reply = before(d["enter"], te)
        got = before(d["got"], reply) if reply is not None else None
        if None in (enter, leave, reply, got) or got < ts:
            continue
        on = after(c["on"], te)
        on = te if on is None or on > leave else on
        steps["caller"].append(ts - enter)
        steps["to daemon"].append(got - ts)
        steps["handler"].append(reply - got)
        steps["commit"].append(te - reply)
        steps["wake caller"].append(on - te)
        steps["return"].append(leave - on)
        steps["total"].append(leave - enter)
        same_cpu += dcpu == ccpu
        done += 1
    n = max(len(sends), 1)
    print(f"requests traced: {len(sends)}, broken down: {done}, served on the caller's CPU: {same_cpu}")
    for k, v in steps.items():
        if v:
            print(f"  {k:12s} median {statistics.median(v):7.2f} us   mean {statistics.mean(v):7.2f} us")
    span = (t1 - t0) if t0 is not None else 0
    ncpu = len({cpu for _, cpu, _, _, _ in events}) or 1
    print(f"  per request: daemon syscalls {dsys / n:.2f}, caller syscalls {csys / n:.2f}, "
          f"context switches {switches / n:.2f}, wake-ups {wakeups / n:.2f}, "
          f"idle CPU {sum(idle.values()) / n:.2f} us (of {ncpu * span / n:.2f} us on {ncpu} CPUs)")


main()

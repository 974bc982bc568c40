#!/usr/bin/env python3
"""backup_spool.py — the mail spool of tools/bench/backup.sh.

  build  ROOT N [JOBS]     N files of 1-16 KiB text in ROOT/d000/.. (1000 files a dir),
                           written by JOBS processes; prints the bytes written
  change ROOT N PERCENT    rewrites every (100/PERCENT)-th file of the N (new bytes,
                           new size, new mtime); prints files and bytes written
  deliver DIR RATE STOPFILE  delivers maildir-style (write in DIR/tmp, fsync, rename
                           into DIR/new) at up to RATE files/s until STOPFILE exists;
                           prints the deliveries made

Content is text-ish (words, headers) and compresses about as mail does; it is a
function of the file's number and a generation, so runs are repeatable.
"""
import os
import random
import sys
import time

PER_DIR = 1000
WORDS = None
TEXT = None


def text():
    """A 4 MiB buffer of pseudo-words, the same in every process."""
    global WORDS, TEXT
    if TEXT is None:
        r = random.Random(19)
        letters = "etaoinshrdlucmfwypvbgkjqxz"
        WORDS = ["".join(r.choice(letters[: r.randint(8, 26)]) for _ in range(r.randint(2, 10)))
                 for _ in range(3000)]
        out, n = [], 0
        while n < 4 << 20:
            line = " ".join(r.choice(WORDS) for _ in range(r.randint(6, 14))) + "\n"
            out.append(line)
            n += len(line)
        TEXT = "".join(out).encode()
    return TEXT


def body(i, gen):
    """File i's bytes in generation gen: a header and 1-16 KiB of text."""
    r = random.Random(i * 7919 + gen * 104729)
    size = r.randint(1024, 16384)
    hdr = ("From: user%d@example.com\nTo: box%d@example.org\nMessage-Id: <%d.%d@spool>\n"
           "Subject: %s\n\n" % (r.randint(0, 99999), i % 997, i, gen,
                                " ".join(r.choice(WORDS) for _ in range(5)))).encode()
    t = text()
    off = r.randint(0, len(t) - size)
    return (hdr + t[off:off + size])[:size]


def path(root, i):
    return os.path.join(root, "d%03d" % (i // PER_DIR), "%06d" % i)


def write_file(p, data):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def build_part(root, n, jobs, k):
    total = 0
    text()
    for d in range(k, (n + PER_DIR - 1) // PER_DIR, jobs):
        os.makedirs(os.path.join(root, "d%03d" % d), exist_ok=True)
        for i in range(d * PER_DIR, min(n, (d + 1) * PER_DIR)):
            data = body(i, 0)
            write_file(path(root, i), data)
            total += len(data)
    return total


def build(root, n, jobs=2):
    pids, rfds = [], []
    for k in range(jobs):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, str(build_part(root, n, jobs, k)).encode())
            os._exit(0)
        os.close(w)
        pids.append(pid)
        rfds.append(r)
    total = 0
    for pid, r in zip(pids, rfds):
        got = os.read(r, 64)
        _, st = os.waitpid(pid, 0)
        if st != 0 or not got:
            sys.exit("backup_spool: a build process failed")
        total += int(got)
    print(total)


def change(root, n, percent):
    step = max(1, round(100 / percent))
    files = total = 0
    text()
    for i in range(0, n, step):
        data = body(i, 1)
        write_file(path(root, i), data)
        files += 1
        total += len(data)
    print(files, total)


def deliver(d, rate, stopfile):
    os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
    os.makedirs(os.path.join(d, "new"), exist_ok=True)
    text()
    i, start = 0, time.monotonic()
    while not os.path.exists(stopfile):
        data = body(10_000_000 + i, 0)
        tmp = os.path.join(d, "tmp", "%d" % i)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, os.path.join(d, "new", "%d" % i))
        i += 1
        ahead = i / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    print(i)


def main():
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "build":
        build(a[1], int(a[2]), int(a[3]) if len(a) > 3 else 2)
    elif len(a) == 4 and a[0] == "change":
        change(a[1], int(a[2]), float(a[3]))
    elif len(a) == 4 and a[0] == "deliver":
        deliver(a[1], float(a[2]), a[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""mta_imap.py — mta.sh's IMAP reader: reads every message of mailboxes
u0..uN-1 (password "bench") on 127.0.0.1:PORT, one client thread per
mailbox, in passes, and checks each message: addressed to its mailbox,
delivered by the benchmark's postfix, and a body equal to every other's
(smtp-source sends the same body each time) of at least --length bytes.
Prints the messages read per second of each pass, space-separated.
Exits 1 with a one-line reason if a message is missing or wrong."""
import argparse
import hashlib
import imaplib
import sys
import threading
import time


def read_box(port, box, out):
    try:
        c = imaplib.IMAP4("127.0.0.1", port)
        c.login("u%d" % box, "bench")
        typ, data = c.select("INBOX", readonly=True)
        n = int(data[0])
        msgs = []
        if n:
            typ, data = c.fetch("1:%d" % n, "(BODY.PEEK[])")
            if typ != "OK":
                raise RuntimeError("FETCH: %s" % typ)
            msgs = [d[1] for d in data if isinstance(d, tuple)]
        c.logout()
        out[box] = msgs
    except Exception as e:  # reported by the caller as a failed check
        out[box] = e


def check(box, msgs, length, bodies):
    want_to = b"u%d@bench.test" % box
    for m in msgs:
        head, sep, body = m.partition(b"\r\n\r\n")
        if not sep:
            return "u%d: a message without a body" % box
        if want_to not in head or b"mta.bench.test" not in head:
            return "u%d: a message not addressed to it or not from the benchmark's postfix" % box
        if len(body) < length * 0.9:
            return "u%d: a body of %d bytes, %d sent" % (box, len(body), length)
        bodies.add(hashlib.sha256(body).hexdigest())
    return None


def one_pass(args):
    out = {}
    threads = [threading.Thread(target=read_box, args=(args.port, b, out)) for b in range(args.boxes)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    total = 0
    bodies = set()
    for b in range(args.boxes):
        if isinstance(out.get(b), Exception):
            sys.exit("u%d: %s" % (b, out[b]))
        why = check(b, out[b], args.length, bodies)
        if why:
            sys.exit(why)
        total += len(out[b])
    if total != args.messages:
        sys.exit("%d messages read, %d delivered" % (total, args.messages))
    if len(bodies) > 1:
        sys.exit("%d different bodies: some message was changed" % len(bodies))
    return total / secs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--boxes", type=int, required=True)
    p.add_argument("--messages", type=int, required=True)
    p.add_argument("--length", type=int, required=True)
    p.add_argument("--passes", type=int, default=2)
    args = p.parse_args()
    print(" ".join("%.0f" % one_pass(args) for _ in range(args.passes)))


if __name__ == "__main__":
    main()

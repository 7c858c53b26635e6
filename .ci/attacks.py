#!/usr/bin/env python3
"""Every attack of issue 36, sent to a real `quire serve`, as an attacker would send it.

After each attack the server process must be alive, a new connection must answer
`SELECT 1`, and the server's log must show no engine restart and no panic. Some attacks
also check what the attacker got back (the SQLSTATE PostgreSQL gives) and, for the large
result, the server's resident memory while it streams.

Usage: .ci/attacks.py PATH/TO/quire [--only NAME ...] [--keep]
Standard library only. The server runs under a 4 GB data-segment limit (RLIMIT_DATA), as
the issue's memory attacks were measured.
"""

import argparse
import glob
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

MEMORY_LIMIT = 4 << 30
SHARED_BUFFERS = 128 << 20


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


# ---------------------------------------------------------------- a minimal libpq


def frame(tag, body):
    return tag + struct.pack("!i", len(body) + 4) + body


def cstr(s):
    return s.encode() + b"\0"


def startup_packet(user="postgres", options=None, database="quire"):
    params = b"user\0" + cstr(user) + b"database\0" + cstr(database)
    if options:
        params += b"options\0" + cstr(options)
    body = struct.pack("!i", 196608) + params + b"\0"
    return struct.pack("!i", len(body) + 4) + body


class Conn:
    def __init__(self, port, user="postgres", options=None, timeout=60):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.sock.sendall(startup_packet(user, options))
        msgs = self.until_ready()
        err = errors(msgs)
        if err:
            raise Failed(f"startup refused: {err}")

    def recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("server closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read(self):
        head = self.recv_exact(5)
        tag, length = head[:1], struct.unpack("!i", head[1:])[0]
        return tag, self.recv_exact(length - 4)

    def until_ready(self):
        msgs = []
        while True:
            tag, body = self.read()
            msgs.append((tag, body))
            if tag == b"Z":
                return msgs
            if tag == b"E" and fields(body).get("S") == "FATAL":
                return msgs

    def query(self, sql):
        self.sock.sendall(frame(b"Q", cstr(sql)))
        return self.until_ready()

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.sendall(frame(b"X", b""))
        except OSError:
            pass
        self.sock.close()


def fields(body):
    out = {}
    for part in body.split(b"\0"):
        if part:
            out[chr(part[0])] = part[1:].decode(errors="replace")
    return out


def errors(msgs):
    """The first error's SQLSTATE and message, or None."""
    for tag, body in msgs:
        if tag == b"E":
            f = fields(body)
            return f.get("C"), f.get("M")
    return None


def rows(msgs):
    out = []
    for tag, body in msgs:
        if tag == b"D":
            n = struct.unpack("!h", body[:2])[0]
            pos, row = 2, []
            for _ in range(n):
                ln = struct.unpack("!i", body[pos:pos + 4])[0]
                pos += 4
                if ln < 0:
                    row.append(None)
                else:
                    row.append(body[pos:pos + ln].decode())
                    pos += ln
            out.append(row)
    return out


# ---------------------------------------------------------------- the server


class Server:
    def __init__(self, binary, keep):
        self.dir = tempfile.mkdtemp(prefix="quire-attacks-")
        self.keep = keep
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.log_path = os.path.join(self.dir, "server.log")
        self.log = open(self.log_path, "wb")

        def limits():
            resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))

        self.proc = subprocess.Popen(
            [binary, "serve", "--data-dir", os.path.join(self.dir, "data"),
             "--port", str(self.port), "-c", "max_connections=100"],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=limits)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                Conn(self.port, timeout=5).close()
                return
            except (OSError, EOFError, Failed):
                time.sleep(0.2)
        raise Failed("the server did not start")

    def alive(self):
        return self.proc.poll() is None

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def still_serving(server):
    check(server.alive(), "the server process is gone")
    c = Conn(server.port)
    r = rows(c.query("SELECT 1"))
    c.close()
    check(r == [["1"]], f"SELECT 1 gave {r}")
    log = server.log_text()
    for bad in ("panicked", "engine failed", "restarting, which recovers"):
        check(bad not in log, f"the log shows '{bad}'")


def expect_error(msgs, codes, what):
    err = errors(msgs)
    check(err is not None and err[0] in codes, f"{what}: expected {codes}, got {err or rows(msgs)[:2]}")


# ---------------------------------------------------------------- the attacks


def attack_execute_row_limit(s):
    c = Conn(s.port)
    c.send(frame(b"P", b"\0" + cstr("select 1") + b"\0\0")
           + frame(b"B", b"\0\0" + b"\0\0" + b"\0\0" + b"\0\0")
           + frame(b"E", b"\0" + struct.pack("!i", 2147483647))
           + frame(b"S", b""))
    msgs = c.until_ready()
    check(rows(msgs) == [["1"]], f"the limited Execute gave {msgs}")
    c.close()


def deep(s, sql, what, codes=("54001",)):
    c = Conn(s.port)
    msgs = c.query(sql)
    err = errors(msgs)
    check(err is None or err[0] in codes, f"{what}: {err}")
    c.close()


def attack_deep_expressions(s):
    deep(s, "SELECT " + "+".join(["1"] * 461), "461 + terms")
    deep(s, "SELECT " + "+".join(["1"] * 100_000), "100,000 + terms")
    deep(s, "SELECT 1 WHERE " + " OR ".join(["1 = 1"] * 100_000), "100,000 OR terms")
    deep(s, "SELECT 1 WHERE " + " AND ".join(["1 = 1"] * 100_000), "100,000 AND terms")
    deep(s, "SELECT 1" + "::int" * 100_000, "100,000 casts")
    deep(s, "SELECT " + "(" * 100_000 + "1" + ")" * 100_000, "100,000 parentheses",
         ("54001", "42601"))
    deep(s, "SELECT " + "CASE WHEN true THEN " * 100_000 + "1" + " END" * 100_000,
         "100,000 CASE levels", ("54001", "42601"))
    deep(s, " UNION ".join(["SELECT 1"] * 5_000), "5,000 UNIONs")


def attack_parse_then_close(s):
    c = Conn(s.port)
    sql = "SELECT " + "+".join(["1"] * 40_000)
    c.send(frame(b"P", b"\0" + cstr(sql) + b"\0\0"))
    time.sleep(0.5)
    c.sock.close()
    time.sleep(0.5)


def attack_huge_in_list(s):
    c = Conn(s.port)
    items = ",".join(["1"] * (10 << 20))  # 20 MB of text
    msgs = c.query(f"select 1 where 1 in ({items})")
    err = errors(msgs)
    check(err is None or err[0] in ("54000", "54001", "53200"), f"huge IN list: {err}")
    c.close()


def attack_large_result(s):
    c = Conn(s.port)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], s.rss_bytes())
            time.sleep(0.1)

    t = threading.Thread(target=sample)
    t.start()
    n_rows = 3_000_000
    c.sock.sendall(frame(b"Q", cstr(
        f"select repeat('x', 2000) from generate_series(1, {n_rows})")))
    count = 0
    try:
        while True:
            tag, body = c.read()
            if tag == b"D":
                count += 1
            elif tag == b"E":
                raise Failed(f"large result: {fields(body)}")
            elif tag == b"Z":
                break
    finally:
        done.set()
        t.join()
    check(count == n_rows, f"large result: {count} rows")
    bound = SHARED_BUFFERS + (256 << 20)
    print(f"    peak RSS while streaming 6 GB: {peak[0] >> 20} MiB (bound {bound >> 20} MiB)")
    check(peak[0] < bound, f"peak RSS {peak[0] >> 20} MiB")
    c.close()


def attack_value_over_1gb(s):
    c = Conn(s.port)
    for sql in ["select length(repeat('x', 600000000) || repeat('x', 600000000))",
                "select length(concat(repeat('x', 600000000), repeat('x', 600000000)))",
                "select length(string_agg(repeat('x', 300000000), '')) from generate_series(1, 4)"]:
        expect_error(c.query(sql), ("54000",), sql[:40])
    c.close()


def open_sockets(port, n, payload):
    socks = []
    for _ in range(n):
        sk = socket.create_connection(("127.0.0.1", port), timeout=10)
        if payload:
            sk.sendall(payload)
        socks.append(sk)
    return socks


def attack_socket_flood(s, n=4500, payload=b"\0"):
    before = Conn(s.port)
    socks = open_sockets(s.port, n, payload)
    try:
        c = Conn(s.port, timeout=30)
        msgs = c.query("CHECKPOINT")
        check(errors(msgs) is None, f"CHECKPOINT during the flood: {errors(msgs)}")
        c.close()
        r = rows(before.query("SELECT 2"))
        check(r == [["2"]], f"a session from before the flood: {r}")
    finally:
        for sk in socks:
            sk.close()
    before.close()


def attack_idle_sockets(s):
    attack_socket_flood(s, 3000, b"")


def attack_smuggling(s):
    c = Conn(s.port)
    inner = frame(b"Q", cstr("SELECT 2"))
    body = cstr("SELECT 1") + inner
    c.send(frame(b"Q", body))
    msgs = c.until_ready()
    expect_error(msgs, ("08P01",), "a message hidden in a Query's length")
    check(rows(msgs) == [], f"smuggled statement ran: {rows(msgs)}")
    c.close()


def attack_plaintext_after_ssl(s):
    sk = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    sk.sendall(struct.pack("!ii", 8, 80877103) + startup_packet())
    data = b""
    try:
        while True:
            chunk = sk.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    sk.close()
    check(b"received unencrypted data after SSL request" in data,
          f"plaintext behind an SSLRequest was answered with {data[:80]!r}")


def attack_malformed_after_auth(s):
    bad = [
        b"Z\0\0\0\x04",  # a backend type
        b"Q\0\0\0\x03",  # length below 4
        b"Q\x7f\xff\xff\xff",  # 2 GB
        frame(b"B", b"\0\0\0\0\xff\xff"),  # 65535 parameters, no bytes
        frame(b"D", b"X\0"),  # bad Describe subtype
        frame(b"E", b"\0"),  # Execute cut short
        frame(b"P", b"s\0SELECT 1\0\xff\xff"),  # 65535 parameter types, none there
        frame(b"Q", b"SELECT 1"),  # no terminator
        frame(b"Q", b"\xff\xfe\0"),  # not UTF-8
        frame(b"p", b"password\0"),  # a password message after authentication
        frame(b"F", b"\0\0\0\0"),  # fast-path function call
    ]
    for msg in bad:
        c = Conn(s.port)
        c.send(msg + frame(b"S", b""))
        try:
            msgs = c.until_ready()
            check(errors(msgs) is not None, f"{msg[:12]!r} answered without an error")
        except EOFError:
            raise Failed(f"{msg[:12]!r}: the connection closed without an ErrorResponse")
        except OSError:
            pass  # a reset: the server closed with our Sync unread (the error went first)
        c.close()


def attack_garbage_before_auth(s):
    size_before = len(s.log_text())
    samples = [b"p\0\0\0\x08abcd", b"\0\0\0\x08\x04\xd2\x16\x2f", b"\xff" * 64,
               struct.pack("!ii", 9, 196608) + b"x", struct.pack("!i", 10_001),
               struct.pack("!ii", 16, 80877102) + b"\0\0\0\x01\0\0\0\x02"]
    for _ in range(50):
        for payload in samples:
            sk = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            try:
                sk.sendall(payload)
                sk.settimeout(2)
                sk.recv(4096)
            except OSError:
                pass
            sk.close()
    grown = len(s.log_text()) - size_before
    check(grown < 50 * len(samples) * 200, f"the log grew {grown} bytes")


def attack_aggregate_without_arguments(s):
    c = Conn(s.port)
    for sql in ("SELECT avg()", "SELECT sum()"):
        expect_error(c.query(sql), ("42883",), sql)
    c.close()


def attack_role_escalation(s):
    admin = Conn(s.port)
    admin.query("DROP ROLE IF EXISTS plain")
    check(errors(admin.query("CREATE ROLE plain LOGIN")) is None, "CREATE ROLE plain")
    plain = Conn(s.port, user="plain")
    for sql in ["ALTER ROLE plain SUPERUSER", "CREATE ROLE evil SUPERUSER",
                "ALTER ROLE postgres PASSWORD 'x'", "SELECT rolpassword FROM pg_authid",
                "SET ROLE postgres", "SET SESSION AUTHORIZATION postgres"]:
        expect_error(plain.query(sql), ("42501",), sql)
    r = rows(plain.query("SHOW is_superuser"))
    check(r == [["off"]], f"is_superuser for a plain role: {r}")
    plain.close()
    admin.close()


def attack_options_statement_timeout(s):
    c = Conn(s.port, options="-c statement_timeout=300")
    start = time.time()
    msgs = c.query("select count(*) from generate_series(1, 10000000000)")
    took = time.time() - start
    expect_error(msgs, ("57014",), "PGOPTIONS statement_timeout")
    print(f"    stopped after {took:.2f} s")
    check(took < 3, f"the statement ran {took:.1f} s")
    c.close()


def attack_fuzz_corpus(s, corpus_root):
    inputs = sorted(glob.glob(os.path.join(corpus_root, "message", "*")))[:2000]
    sent = 0
    c = Conn(s.port)
    for path in inputs:
        with open(path, "rb") as f:
            data = f.read()
        if not data:
            continue
        try:
            c.send(frame(data[:1], data[1:]) + frame(b"S", b""))
            c.until_ready()
        except (EOFError, OSError, struct.error):
            c.sock.close()
            c = Conn(s.port)
        sent += 1
    c.close()
    # The startup corpus before authentication, each on a socket of its own: the packet,
    # then end of input; the server answers or closes.
    started = 0
    for path in sorted(glob.glob(os.path.join(corpus_root, "startup", "*")))[:1000]:
        with open(path, "rb") as f:
            data = f.read()
        sk = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        try:
            sk.sendall(data)
            sk.shutdown(socket.SHUT_WR)
            while sk.recv(65536):
                pass
        except OSError:
            pass
        finally:
            sk.close()
        started += 1
    print(f"    {sent} message and {started} startup corpus inputs sent")
    check(sent > 0 and started > 0, f"no corpus found under {corpus_root}")


ATTACKS = [
    ("execute-row-limit", attack_execute_row_limit),
    ("deep-expressions", attack_deep_expressions),
    ("parse-then-close", attack_parse_then_close),
    ("huge-in-list", attack_huge_in_list),
    ("large-result", attack_large_result),
    ("value-over-1gb", attack_value_over_1gb),
    ("socket-flood", attack_socket_flood),
    ("idle-sockets", attack_idle_sockets),
    ("smuggling", attack_smuggling),
    ("plaintext-after-ssl", attack_plaintext_after_ssl),
    ("malformed-after-auth", attack_malformed_after_auth),
    ("garbage-before-auth", attack_garbage_before_auth),
    ("aggregate-without-arguments", attack_aggregate_without_arguments),
    ("role-escalation", attack_role_escalation),
    ("options-statement-timeout", attack_options_statement_timeout),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus"))
    args = ap.parse_args()
    attacks = list(ATTACKS)
    attacks.append(("fuzz-corpus", lambda s: attack_fuzz_corpus(s, args.corpus)))
    if args.only:
        attacks = [a for a in attacks if a[0] in args.only]
    server = Server(args.binary, args.keep)
    failed = []
    try:
        for name, attack in attacks:
            start = time.time()
            try:
                attack(server)
                still_serving(server)
                print(f"ok   {name} ({time.time() - start:.1f} s)")
            except Exception as e:  # noqa: BLE001 - every failure is reported by name
                failed.append(name)
                print(f"FAIL {name}: {type(e).__name__}: {e}")
                if not server.alive():
                    print("the server is gone; its log ends with:")
                    print(server.log_text()[-3000:])
                    break
    finally:
        server.stop()
    print(f"attacks: {len(attacks) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

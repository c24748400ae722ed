#!/usr/bin/env python3
"""docs/operations.md, every command of its ```sh blocks run for real (issue 32).

  operations_commands_test.py BINARY        (BINARY: the anteroom executable, an absolute path)

Each ```sh block is read as a shell reads it: a line ending in `\\` joined with the next, a comment
after an unquoted ` #` dropped, blank and comment-only lines skipped. Every command found must be
in RUN (run here) or in COVERED_ELSEWHERE (a test file that must hold a given string, and why it
cannot run here); a command in neither fails the test by name, as does a table entry that no
longer matches the doc.

The commands run in order within their block, each with bash (`set -o pipefail`, so a pipe fails
when a stage does) in one scratch directory, with the shell's exported variables carried from
one command to the next (the doc's `export` holds for what follows), against the real binary and
Debian's openssl, curl, redis-server, redis-cli and promtool. What names this machine's paths
and ports is replaced by SUBSTITUTIONS, literal string replacements per command. The
certificate block runs first: the TLS blocks above it use its files. A long-running command (a
server) is started in the background, waited for, and stopped at the end by its PID (SIGTERM,
then SIGKILL); it must exit 0 (SIGTERM drains: docs/operations.md, "Stop and restart").
Loopback only, free ports found by binding port 0. Exit 77 (ctest's SKIP_RETURN_CODE) when a tool
is not installed.
"""
import os
import secrets
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs/operations.md")
SKIP = 77
TOOLS = ("openssl", "curl", "redis-server", "redis-cli", "promtool")
COMMAND_TIMEOUT = 60  # seconds, each command that runs to its end
READY_TIMEOUT = 60  # seconds, a server started in the background to answer
STOP_TIMEOUT = 30  # seconds from SIGTERM to SIGKILL (the drain bound is 10 s)

# The operator's shell: variables the doc's commands use and do not set. {name}: the run's
# values (see main()).
ENVIRONMENT = {
    "REDIS_URL": "redis://127.0.0.1:{redis_port}",
    "ANTEROOM_QUEUE_KEY": "{queue_key}",  # the queue key of the TLS listeners
    "ANTEROOM_ADMIN_KEY": "{admin_key}",  # every server's admin key
}

# (the doc's command starts with, text, replaced by): literal, in this order, {name} the run's
# values. Each must match a command of the doc.
SUBSTITUTIONS = [
    ("anteroom serve --config ", "/etc/anteroom/anteroom.toml", "{scratch}/anteroom.toml"),
    ("anteroom config check ", "/etc/anteroom/anteroom.toml", "{scratch}/anteroom.toml"),
    ("curl --cacert ca.pem https:", "127.0.0.1:8443", "127.0.0.1:{tls_port}"),
    ("openssl s_client ", "127.0.0.1:8443", "127.0.0.1:{tls_port}"),
    ("curl --cacert ca.pem --cert ", "127.0.0.1:8443", "127.0.0.1:{mtls_port}"),
    ("anteroom queue list ", "127.0.0.1:8443", "127.0.0.1:{mtls_port}"),
    ("cp /var/lib/redis/dump.rdb ", "/var/lib/redis/", "{redis_dir}/"),
    ("cp /var/lib/redis/dump.rdb ", "/backups/", "{scratch}/backups/"),
    ("export ANTEROOM_ADMIN_KEY=", "...", "{admin_key}"),
    ("anteroom backup ", "127.0.0.1:8080", "127.0.0.1:{cfg_port}"),
    ("anteroom backup ", "/backups/", "{scratch}/backups/"),
    ("anteroom check-data ", "/backups/", "{scratch}/backups/"),
    ("anteroom restore ", "/backups/anteroom-2026-11-28", "{scratch}/backups/anteroom-$(date +%F)"),
    ("anteroom restore ", "/var/lib/anteroom.new", "{scratch}/anteroom.new"),
    ("anteroom serve --data ", "/var/lib/anteroom.new",
     "{scratch}/anteroom.new --listen 127.0.0.1:{restored_port}"),
    ("redis-server --port 0 --tls-port ", "6380", "{redis_tls_port}"),
    ("anteroom serve --store rediss:", "rediss://127.0.0.1:6380",
     "rediss://127.0.0.1:{redis_tls_port} --listen 127.0.0.1:{rediss_port}"),
    ("promtool ", "contrib/", "{root}/contrib/"),
    ("curl -s -H ", "127.0.0.1:8080", "127.0.0.1:{cfg_port}"),
]

# packaging/anteroom.toml as the package installs it in /etc/anteroom, with the machine's paths
# and port made the run's: (text, replaced by), each must be in the file.
CONFIG_EDITS = [
    ('listen = "127.0.0.1:8080"', 'listen = "127.0.0.1:{cfg_port}"'),
    ('data = "/var/lib/anteroom"', 'data = "{scratch}/data"'),
    ('admin_key_file = "/etc/anteroom/admin.key"', 'admin_key_file = "{scratch}/admin.key"'),
]

# The commands run here, by how the doc's text starts: (prefix, what it is, check).
#   "run": runs to its end within COMMAND_TIMEOUT, exits 0, and its stdout holds `check` (if any);
#   "server": started in the background until the end; ready once `check` answers (an http(s)
#   URL answering 200, or a redis-cli command printing PONG).
RUN = [
    ("anteroom serve --config ", "server", "http://127.0.0.1:{cfg_port}/readyz"),
    ("anteroom config check ", "run", 'listen = "127.0.0.1:{cfg_port}"'),
    ("curl --cacert ca.pem https://127.0.0.1:8443/readyz", "run", '"ready"'),
    ("openssl s_client -connect ", "run", "ALPN protocol: http/1.1"),
    ("curl --cacert ca.pem --cert ", "run", '{{"queues":'),
    ("anteroom queue list --server https:", "run", '"queues"'),
    ('redis-cli -u "$REDIS_URL" LASTSAVE', "run", None),
    ('redis-cli -u "$REDIS_URL" BGSAVE', "run", "Background saving started"),
    ('redis-cli -u "$REDIS_URL" INFO persistence', "run", "rdb_last_bgsave_status:ok"),
    ("cp /var/lib/redis/dump.rdb ", "run", None),
    ("export ANTEROOM_ADMIN_KEY=", "run", None),
    ("anteroom backup --server ", "run", '"queues":1,"jobs":1}}'),
    ("anteroom check-data ", "run", None),
    ("anteroom restore --from ", "run", '"restored":"{scratch}/anteroom.new"'),
    ("anteroom serve --data ", "server", "http://127.0.0.1:{restored_port}/readyz"),
    ("openssl req -x509 ", "run", None),
    ('echo "subjectAltName=', "run", None),
    ("openssl req -newkey ", "run", None),
    ("openssl x509 -req ", "run", None),
    ("redis-server --port 0 --tls-port ", "server",
     "redis-cli -h 127.0.0.1 -p {redis_tls_port} --tls --cacert ca.pem --cert client.pem "
     "--key client.key PING"),
    ("anteroom serve --store rediss:", "server", "http://127.0.0.1:{rediss_port}/readyz"),
    ("promtool check rules ", "run", "SUCCESS"),
    ("promtool test rules ", "run", "SUCCESS"),
    ('curl -s -H "Authorization: Bearer $ANTEROOM_ADMIN_KEY" ', "run", None),
]

# The block that makes the certificates (run first) is the one holding this command.
CERTIFICATE_BLOCK = "openssl req -x509 "

# Commands that cannot run here: prefix -> (the test that covers it, a string that test must
# hold, why not here). Kept to what needs root and dpkg, or systemd as PID 1.
COVERED_ELSEWHERE = {
    "scripts/package.sh": (
        "tests/package/package_test.py", '"scripts/package.sh"',
        "its package is installed for real only as root (ctest debian_package)"),
    "sudo dpkg -i ": (
        "tests/package/package_test.py", 'run("dpkg", "-i", cls.deb)',
        "installs on the machine: root (ctest debian_package)"),
    "sudo systemctl enable --now anteroom": (
        "tests/package/package_test.py", 'unit_value(unit, "ExecStart")',
        "no systemd as PID 1 in CI containers: the package test runs the unit's ExecStart as "
        "its User and Group, with a notify socket of its own"),
    "systemctl status anteroom": (
        "tests/integration/service_notify_test.cc", "STATUS=serving on",
        "no systemd as PID 1: the STATUS line status shows is read from the notify socket"),
    "sudo systemctl reload anteroom": (
        "tests/integration/serve_signals_test.cc", "kill(server.pid(), SIGHUP)",
        "no systemd as PID 1: reload is SIGHUP, sent to the server by its PID"),
    "journalctl -u anteroom": (
        "tests/integration/serve_signals_test.cc", '"SIGHUP: settings reloaded"',
        "no journal without systemd: what it shows is the server's stderr, read by the test"),
}


# --- reading the doc ------------------------------------------------------------------------

def strip_comment(line):
    """The line without a comment after an unquoted ` #` (or a leading `#`)."""
    quote, i = None, 0
    while i < len(line):
        c = line[i]
        if c == "\\" and quote != "'":
            i += 2  # an escaped character: neither a quote nor a comment
            continue
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
        i += 1
    return line.rstrip()


def sh_blocks(text):
    """[[(line number, command), ...] per ```sh block], in the doc's order."""
    blocks, lines = [], text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            i += 1
            continue
        fence, commands, pending, first = i + 1, [], "", None
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            line = strip_comment(lines[i])
            first = first or (i + 1 if line.strip() else None)
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
            else:
                command = (pending + line.strip()).strip()
                if command:
                    commands.append((first, command))
                pending, first = "", None
            i += 1
        if i == len(lines):
            raise SystemExit(f"docs/operations.md:{fence}: a ```sh block is not closed")
        if pending.strip():
            commands.append((first, pending.strip()))
        blocks.append(commands)
        i += 1
    return blocks


def classify(blocks):
    """The problems of the accounting: commands in no table, table entries matching nothing."""
    problems, used_run, used_elsewhere = [], set(), set()
    for commands in blocks:
        for line, command in commands:
            run = [p for p, _, _ in RUN if command.startswith(p)]
            other = [p for p in COVERED_ELSEWHERE if command.startswith(p)]
            if not run and not other:
                problems.append(f"docs/operations.md:{line}: neither run by this test nor mapped "
                                f"in COVERED_ELSEWHERE: {command}")
            elif run and other:
                problems.append(f"docs/operations.md:{line}: both run and mapped elsewhere: "
                                f"{command}")
            used_run.update(run[:1])
            used_elsewhere.update(other[:1])
    for prefix, _, _ in RUN:
        if prefix not in used_run:
            problems.append(f"RUN entry matches no command of the doc: {prefix!r}")
    for prefix, (path, needle, _) in COVERED_ELSEWHERE.items():
        if prefix not in used_elsewhere:
            problems.append(f"COVERED_ELSEWHERE entry matches no command of the doc: {prefix!r}")
        try:
            with open(os.path.join(ROOT, path)) as f:
                if needle not in f.read():
                    problems.append(f"{path} does not hold {needle!r} (for {prefix!r})")
        except OSError as e:
            problems.append(f"{path}: {e} (for {prefix!r})")
    return problems


def entry(command):
    return next((p, kind, check) for p, kind, check in RUN if command.startswith(p))


def substitute(command, values, used):
    out = command
    for n, (prefix, old, new) in enumerate(SUBSTITUTIONS):
        if command.startswith(prefix):
            if old not in out:
                raise AssertionError(f"substitution {old!r} not in: {command}")
            out = out.replace(old, new.format(**values))
            used.add(n)
    return out


# --- processes ------------------------------------------------------------------------------

def free_port(taken):
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            taken.add(port)
            return port


class Servers:
    """Processes started in the background, stopped by their PID (reverse order) at the end."""

    def __init__(self, scratch):
        self.scratch, self.started = scratch, []

    def start(self, name, argv, env, cwd):
        log = open(os.path.join(self.scratch, f"log-{len(self.started)}-{name}.txt"), "w+")
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append((name, proc, log))
        return proc, log

    def forget(self, proc):
        """A process whose early end was reported already."""
        for item in [i for i in self.started if i[1] is proc]:
            self.started.remove(item)
            item[2].close()

    def stop_all(self):
        """[(name, exit status, log)] of every process, each sent SIGTERM, then SIGKILL."""
        out = []
        for name, proc, log in reversed(self.started):
            early = proc.poll()
            if early is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.seek(0)
            text = log.read()
            log.close()
            out.append((name, early, proc.returncode, text))
        self.started = []
        return out


def tail(text, n=25):
    return "\n".join(text.rstrip().split("\n")[-n:])


def http_status(url, cafile, key=None):
    req = urllib.request.Request(url)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    ctx = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (OSError, ssl.SSLError) as e:
        return None, str(e)


def wait_ready(proc, log, probe, env, cwd):
    """Until `probe` answers (bounded), or the process ends."""
    deadline, last = time.monotonic() + READY_TIMEOUT, ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"exited {proc.returncode} before it was ready:\n"
                                 f"{tail(log.read())}")
        if probe.startswith("http"):
            status, last = http_status(probe, os.path.join(cwd, "ca.pem"))
            if status == 200:
                return
        else:
            r = subprocess.run(shlex.split(probe), env=env, cwd=cwd, capture_output=True,
                               text=True, timeout=10, stdin=subprocess.DEVNULL)
            last = r.stdout + r.stderr
            if r.stdout.strip() == "PONG":
                return
        time.sleep(0.1)
    log.seek(0)
    raise AssertionError(f"not ready within {READY_TIMEOUT} s ({probe}: {last.strip()}):\n"
                         f"{tail(log.read())}")


def run_shell(command, env, cwd):
    """(exit status, stdout, stderr, env after it) of `command` run by bash to its end."""
    envfile = os.path.join(cwd, ".env-after")
    script = (f"set -o pipefail\n{command}\n__status=$?\n"
              f"env -0 > {shlex.quote(envfile)}\nexit $__status\n")
    proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", script], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this command's bash leads
        out, err = proc.communicate()
        return None, out, err, env
    after = dict(env)
    if os.path.exists(envfile):
        with open(envfile) as f:
            pairs = [p.split("=", 1) for p in f.read().split("\0") if "=" in p]
        os.unlink(envfile)
        after = {k: v for k, v in pairs if k not in ("_", "SHLVL", "PWD", "OLDPWD")}
    return proc.returncode, out, err, after


# --- what the test checks beside the commands' exit status ----------------------------------

def push_a_job(v):
    """Before the backup: a job in the config's server, so the backup holds something."""
    req = urllib.request.Request(f"http://127.0.0.1:{v['cfg_port']}/v1/queues/docs/jobs",
                                 data=b'{"payload":{"n":1}}', method="POST",
                                 headers={"Authorization": "Bearer " + v["admin_key"],
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201, r.status


def restored_holds_the_job(v):
    """After the restored server is up: the job pushed before the backup is ready there."""
    status, body = http_status(f"http://127.0.0.1:{v['restored_port']}/v1/queues/docs", None,
                               v["admin_key"])
    assert status == 200 and '"ready":1' in body, (status, body)


def bgsave_done(v):
    """The doc's 'LASTSAVE again until it changed': the dump is written before it is checked."""
    deadline = time.monotonic() + READY_TIMEOUT
    dump = os.path.join(v["redis_dir"], "dump.rdb")
    while time.monotonic() < deadline:
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(v["redis_port"]), "INFO",
                            "persistence"], capture_output=True, text=True, timeout=10)
        if "rdb_bgsave_in_progress:0" in r.stdout and os.path.exists(dump):
            return
        time.sleep(0.1)
    raise AssertionError("BGSAVE did not finish")


def copy_is_the_dump(v):
    backups = os.path.join(v["scratch"], "backups")
    copies = [f for f in os.listdir(backups) if f.endswith(".rdb")]
    assert len(copies) == 1, copies
    with open(os.path.join(backups, copies[0]), "rb") as f:
        data = f.read()
    assert data.startswith(b"REDIS") and b"anteroom-docs" in data, data[:64]


# (before or after, the command's prefix in RUN) -> check
HOOKS = {
    ("before", 'redis-cli -u "$REDIS_URL" INFO persistence'): bgsave_done,
    ("after", "cp /var/lib/redis/dump.rdb "): copy_is_the_dump,
    ("before", "anteroom backup --server "): push_a_job,
    ("after", "anteroom serve --data "): restored_holds_the_job,
}


# --- the run --------------------------------------------------------------------------------

def main(binary):
    with open(DOC) as f:
        blocks = sh_blocks(f.read())
    problems = classify(blocks)
    if problems:
        print("\n".join(problems))
        return 1
    counted = sum(len(c) for c in blocks)
    elsewhere = [c for cs in blocks for _, c in cs if not any(c.startswith(p) for p, _, _ in RUN)]
    for command in elsewhere:
        path, needle, why = next(v for p, v in COVERED_ELSEWHERE.items() if command.startswith(p))
        print(f"elsewhere  {command}\n           {path} ({why})")

    scratch = tempfile.mkdtemp(prefix="anteroom-operations-")
    taken = set()
    v = {"scratch": scratch, "root": ROOT, "redis_dir": os.path.join(scratch, "redis"),
         "admin_key": secrets.token_hex(32), "queue_key": secrets.token_hex(16)}
    for name in ("cfg_port", "tls_port", "mtls_port", "restored_port", "rediss_port",
                 "redis_port", "redis_tls_port"):
        v[name] = free_port(taken)
    for d in ("bin", "backups", "redis"):
        os.mkdir(os.path.join(scratch, d))
    os.mkdir(os.path.join(scratch, "data"), 0o750)  # as the package's install makes it
    os.symlink(binary, os.path.join(scratch, "bin", "anteroom"))
    key_file = os.path.join(scratch, "admin.key")
    with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(v["admin_key"] + "\n")
    with open(os.path.join(ROOT, "packaging/anteroom.toml")) as f:
        config = f.read()
    for old, new in CONFIG_EDITS:
        assert old in config, f"packaging/anteroom.toml no longer holds {old!r}"
        config = config.replace(old, new.format(**v))
    with open(os.path.join(scratch, "anteroom.toml"), "w") as f:
        f.write(config)

    path = os.path.join(scratch, "bin") + ":" + os.environ.get("PATH", "/usr/bin:/bin")
    env = {"PATH": path, "HOME": scratch, "LANG": "C.UTF-8"}
    env.update({k: t.format(**v) for k, t in ENVIRONMENT.items()})
    servers, failures, used, ran = Servers(scratch), [], set(), 0
    # The certificate block first: the TLS blocks above it use its files.
    order = sorted(blocks, key=lambda b: not any(c.startswith(CERTIFICATE_BLOCK) for _, c in b))
    begun = time.monotonic()
    try:
        for n, commands in enumerate(order):
            for line, command in commands:
                if not any(command.startswith(p) for p, _, _ in RUN):
                    continue
                prefix, kind, check = entry(command)
                text, t0, proc = command, time.monotonic(), None
                try:
                    text = substitute(command, v, used)
                    if ("before", prefix) in HOOKS:
                        HOOKS[("before", prefix)](v)
                    if kind == "server":
                        proc, log = servers.start(command.split()[0], [
                            "bash", "--noprofile", "--norc", "-c", "exec " + text], env, scratch)
                        wait_ready(proc, log, check.format(**v), env, scratch)
                    else:
                        status, out, err, env = run_shell(text, env, scratch)
                        if status != 0:
                            raise AssertionError(
                                ("timed out" if status is None else f"exit {status}")
                                + f"\n--- stdout\n{tail(out)}\n--- stderr\n{tail(err)}")
                        if check and check.format(**v) not in out:
                            raise AssertionError(f"stdout lacks {check.format(**v)!r}:\n"
                                                 f"{tail(out)}\n--- stderr\n{tail(err)}")
                    if ("after", prefix) in HOOKS:
                        HOOKS[("after", prefix)](v)
                except (AssertionError, OSError, subprocess.SubprocessError) as e:
                    failures.append(f"docs/operations.md:{line}: {command}\n  ran: {text}\n  {e}")
                    print(f"FAIL       {command}")
                    if proc is not None and proc.poll() is not None:
                        servers.forget(proc)
                    break  # the rest of this block builds on it
                ran += 1
                print(f"ok {time.monotonic() - t0:6.2f}s {command}")
            if n == 0:
                # The certificates exist: the TLS listeners the TLS blocks talk to, and the Redis
                # the backup block saves (stand-ins for the doc's 127.0.0.1:8443 and $REDIS_URL).
                setup_servers(servers, v, env, scratch)
    except (AssertionError, OSError, subprocess.SubprocessError) as e:
        failures.append(f"setup: {e}")
    finally:
        for name, early, status, log in servers.stop_all():
            if early is not None:
                failures.append(f"{name} exited {early} on its own:\n{tail(log)}")
            elif status != 0:
                failures.append(f"{name} exited {status} at SIGTERM (the doc: 0):\n{tail(log)}")
    unused = [SUBSTITUTIONS[i] for i in range(len(SUBSTITUTIONS)) if i not in used]
    if not failures and unused:
        failures += [f"substitution applied to no command: {s}" for s in unused]
    print(f"{counted} commands in docs/operations.md: {ran} run here, {len(elsewhere)} covered "
          f"elsewhere; {time.monotonic() - begun:.1f} s")
    if failures:
        print("\n\n".join(["FAILED:"] + failures))
        print(f"(scratch directory kept: {scratch})")
        return 1
    subprocess.run(["rm", "-rf", "--", scratch], check=False)
    return 0


def setup_servers(servers, v, env, scratch):
    """The TLS listeners (one asking for client certificates) and a plain Redis with a key."""
    keys = {"PATH": env["PATH"], "ANTEROOM_ADMIN_KEY": v["admin_key"],
            "ANTEROOM_QUEUE_KEY": v["queue_key"]}
    tls = ["anteroom", "serve", "--memory-only", "--tls-cert", "server.pem", "--tls-key",
           "server.key", "--listen"]
    started = [
        servers.start("anteroom-tls", tls + [f"127.0.0.1:{v['tls_port']}"], keys, scratch),
        servers.start("anteroom-tls-client-ca", tls + [f"127.0.0.1:{v['mtls_port']}",
                                                       "--tls-client-ca", "ca.pem"], keys, scratch),
        servers.start("redis-server", ["redis-server", "--port", str(v["redis_port"]), "--bind",
                                       "127.0.0.1", "--dir", v["redis_dir"], "--save", "",
                                       "--appendonly", "no"], env, scratch),
    ]
    probes = [f"https://127.0.0.1:{v['tls_port']}/readyz",
              f"https://127.0.0.1:{v['mtls_port']}/readyz",
              f"redis-cli -h 127.0.0.1 -p {v['redis_port']} PING"]
    for (proc, log), probe in zip(started, probes):
        wait_ready(proc, log, probe, env, scratch)
    subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(v["redis_port"]), "SET",
                    "anteroom-docs", "1"], check=True, capture_output=True, timeout=10)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isabs(sys.argv[1]):
        sys.exit(f"usage: {sys.argv[0]} /ABSOLUTE/PATH/TO/anteroom")
    missing = [t for t in TOOLS if subprocess.run(["sh", "-c", f"command -v {t}"],
                                                   capture_output=True).returncode]
    if missing:
        print(f"operations_commands_test: skipped: {', '.join(missing)} not installed "
              "(scripts/setup.sh installs them)")
        sys.exit(SKIP)
    sys.exit(main(sys.argv[1]))

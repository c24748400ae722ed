#!/usr/bin/env python3
"""The Debian package, installed on this machine for real (root and dpkg needed, else skipped):

- scripts/package.sh builds it from the built binary; dpkg -i installs it;
- `systemd-analyze verify` accepts the installed unit;
- the server started the way the unit starts it (its ExecStart, as its User and Group, with
  its config; only --listen added, for a free port) answers /readyz, keeps the admin routes
  behind the key generated at install, and tells a notify socket of the test's own READY, then
  WATCHDOG keep-alives, then STOPPING at SIGTERM, and exits 0;
- the man page is there;
- dpkg --purge leaves nothing behind but the system user (kept, as Debian keeps system users).

Run by ctest (tests/CMakeLists.txt) as `package_test.py BINARY`. Loopback only; every process
it starts is stopped by its PID; the package is purged whatever happens.
"""
import gzip
import json
import os
import pwd
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("ANTEROOM_BINARY", os.path.join(ROOT, "build/release/anteroom"))
UNIT = "/lib/systemd/system/anteroom.service"
SKIP = 77  # ctest's SKIP_RETURN_CODE


def run(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=300,
                          **kw)


def installed():
    r = run("dpkg-query", "-W", "-f=${Status}", "anteroom", check=False)
    return "install ok installed" in r.stdout


def unit_value(text, key):
    for line in text.splitlines():
        if line.startswith(key + "="):
            return line[len(key) + 1:]
    return None


def receive(sock, seconds, until=None):
    """The notify messages that arrive within `seconds` (or until one satisfies `until`)."""
    out = []
    end = time.time() + seconds
    while time.time() < end and not (until and any(until(m) for m in out)):
        try:
            out.append(sock.recv(4096).decode())
        except socket.timeout:
            pass
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, key=None):
    req = urllib.request.Request(url)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.TemporaryDirectory(prefix="anteroom-deb-")
        r = run("bash", os.path.join(ROOT, "scripts/package.sh"), "--binary", BINARY,
                "--out", cls.out.name)
        cls.deb = r.stdout.strip().splitlines()[-1]
        run("dpkg", "-i", cls.deb)

    @classmethod
    def tearDownClass(cls):
        run("dpkg", "--purge", "anteroom", check=False)
        cls.out.cleanup()

    def test_1_the_package_holds_what_it_says(self):
        info = run("dpkg-deb", "--field", self.deb, "Package", "Depends").stdout
        self.assertIn("Package: anteroom", info)
        self.assertIn("libc6", info)  # dpkg-shlibdeps ran
        files = run("dpkg", "-L", "anteroom").stdout.split()
        for path in ["/usr/bin/anteroom", UNIT, "/etc/anteroom/anteroom.toml",
                     "/usr/share/man/man1/anteroom.1.gz",
                     "/usr/share/doc/anteroom/operations.md.gz"]:
            self.assertIn(path, files)
        conffiles = run("dpkg-query", "-W", "-f=${Conffiles}", "anteroom").stdout
        self.assertIn("/etc/anteroom/anteroom.toml", conffiles)
        with gzip.open("/usr/share/man/man1/anteroom.1.gz", "rt") as f:
            man = f.read()
        self.assertIn(".TH ANTEROOM", man)
        self.assertIn("--max-connections", man)  # serve's options are in it
        self.assertIn("config check", man)

    def test_2_install_made_the_user_the_data_directory_and_a_key(self):
        user = pwd.getpwnam("anteroom")
        self.assertEqual(user.pw_shell, "/usr/sbin/nologin")
        self.assertLess(user.pw_uid, 1000)  # a system user
        st = os.stat("/var/lib/anteroom")
        self.assertEqual((st.st_uid, oct(st.st_mode & 0o777)), (user.pw_uid, "0o750"))
        st = os.stat("/etc/anteroom/admin.key")
        self.assertEqual((st.st_uid, oct(st.st_mode & 0o777)), (user.pw_uid, "0o600"))
        with open("/etc/anteroom/admin.key") as f:
            self.assertRegex(f.read(), r"^[0-9a-f]{64}$")
        r = run("/usr/bin/anteroom", "config", "check", "/etc/anteroom/anteroom.toml")
        self.assertIn('admin_key = "****"', r.stdout)
        with open("/etc/anteroom/admin.key") as f:
            self.assertNotIn(f.read().strip(), r.stdout)

    def test_3_systemd_analyze_verifies_the_unit(self):
        r = run("systemd-analyze", "verify", UNIT, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(UNIT) as f:
            unit = f.read()
        self.assertEqual(unit_value(unit, "Type"), "notify")
        self.assertEqual(unit_value(unit, "NoNewPrivileges"), "yes")
        self.assertEqual(unit_value(unit, "ProtectSystem"), "strict")
        self.assertIsNotNone(unit_value(unit, "WatchdogSec"))
        # Enough descriptors for the default --max-connections (100,000) and the rest.
        self.assertGreaterEqual(int(unit_value(unit, "LimitNOFILE")), 200_000)

    def test_4_started_as_the_unit_starts_it(self):
        with open(UNIT) as f:
            unit = f.read()
        argv = shlex.split(unit_value(unit, "ExecStart"))
        user, group = unit_value(unit, "User"), unit_value(unit, "Group")
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="anteroom-notify-") as d:
            path = os.path.join(d, "notify")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(path)
            os.chmod(d, 0o755)
            os.chmod(path, 0o777)  # the server's user writes to it, as to systemd's
            sock.settimeout(0.1)
            env = {"PATH": "/usr/bin:/bin", "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"}
            log = open(os.path.join(d, "stderr"), "w+")
            proc = subprocess.Popen(
                ["setpriv", "--reuid", user, "--regid", group, "--init-groups", "--"] + argv
                + ["--listen", f"127.0.0.1:{port}"],
                env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=log)
            try:
                messages = receive(sock, 10, until=lambda m: m.startswith("READY=1"))
                self.assertTrue(messages and messages[0].startswith("READY=1"), messages)
                self.assertIn("embedded durable backend in /var/lib/anteroom", messages[0])
                url = f"http://127.0.0.1:{port}"
                self.assertEqual(get(url + "/readyz")[0], 200)
                self.assertEqual(get(url + "/v1/queues")[0], 401)
                with open("/etc/anteroom/admin.key") as f:
                    key = f.read().strip()
                status, body = get(url + "/v1/queues", key)
                self.assertEqual(status, 200, body)
                self.assertEqual(json.loads(body)["queues"], [])
                messages += receive(sock, 1.0)
                self.assertGreaterEqual(messages.count("WATCHDOG=1"), 3, messages)
                # Its files are the user's: it ran as the user, in the data directory.
                owner = pwd.getpwuid(os.stat("/var/lib/anteroom").st_uid).pw_name
                self.assertEqual(owner, user)
                self.assertTrue(os.listdir("/var/lib/anteroom"))
                for name in os.listdir("/var/lib/anteroom"):
                    st = os.stat(os.path.join("/var/lib/anteroom", name))
                    self.assertEqual(pwd.getpwuid(st.st_uid).pw_name, user, name)
                proc.send_signal(signal.SIGTERM)
                status = proc.wait(timeout=30)
                log.seek(0)
                self.assertEqual(status, 0, log.read())
                messages += receive(sock, 1.0)
                order = [m.split("\n")[0] for m in messages]
                self.assertEqual(order[0], "READY=1")
                self.assertEqual(order[-1], "STOPPING=1")
                self.assertEqual(set(order[1:-1]), {"WATCHDOG=1"})
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                sock.close()
                log.close()

    def test_5_purge_leaves_nothing_but_the_user(self):
        run("dpkg", "--purge", "anteroom")
        self.assertFalse(installed())
        for path in ["/usr/bin/anteroom", UNIT, "/etc/anteroom", "/var/lib/anteroom",
                     "/usr/share/man/man1/anteroom.1.gz", "/usr/share/doc/anteroom",
                     "/etc/systemd/system/multi-user.target.wants/anteroom.service"]:
            self.assertFalse(os.path.lexists(path), path)
        r = run("dpkg-query", "-W", "anteroom", check=False)
        self.assertNotEqual(r.returncode, 0, "purged: dpkg no longer knows it")
        pwd.getpwnam("anteroom")  # the system user stays


if __name__ == "__main__":
    if len(sys.argv) > 1:
        BINARY = sys.argv.pop(1)
    if os.geteuid() != 0:
        print("package_test: skipped: installing a package needs root")
        sys.exit(SKIP)
    for tool in ("dpkg-deb", "dpkg-shlibdeps", "help2man", "systemd-analyze", "setpriv"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            print(f"package_test: skipped: {tool} is not installed (scripts/setup.sh installs it)")
            sys.exit(SKIP)
    if installed():
        print("package_test: skipped: an anteroom package is installed here already")
        sys.exit(SKIP)
    unittest.main(verbosity=2)

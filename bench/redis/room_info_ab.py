# What does the room object cost Redis? Two room.lua libraries paired on one room: room.lua's
# `get` (GET /v1/rooms/{room}, and each room of the listing) on a room of capacity 100 (100
# holders, 10,000 waiting), first with no event, then (EVENTS=1) with an event running and with a
# pre-queue open. For each: the commands the script runs (MONITOR, one call per library), then
# ROUNDS rounds (default 30) of N calls (default 1,000) per library, the order flipping every
# round, with Redis's server time per FCALL read from INFO commandstats; prints each library's
# median and the median of the paired ratios B/A.
#   python3 bench/redis/room_info_ab.py PORT LIB_A LIB_B
# Each LIB is room.lua as anteroom sends it (`build/release/bench/assembled_script room` of the
# build to compare), FUNCTION LOADed under that name (the library "#!lua name=LIB\n" + the
# script + "\nredis.register_function('LIB', run)\n", as cluster_client.cc loads it). The events
# are put through LIB_B: a library without the schedule cannot run EVENTS=1.
import os, statistics, sys
from resp_kit import Conn, encode, room_keys
port = int(sys.argv[1]); libs = sys.argv[2:4]
rounds = int(os.environ.get("ROUNDS", "30")); n = int(os.environ.get("N", "1000"))
keys = room_keys("ab")
call = Conn(port).call
T0 = 1_800_000_000_000
entropy = os.urandom(32).hex()  # room.lua's ARGV 4
def room(lib, op, now, *a): return call("FCALL", lib, len(keys), *keys, op, now, 600000, entropy, *a)
def us_per_call():
    st = call("INFO", "commandstats").decode()
    line = [l for l in st.split("\r\n") if l.startswith("cmdstat_fcall")][0]
    return float(line.split("usec_per_call=")[1].split(",")[0])
# The commands one `get` of `lib` runs inside the script, as MONITOR shows them ("[0 lua]").
def monitored(lib, now):
    m = Conn(port); m.call("MONITOR")
    room(lib, "get", now); call("PING")
    cmds = []
    while True:
        line = m.reply().decode()
        if '"PING"' in line: break
        if "lua]" in line: cmds.append(line.split('] "')[1].split('"')[0])
    m.close(); return cmds
call("DEL", *keys)
# capacity 100, grace 30 s, check-in timeout 1 h, no idle time-out, no rate cap
room(libs[0], "put", T0, 100, 30000, 3600000, -1, -1)
for i in range(100): room(libs[0], "check", T0, "h%d" % i)
for i in range(10000): room(libs[0], "check", T0, "w%05d" % i)
now = T0 + 1000
def compare(label):
    global now
    for lib in libs:
        now += 1; c = monitored(lib, now)
        print("%s, %s: %d commands in the script: %s" % (label, lib, len(c), " ".join(c)))
    times = {lib: [] for lib in libs}
    for r in range(rounds):
        for lib in (libs if r % 2 == 0 else libs[::-1]):
            call("CONFIG", "RESETSTAT")
            for i in range(n): now += 1; room(lib, "get", now)
            times[lib].append(us_per_call())
    a, b = times[libs[0]], times[libs[1]]
    print("%s: get %s %.2f us, %s %.2f us (medians of %d x %d); paired %s/%s: x%.3f" % (
        label, libs[0], statistics.median(a), libs[1], statistics.median(b), rounds, n, libs[1],
        libs[0], statistics.median([y / x for x, y in zip(a, b)])))
compare("no event")
if os.environ.get("EVENTS"):
    # event_put ARGV: id name prequeue_at starts_at ends_at shuffle scope suspended, the overrides
    # cap apm grace cto method, page. Running now, with a capacity of 200:
    room(libs[1], "event_put", now, "drop", "d", "", now, now + 10**9, "0", "new", "0", 200, "", "",
         "", "", "")
    compare("an event running")
    room(libs[1], "event_delete", now, "drop")
    # A pre-queue open now, the start far off, 100 people in it:
    room(libs[1], "event_put", now, "drop2", "d", now, now + 10**8, now + 10**9, "0", "new", "0", "",
         "", "", "", "", "")
    for i in range(100): room(libs[1], "check", now, "p%d" % i)
    compare("a pre-queue open")

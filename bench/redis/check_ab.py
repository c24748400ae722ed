# Did a change to room.lua cost a check Redis time? Two room.lua libraries, paired on one room:
# a room of capacity 100 (100 holders, 10,000 waiting) is made once, then ROUNDS rounds (default
# 30) each run N checks (default 1,000) of each kind through each library, the order flipping
# every round, with Redis's server time per FCALL read from INFO commandstats around each batch:
# a waiting session (ZRANK, the bench's case), an active one, and a join (to the end of the line:
# the line grows alike under both). Prints each library's median and the median of the paired
# ratios B/A, which a busy machine's drift moves far less than either median.
#   python3 bench/redis/check_ab.py PORT LIB_A LIB_B
# Each LIB is room.lua as anteroom sends it (`build/release/bench/assembled_script room` of the
# build to compare), FUNCTION LOADed under that name; the room's state is the same format for
# both (docs/benchmarks.md, "Redis backend"). Calls are made as anteroom makes them now (15 keys,
# ARGV 4 the entropy).
import os, statistics, sys
from resp_kit import Conn, room_keys
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
call("DEL", *keys)
# capacity 100, grace 30 s, check-in timeout 1 h, no idle time-out, no rate cap
room(libs[0], "put", T0, 100, 30000, 3600000, -1, -1)
for i in range(100): room(libs[0], "check", T0, "h%d" % i)
for i in range(10000): room(libs[0], "check", T0, "w%05d" % i)
now, joined = T0 + 1000, 0
kinds = ("waiting", "active", "join")
times = {lib: {k: [] for k in kinds} for lib in libs}
for r in range(rounds):
    for lib in (libs if r % 2 == 0 else libs[::-1]):
        for kind in kinds:
            call("CONFIG", "RESETSTAT")
            for i in range(n):
                now += 1
                if kind == "waiting": who = "w%05d" % ((i * 7919) % 10000)
                elif kind == "active": who = "h%d" % (i % 100)
                else: joined += 1; who = "j%07d" % joined
                room(lib, "check", now, who)
            times[lib][kind].append(us_per_call())
for kind in kinds:
    a, b = times[libs[0]][kind], times[libs[1]][kind]
    print("check, %-7s %s %.2f us, %s %.2f us (medians of %d x %d); paired %s/%s: x%.3f" % (
        kind, libs[0], statistics.median(a), libs[1], statistics.median(b), rounds, n, libs[1],
        libs[0], statistics.median([y / x for x, y in zip(a, b)])))

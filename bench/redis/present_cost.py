# The Redis time of a live channel keep-alive (`present` of 2,000 waiting sessions in a room of
# 10,000 whose freed-slot window holds 50 one-second buckets), and of a check of one waiting
# session in that room, for room.lua libraries loaded side
# by side: python3 bench/redis/present_cost.py PORT LIB... (each LIB a FUNCTION LOADed room.lua as
# anteroom sends it, `build/release/bench/assembled_script room`, registered under that name; BUCKETS=N for another window; docs/benchmarks.md, "100,000 live
# clients over 6 processes"). Calls are made as anteroom makes them now (15 keys, ARGV 4 the
# entropy): a library from before that calling convention needs the script of its own day.
import os, sys
from resp_kit import Conn, room_keys
port = int(sys.argv[1]); libs = sys.argv[2:]
keys = room_keys("pm")
call = Conn(port).call
T0 = 1_800_000_000_000
for lib in libs:
    call("DEL", *keys)
    # op, now, token ttl, then the 32 random bytes (in hex) every call carries (room.lua ENTROPY)
    room = lambda op, now, ttl, *a: call("FCALL", lib, len(keys), *keys, op, now, ttl,
                                         os.urandom(32).hex(), *a)
    room("put", T0, 600000, 10, 30000, 3600000, -1, -1)
    for i in range(10): room("check", T0, 600000, "h%d" % i)
    for i in range(10000): room("check", T0, 600000, "w%05d" % i)
    # one holder leaves in each of 50 seconds: the freed window holds 50 buckets
    for sec in range(int(os.environ.get("BUCKETS", "50"))):
        holder = "h%d" % sec if sec < 10 else "w%05d" % (sec - 10)
        room("leave", T0 + sec * 1000, 600000, holder, 1)
    now = T0 + 50_000
    ids = ["w%05d" % i for i in range(100, 2100)]
    call("CONFIG", "RESETSTAT")
    for r in range(20): room("present", now + r, 600000, *ids)
    st = call("INFO", "commandstats").decode()
    us = [l for l in st.split("\r\n") if l.startswith("cmdstat_fcall")][0]
    per_call = float(us.split("usec_per_call=")[1].split(",")[0])
    print(lib, "present of 2000 waiting: %.0f us per call, %.2f us per session" % (per_call, per_call / 2000))
    # A room check of a waiting session in the same room (its answer has an ETA).
    call("CONFIG", "RESETSTAT")
    for r in range(2000): room("check", now + 100 + r, 600000, ids[r])
    st = call("INFO", "commandstats").decode()
    us = [l for l in st.split("\r\n") if l.startswith("cmdstat_fcall")][0]
    print(lib, "check of a waiting session: %.1f us" % float(us.split("usec_per_call=")[1].split(",")[0]))

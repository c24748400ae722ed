# What a draw costs Redis (docs/benchmarks.md, "The draw on Redis"): a room whose pre-queue holds
# N people (default 1,000,000), the call that starts its event (the pre-queue renamed to the draw,
# the seed kept), then every chunk of CHUNK positions (default 10,000) published as the
# processes' sweepers publish them (room.lua `draw`, the ranks of a permutation in the
# arguments), back to back. Prints Redis's time for the start, the mean and the longest chunk
# (INFO commandstats around each call), and the time the calls took from one client.
#   python3 bench/redis/draw_cost.py PORT LIB [N] [CHUNK]
# LIB: room.lua as anteroom sends it (`build/release/bench/assembled_script room`), FUNCTION
# LOADed under that name. The ranks here are Python's shuffle, not core::FisherYates: Redis's
# work per chunk does not depend on which permutation it is.
import os, random, sys, time
from resp_kit import Conn, encode, room_keys

port, lib = int(sys.argv[1]), sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
chunk = int(sys.argv[4]) if len(sys.argv) > 4 else 10_000
keys = room_keys("draw")
conn = Conn(port); s, call, reply = conn.s, conn.call, conn.reply
def room_args(op, now, *a):
    return ["FCALL", lib, len(keys), *keys, op, now, 600000, os.urandom(32).hex(), *a]
def room(op, now, *a): return call(*room_args(op, now, *a))
T0 = 1_800_000_000_000
call("DEL", *keys)
# capacity 1, a check-in timeout of an hour: nobody drops out before the draw
room("put", T0, 1, 30000, 3_600_000, -1, -1)
room("check", T0, "holder")
room("event_put", T0, "drop", "drop", T0, T0 + 60_000, T0 + 7_200_000, 1, "new", 0,
     "", "", "", "", "", "")
batch = 10_000
for base in range(0, n, batch):  # pipelined joins, 10,000 a round trip
    s.sendall(b"".join(encode(room_args("check", T0, "p%09d" % i))
                       for i in range(base, min(n, base + batch))))
    for _ in range(base, min(n, base + batch)): reply()
start = T0 + 60_000
def fcall_usec():  # Redis's time in FCALL so far (INFO commandstats)
    for l in call("INFO", "commandstats").decode().split("\r\n"):
        if l.startswith("cmdstat_fcall:"):
            return int(l.split("usec=")[1].split(",")[0])
    return 0
u = fcall_usec()
state = room("advance", start)[2]
start_us = fcall_usec() - u
assert state[2] == str(n).encode(), state
seed = state[4]
order = list(range(n)); random.shuffle(order)
chunks, wall = [], 0.0
for at in range(0, n, chunk):
    u = fcall_usec()
    t = time.perf_counter()
    state = room("draw", start, at, chunk, seed, *order[at:at + chunk])[2]
    wall += time.perf_counter() - t
    chunks.append(fcall_usec() - u)
line = int(call("ZCARD", keys[1]))
print(f"draw of {n:,} in chunks of {chunk:,}: start {start_us / 1e3:.2f} ms; "
      f"{len(chunks)} chunks, mean {sum(chunks) / len(chunks) / 1e3:.1f} ms, "
      f"longest {max(chunks) / 1e3:.1f} ms (Redis time); publication {wall:.1f} s "
      f"wall from one client; line {line:,}, draw over: {state == []}")
call("DEL", *keys)

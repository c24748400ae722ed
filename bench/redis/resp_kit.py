# What the Redis bench scripts here share (standard library only): a RESP connection, and the
# keys of one room as anteroom passes them to room.lua, so that a key the script gains is
# added in one place.
import socket

ROOM_KEYS = ["m", "l", "s", "d", "v", "x", "c", "cf", "g", "ln", "ld", "ev", "pq", "dw", "ps", "pg"]


def room_keys(tag):
    """The keys of room `tag` under the bench prefix, in room.lua's KEYS order."""
    return ["t:{r:%s}:%s" % (tag, k) for k in ROOM_KEYS]


def encode(args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def reply(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest)
        if kind == b"$":
            return None if int(rest) < 0 else self.f.read(int(rest) + 2)[:-2]
        return None if int(rest) < 0 else [self.reply() for _ in range(int(rest))]

    def call(self, *args):
        self.s.sendall(encode(args))
        return self.reply()

    def close(self):
        self.s.close()

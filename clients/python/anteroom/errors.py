"""The one error type of the client: the server's `{"error": {"code", "message"}}` answers."""

from __future__ import annotations


class AnteroomError(Exception):
    """An answer the server refused with, as docs/api.md's Errors table lists them.

    `status` is the HTTP status, `code` the machine-readable code (`unknown_room`,
    `invalid_argument`, ...), `message` the server's words. `retry_after` is the `Retry-After`
    header in seconds when the server sent one (429, 503), else None.
    """

    def __init__(
        self, status: int, code: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[type[AnteroomError], tuple[int, str, str, float | None]]:
        # Picklable with its fields (the default would pass only the formatted text).
        return (type(self), (self.status, self.code, self.message, self.retry_after))


def is_transient(exc: BaseException) -> bool:
    """Whether trying again later may succeed: the server unreachable, or answering 503.

    A 503 means overload, a lost backend or a full disk (docs/api.md): nothing changed, or (a
    change that waited for the disk) the outcome is unknown, which is why pushes retried this
    way should carry a `dedupe_key`.
    """
    if isinstance(exc, AnteroomError):
        return exc.status == 503
    # Refused, reset, timed out, DNS: everything the socket layer raises.
    return isinstance(exc, OSError)

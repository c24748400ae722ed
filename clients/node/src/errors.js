// The one error type of the client: what the server refused, as it said it.
//
// The server answers every error as {"error": {"code", "message"}} (docs/api.md "Errors"), so
// callers branch on `code` (stable words such as "unknown_room" or "invalid_argument"), not on
// the message text. Transport failures (refused connections, resets, timeouts) are Node's own
// errors (err.code "ECONNREFUSED" ...), not AnteroomError: nothing was answered.

export class AnteroomError extends Error {
  constructor(status, code, message, { retryAfterMs = 0, body = null } = {}) {
    super(message || code);
    this.name = 'AnteroomError';
    this.status = status; // the HTTP status
    this.code = code; // the API's error code, or `http_<status>` when the body said none
    this.retryAfterMs = retryAfterMs; // from Retry-After (429, 503), 0 when not said
    this.body = body; // the parsed answer, when it was JSON
  }
}

// Whether trying again later may succeed: the server was overloaded or lost its backend (503),
// the request timed out (408), or nothing was answered at all (a connection error). A 4xx is
// the request's own fault and stays one.
export function isRetryable(err) {
  if (err instanceof AnteroomError) {
    return err.status === 503 || err.status === 408 || err.status === 429 || err.status >= 500;
  }
  return !(err && err.name === 'AbortError');
}

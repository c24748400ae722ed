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

// The longest snooze the server takes (docs/api.md, nack's `retry_after_ms`).
const MAX_RETRY_AFTER_MS = 3_600_000;

// Thrown by a Worker's handler when an upstream service said to slow down (a 429): the worker
// then snoozes the job instead of nacking it. The job comes back after retryAfterMs without
// using up an attempt, and the server hands out nothing else of its group until then (nothing
// of the queue, for a job without a group). retryAfterMs is 0..3,600,000 (a fraction is
// rounded up): an upstream `Retry-After` of s seconds is `new RateLimited(s * 1000)`.
export class RateLimited extends Error {
  constructor(retryAfterMs, message) {
    const ms = Math.ceil(retryAfterMs);
    if (!Number.isFinite(ms) || ms < 0 || ms > MAX_RETRY_AFTER_MS) {
      throw new RangeError(`anteroom: retryAfterMs must be from 0 to ${MAX_RETRY_AFTER_MS}, not ${retryAfterMs}`);
    }
    super(message || `rate limited: retry after ${ms} ms`);
    this.name = 'RateLimited';
    this.retryAfterMs = ms;
  }
}

// What waitForResult rejects with for a job that will have no result: it is dead (every
// attempt failed; lastError is its last attempt's error) or cancelled. `job` is the job as
// getJob answered it.
export class JobFailed extends Error {
  constructor(job) {
    const state = String(job?.state);
    let message = `job ${job?.id} was ${state}`;
    if (state === 'dead') {
      message = `job ${job?.id} is dead after ${job?.attempts} attempt(s)`;
      if (job?.last_error !== undefined) message += `; its last error: ${job.last_error}`;
    }
    super(message);
    this.name = 'JobFailed';
    this.job = job;
    this.jobId = job?.id;
    this.state = state;
    this.lastError = job?.last_error ?? null;
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

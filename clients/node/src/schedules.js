// Schedules of repeatable jobs (docs/api.md "Schedules"): the body of a Client's putSchedule.
// Each run of a cron expression (in a time zone) or of a fixed interval pushes one job to the
// schedule's queue, at most once per run however many servers share the backend.
import { seg } from './http.js';

// putSchedule's options and their names on the wire; the job's fields go in "job".
const FIELDS = {
  cron: 'cron',
  tz: 'tz',
  everyMs: 'every_ms',
  startAt: 'start_at',
  endAt: 'end_at',
  maxRuns: 'max_runs',
  overlap: 'overlap',
  misfire: 'misfire',
  misfireGraceMs: 'misfire_grace_ms',
  maxCatchup: 'max_catchup',
  jitterMs: 'jitter_ms',
};
const JOB_FIELDS = { priority: 'priority', group: 'group', maxAttempts: 'max_attempts' };

export function schedulePath(id) {
  return id === undefined ? '/v1/schedules' : `/v1/schedules/${seg(id)}`;
}

// The PUT body of a schedule on `queue`. An option this client does not know throws a
// TypeError: renamed to the server's spelling, a misspelt one would otherwise vanish unseen
// instead of being refused by name as the server refuses unknown fields.
export function scheduleBody(queue, options = {}) {
  const body = { queue };
  const job = { payload: options.payload === undefined ? null : options.payload };
  for (const [name, value] of Object.entries(options)) {
    if (value === undefined || name === 'payload') continue;
    if (name in FIELDS) {
      // A Date names an instant; the server reads RFC 3339 text (or ms since the epoch).
      body[FIELDS[name]] = value instanceof Date ? value.toISOString() : value;
    } else if (name in JOB_FIELDS) {
      job[JOB_FIELDS[name]] = value;
    } else {
      throw new TypeError(`anteroom: '${name}' is not an option of putSchedule (its options: ${[
        ...Object.keys(FIELDS), 'payload', ...Object.keys(JOB_FIELDS)].join(', ')})`);
    }
  }
  body.job = job;
  return body;
}

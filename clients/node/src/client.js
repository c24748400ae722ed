// Client: one server and one key, shared by the queues, workers and rooms made from it, so
// they share one keep-alive agent (one pool of connections); the server's schedules of
// repeatable jobs are its own calls (a schedule belongs to no one queue object).
import { Transport } from './http.js';
import { Queue } from './queue.js';
import { Room } from './room.js';
import { scheduleBody, schedulePath } from './schedules.js';

export class Client {
  // {url, key?, agent?, keepAlive = true, timeoutMs = 30000}
  constructor(options = {}) {
    this.transport = new Transport(options);
  }

  get url() {
    return this.transport.base.href;
  }

  queue(name) {
    return new Queue(name, { client: this });
  }

  room(name) {
    return new Room(name, { client: this });
  }

  // Schedules of repeatable jobs (docs/api.md "Schedules"): every call is an admin one, so the
  // client's key must be the admin key. A schedule that does not exist rejects with
  // AnteroomError 404 unknown_schedule.

  // Admin: creates schedule `id` pushing to `queue`, or changes it; resolves with the schedule.
  // options: exactly one of cron (read in tz, default 'UTC') and everyMs (>= 1000, from
  // startAt); startAt, endAt (ms since the epoch, RFC 3339 text or a Date); maxRuns; overlap
  // ('allow' | 'skip'); misfire ('skip' | 'run_once' | 'run_all'), misfireGraceMs, maxCatchup;
  // jitterMs; and each run's job: payload, priority, group, maxAttempts. A call replaces the
  // whole schedule (what it leaves out goes back to its default) but keeps its runs: no time
  // is run twice. Rejects with 400 invalid_argument, 409 conflict (the id is on another
  // queue) or 507 limit_reached (10,000 schedules).
  putSchedule(id, queue, options = {}) {
    return this.transport.json('PUT', schedulePath(id), scheduleBody(queue, options));
  }

  // The schedule as put, with paused, runs, last_run_at, last_job_id, next_run_at (null once
  // it is over) and next_fire_times (the next 5, RFC 3339).
  schedule(id) {
    return this.transport.json('GET', schedulePath(id));
  }

  // Every schedule of the server, by id.
  async schedules() {
    return (await this.transport.json('GET', schedulePath())).schedules;
  }

  // Fires nothing until resumed; resolves with the schedule.
  pauseSchedule(id) {
    return this.transport.json('POST', `${schedulePath(id)}/pause`);
  }

  // Goes on from now: the times that passed while paused are not run.
  resumeSchedule(id) {
    return this.transport.json('POST', `${schedulePath(id)}/resume`);
  }

  // Resolves with the schedule as it was, deleted: true. The jobs it pushed stay queued.
  deleteSchedule(id) {
    return this.transport.json('DELETE', schedulePath(id));
  }

  // Closes the idle kept-alive connections (of an agent the client made itself).
  close() {
    this.transport.close();
  }
}

// The Client behind options given to Queue, Worker or Room: {client}, or the Client's own
// options ({url, key, agent, keepAlive}), or BullMQ's spelling {connection: {url, key}}.
export function clientOf(options = {}) {
  if (options instanceof Client) return options;
  if (options.client) return options.client;
  if (options.connection) return clientOf(options.connection);
  return new Client(options);
}

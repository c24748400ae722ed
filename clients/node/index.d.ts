// Types of the anteroom Node.js client (hand-written; the package is plain JavaScript).
import { EventEmitter } from 'node:events';
import type { Agent } from 'node:http';

/** Where the server is and how to authenticate. */
export interface ConnectionOptions {
  /** The server's root URL, e.g. "http://127.0.0.1:8080" (a path prefix behind a proxy is kept). */
  url: string;
  /** Sent as `Authorization: Bearer KEY`: the queue key or the admin key. */
  key?: string | null;
  /** An http(s).Agent to share; by default the client makes one with keepAlive. */
  agent?: Agent | null;
  /** Keep connections alive between requests (default true; only for the client's own agent). */
  keepAlive?: boolean;
  /** How long a request may wait for its answer, in ms (default 30000; long polls add their wait). */
  timeoutMs?: number;
}

/** A Client, its options, or BullMQ's spelling `{connection: {...}}`. */
export type ClientOptions =
  | ConnectionOptions
  | { client: Client }
  | { connection: ConnectionOptions | Client };

/** One server and one key; its queues, workers and rooms share one keep-alive agent. */
export declare class Client {
  constructor(options: ConnectionOptions);
  readonly url: string;
  queue(name: string): Queue;
  room(name: string): Room;
  /**
   * Admin: creates schedule `id` pushing to `queue`, or changes it (what is left out goes back
   * to its default; its runs are kept, no time runs twice). Rejects with AnteroomError 400
   * invalid_argument, 409 conflict (the id is on another queue), 507 limit_reached.
   */
  putSchedule<T = unknown>(id: string, queue: string, options: ScheduleOptions<T>): Promise<Schedule<T>>;
  /** Admin: the schedule; AnteroomError 404 unknown_schedule when there is none. */
  schedule<T = unknown>(id: string): Promise<Schedule<T>>;
  /** Admin: every schedule of the server, by id. */
  schedules(): Promise<Schedule[]>;
  /** Admin: fires nothing until resumed. */
  pauseSchedule<T = unknown>(id: string): Promise<Schedule<T>>;
  /** Admin: goes on from now (the times that passed while paused are not run). */
  resumeSchedule<T = unknown>(id: string): Promise<Schedule<T>>;
  /** Admin: the schedule as it was, `deleted: true`; the jobs it pushed stay queued. */
  deleteSchedule<T = unknown>(id: string): Promise<Schedule<T> & { deleted: true }>;
  /** Closes the idle kept-alive connections of an agent the client made itself. */
  close(): void;
}

/** What the server refused: `{"error": {"code", "message"}}` with the HTTP status. */
export declare class AnteroomError extends Error {
  constructor(status: number, code: string, message?: string, extra?: { retryAfterMs?: number; body?: unknown });
  readonly name: 'AnteroomError';
  /** The HTTP status. */
  status: number;
  /** The API's error code ("unknown_room", "invalid_argument", ...), or `http_<status>`. */
  code: string;
  /** From Retry-After (429, 503); 0 when not said. */
  retryAfterMs: number;
  /** The parsed answer, when it was JSON. */
  body: unknown;
}

/**
 * Thrown by a Worker's handler when an upstream service said to slow down: the job is snoozed
 * (back after `retryAfterMs`, no attempt used up, its group held meanwhile) instead of nacked.
 * Throws a RangeError outside 0..3,600,000 ms; a fraction is rounded up.
 */
export declare class RateLimited extends Error {
  constructor(retryAfterMs: number, message?: string);
  readonly name: 'RateLimited';
  /** Whole ms, 0..3,600,000. */
  retryAfterMs: number;
}

/**
 * What waitForResult rejects with for a job that will have no result: `dead` (every attempt
 * failed; `lastError` says why) or `cancelled`.
 */
export declare class JobFailed extends Error {
  constructor(job: JobView);
  readonly name: 'JobFailed';
  /** The job as getJob answered it. */
  job: JobView;
  jobId: string;
  state: 'dead' | 'cancelled';
  /** The error of its last failed attempt; null when there was none (cancelled). */
  lastError: string | null;
}

/** Whether trying again later may succeed (503, 5xx, 408, 429, or no answer at all). */
export declare function isRetryable(err: unknown): boolean;

export interface PushOptions {
  /** Ready after this many ms (0..7 days). */
  delayMs?: number;
  /** Higher first (a 32-bit integer, default 0). */
  priority?: number;
  /** A push with the key of a job not yet acked answers that job's id and enqueues nothing. */
  dedupeKey?: string;
  /** Deliveries before the job goes to the dead letters (1..1000, default 5). */
  maxAttempts?: number;
  /** A tenant, a customer, an API key: what per-group limits and round-robin turns are kept by. */
  group?: string;
  /** 1..100 ids of older jobs of this queue: the job waits (state waiting_deps) until every one is acked. */
  dependsOn?: string[];
  /** A dependency dead, cancelled or missing: fail this job at once (default), or stop waiting for that one. */
  onDependencyFailure?: 'fail' | 'ignore';
  /** An open batch of this queue to join (404 unknown_batch; 409 conflict when sealed). */
  batch?: string;
}

export interface BulkJob<T = unknown> extends PushOptions {
  payload: T;
}

export interface QueueStats {
  queue: string;
  /** Jobs waiting for their dependencies. */
  waiting_deps: number;
  ready: number;
  delayed: number;
  inflight: number;
  dead: number;
  pushed: number;
  acked: number;
  nacked: number;
  expired: number;
  cancelled: number;
  workers: number;
  paused: boolean;
}

export interface DeadJob<T = unknown> {
  id: string;
  payload: T;
  attempts: number;
  error: string;
  failed_at_ms: number;
  history: { attempt: number; error: string; at_ms: number }[];
}

/** Per lease, what an ack, nack, snooze or extend did. */
export interface LeaseResult {
  lease: string;
  ok: boolean;
  /** "lease_lost" (ran out, or delivered again since) or "invalid_lease". */
  code?: string;
}

/** A limit as sent: `periodMs` (or the server's `period_ms`) for the rate's period. */
export interface LimitInput {
  /** "group": each group held on its own (jobs without a group exempt); null: all jobs together. */
  key?: 'group' | null;
  /** At most `limit` jobs handed out per period, at most `burst` at once (default `limit`). */
  rate?: { limit: number; periodMs?: number; period_ms?: number; burst?: number };
  /** At most this many of the key's jobs in flight at once. */
  concurrency?: number;
}

/** A limit as the server answers it. */
export interface Limit {
  key: 'group' | null;
  rate?: { limit: number; period_ms: number; burst: number };
  concurrency?: number;
}

export interface QueueSettings {
  queue: string;
  fairness: 'fifo' | 'round_robin';
  limits: Limit[];
  /** How many finished (acked or cancelled) jobs getJob still finds, and for how long. */
  keep_acked: { count: number; age_ms: number };
}

/** keepAcked as sent: `ageMs` (or the server's `age_ms`). */
export interface KeepAckedInput {
  /** 0..1,000,000 (default 1000); 0 keeps none. */
  count?: number;
  /** 1..2,592,000,000 ms (30 days; default a day). */
  ageMs?: number;
  age_ms?: number;
}

export type JobState = 'waiting_deps' | 'delayed' | 'ready' | 'inflight' | 'acked' | 'dead' | 'cancelled';

/** A job as getJob answers it. */
export interface JobView<T = unknown, R = unknown> {
  id: string;
  state: JobState;
  /** As pushed. */
  payload: T;
  priority: number;
  group?: string;
  /** Deliveries so far. */
  attempts: number;
  max_attempts: number;
  /** delayed: when it becomes ready. */
  ready_at_ms?: number;
  /** The ids it depends on, as pushed (while waiting_deps). */
  depends_on?: string[];
  /** waiting_deps: how many of them are not acked yet. */
  waiting_on?: number;
  /** inflight: when its lease runs out. */
  lease_expires_ms?: number;
  /** acked, dead, cancelled: when. */
  finished_at_ms?: number;
  /** The error of its latest failed attempt. */
  last_error?: string;
  history: { attempt: number; error: string; at_ms: number }[];
  /** The last progress its worker reported. */
  progress?: unknown;
  /** What its handler resolved with (absent: none). */
  result?: R;
  /** The last 100 lines its workers appended, each at most 1 KiB. */
  log: { at_ms: number; line: string }[];
  /** Lines appended before those, no longer kept. */
  log_dropped: number;
}

/** What became of one dependency of a job, as getJobDependencies answers it. */
export interface JobDependency<R = unknown> {
  id: string;
  state: 'pending' | 'acked' | 'dead' | 'cancelled' | 'missing';
  /** What an acked one's handler resolved with (absent: none). */
  result?: R;
}

/** A job a batch pushes to its queue when it gets there (`max_attempts`, the server's spelling, is taken too). */
export interface BatchCallback<T = unknown> {
  payload: T;
  /** Higher first (default 0). */
  priority?: number;
  /** 1..1000 (default 5). */
  maxAttempts?: number;
  group?: string;
}

export interface BatchOptions<T = unknown> {
  /** The batch's name (default: a random one). */
  id?: string;
  /** Pushed when the sealed batch settles with none of its jobs dead or cancelled. */
  onSuccess?: BatchCallback<T>;
  /** Pushed when the sealed batch settles (no job of it pending), however its jobs ended. */
  onComplete?: BatchCallback<T>;
  /** Pushed when its first job dies. */
  onDead?: BatchCallback<T>;
}

/** A batch as the server answers it. */
export interface Batch {
  id: string;
  /** No job joins it any more. */
  sealed: boolean;
  /** Sealed, and none of its jobs pending: its callbacks were pushed. */
  settled: boolean;
  pending: number;
  acked: number;
  dead: number;
  cancelled: number;
  created_at_ms: number;
  settled_at_ms?: number;
  /** The ids of the callback jobs pushed so far. */
  callbacks_pushed: { on_success?: string; on_complete?: string; on_dead?: string };
}

/** What progress and log answer: false with a code when the lease is no longer current. */
export interface ReportOutcome {
  ok: boolean;
  code?: 'lease_lost' | 'invalid_lease';
}

/** A time as the server reads it: ms since the epoch, RFC 3339 text, or a Date. */
export type TimeInput = number | string | Date;

/** What putSchedule sends: exactly one of `cron` and `everyMs`, and each run's job. */
export interface ScheduleOptions<T = unknown> {
  /** 5 fields (minute first) or 6 (second first), or a macro (@hourly, @daily, ...), read in `tz`. */
  cron?: string;
  /** An IANA time zone for `cron` (default "UTC"). */
  tz?: string;
  /** An interval of real ms (>= 1000) from `startAt`, no time zone. */
  everyMs?: number;
  /** No run before it; an interval's anchor (default: when the schedule is created). */
  startAt?: TimeInput | null;
  /** No run at or after it. */
  endAt?: TimeInput | null;
  /** Runs in all; then the schedule is over. */
  maxRuns?: number | null;
  /** "skip": no run while the previous run's job is ready, delayed or in flight (default "allow"). */
  overlap?: 'allow' | 'skip';
  /** Runs later than misfireGraceMs: passed over, fired once for all, or all fired (default "skip"). */
  misfire?: 'skip' | 'run_once' | 'run_all';
  /** How late a run may fire and still be on time (0..86,400,000, default 60,000). */
  misfireGraceMs?: number;
  /** Runs one firing pushes at most, the latest (1..1000, default 1). */
  maxCatchup?: number;
  /** Each run's job waits 0..jitterMs (fixed per run) before it is ready (0..3,600,000, default 0). */
  jitterMs?: number;
  /** Each run's job: its payload, priority (default 0), group, maxAttempts (1..1000, default 5). */
  payload: T;
  priority?: number;
  group?: string;
  maxAttempts?: number;
}

/** A schedule as the server answers it (times as RFC 3339 text, and `_ms` beside each). */
export interface Schedule<T = unknown> {
  id: string;
  queue: string;
  cron?: string;
  tz?: string;
  every_ms?: number;
  start_at: string | null;
  start_at_ms: number | null;
  end_at: string | null;
  end_at_ms: number | null;
  max_runs: number | null;
  overlap: 'allow' | 'skip';
  misfire: 'skip' | 'run_once' | 'run_all';
  misfire_grace_ms: number;
  max_catchup: number;
  jitter_ms: number;
  job: { payload: T; priority: number; group?: string; max_attempts: number };
  paused: boolean;
  /** Runs pushed so far. */
  runs: number;
  created_at: string;
  created_at_ms: number;
  updated_at: string;
  updated_at_ms: number;
  /** The nominal time of the latest run pushed. */
  last_run_at: string | null;
  last_run_at_ms: number | null;
  /** The job the latest run pushed. */
  last_job_id: string | null;
  /** null: the schedule is over (endAt or maxRuns). */
  next_run_at: string | null;
  next_run_at_ms: number | null;
  /** Present while the next run is to come and the schedule is not paused. */
  next_run_in_ms?: number;
  /** The next (up to) 5 nominal times. */
  next_fire_times: string[];
}

export interface InflightJob {
  id: string;
  worker: string;
  attempt: number;
  lease_expires_ms: number;
}

/** The producer's and the operator's side of one queue. */
export declare class Queue<T = unknown> {
  constructor(name: string, options?: ClientOptions);
  readonly name: string;
  readonly client: Client;
  /** Pushes one job; resolves with its id (a decimal string). */
  push(payload: T, options?: PushOptions): Promise<string>;
  /** Pushes 1..1000 jobs, all or nothing; resolves with their ids in order. */
  pushBulk(jobs: BulkJob<T>[]): Promise<string[]>;
  stats(): Promise<QueueStats>;
  /** Admin: hand out nothing until resume(). */
  pause(): Promise<QueueStats>;
  /** Admin. */
  resume(): Promise<QueueStats>;
  /** Dead letters, oldest failure first (limit 1..10000, default 100). */
  dead(options?: { limit?: number }): Promise<DeadJob<T>[]>;
  /** Admin: dead letters back into the queue from attempt 1 (all without ids); the count. */
  redrive(ids?: string[]): Promise<number>;
  /** Admin: cancels a ready, delayed or dead job (404 unknown_job; 409 conflict in flight). */
  cancel(id: string): Promise<number>;
  /** One job wherever it is; AnteroomError 404 unknown_job when never pushed, or finished and no longer kept (keepAcked). */
  getJob<R = unknown>(id: string): Promise<JobView<T, R>>;
  /**
   * Polls getJob until the job is finished; resolves with its result (undefined: none). Rejects
   * with JobFailed (dead or cancelled), an Error named TimeoutError past timeoutMs (default
   * 30000), AnteroomError 404 unknown_job. pollIntervalMs defaults to 250.
   */
  waitForResult<R = unknown>(id: string, options?: { timeoutMs?: number; pollIntervalMs?: number }): Promise<R | undefined>;
  /** What became of each dependency of a job, in the order named ([] without dependsOn); AnteroomError 404 unknown_job. */
  getJobDependencies<R = unknown>(id: string): Promise<JobDependency<R>[]>;
  /** Opens a batch of this queue with its callbacks; AnteroomError 409 conflict when the id is taken, 429 limit_reached. A misspelt option throws a TypeError. */
  createBatch(options?: BatchOptions): Promise<Batch>;
  /** No job joins the batch after; it settles once none of its jobs is pending. Idempotent; AnteroomError 404 unknown_batch. */
  sealBatch(id: string): Promise<Batch>;
  /** The batch's counts and the callbacks pushed; AnteroomError 404 unknown_batch (or settled and no longer kept). */
  getBatch(id: string): Promise<Batch>;
  /** Acks leases (a Worker acks by itself); results, one per lease (null: none), each a JSON value of at most 64 KiB serialized (larger: 413, nothing acked). */
  ack(leases: string[], results?: unknown[]): Promise<LeaseResult[]>;
  /** The job of a current lease reports how far it got (any JSON value, at most 4 KiB serialized), replacing the last report. */
  progress(lease: string, value: unknown): Promise<ReportOutcome>;
  /** The job of a current lease appends lines to its log (String() of each; more than 100 go in several requests). */
  log(lease: string, ...lines: unknown[]): Promise<ReportOutcome>;
  /** Jobs in flight, of one worker when given. */
  inflight(options?: { worker?: string }): Promise<InflightJob[]>;
  /** Gives jobs back as rate limited upstream: each returns after retryAfterMs (0..3,600,000), no attempt used up, its group held meanwhile. */
  snooze(leases: string[], retryAfterMs: number): Promise<LeaseResult[]>;
  /** The settings in force ({fairness: "fifo", limits: [], keep_acked: {count: 1000, age_ms: 86400000}} when never set). */
  settings(): Promise<QueueSettings>;
  /** Admin: replaces every setting (what is left out goes back to its default); resolves with them as now in force. */
  setSettings(settings?: { fairness?: 'fifo' | 'round_robin'; limits?: LimitInput[]; keepAcked?: KeepAckedInput }): Promise<QueueSettings>;
}

/** A job as the handler gets it. */
export interface Job<T = unknown> {
  id: string;
  payload: T;
  /** 1 for the first delivery. */
  attempt: number;
  /** The lease of this delivery (what ack, nack and extend name). */
  lease: string;
  /** When the lease ends (ms since the epoch), moved on by each extension. */
  leaseExpiresMs: number;
  priority: number;
  /** The group it was pushed with; undefined without one. */
  group?: string;
  /** Aborts when the lease is lost or the worker closes past its grace: stop, the job is not yours. */
  signal: AbortSignal;
  /** Reports how far the job got (any JSON value, at most 4 KiB serialized); false when the lease is no longer current. */
  progress(value: unknown): Promise<boolean>;
  /** Appends lines to the job's log (String() of each, each kept to 1 KiB, the last 100 kept); false when the lease is no longer current. */
  log(...lines: unknown[]): Promise<boolean>;
}

export interface WorkerOptions {
  /** Handlers running at once (1..1000, default 1). */
  concurrency?: number;
  /** Lease per delivery in ms (100..43,200,000, default 30000), extended at a third of itself while the handler runs. */
  leaseMs?: number;
  /** Heartbeat period in ms (default 10000; ttl 3x; 0: no heartbeat). */
  heartbeatMs?: number;
  /** How long close() waits for running handlers before handing their jobs back (default 25000). */
  shutdownGraceMs?: number;
  /** Aborting it calls close(). */
  signal?: AbortSignal;
  /** SIGINT/SIGTERM call close(); a second signal ends the grace at once (default false). */
  handleSignals?: boolean;
  /** A stable worker name: a restart takes back its jobs at once (reclaim). Default: HOST-PID-random. */
  id?: string;
  /** Long-poll wait of each fetch in ms (0..60000, default 30000). */
  waitMs?: number;
  /** Start at once (default true); else call run(). */
  autorun?: boolean;
  /** Backoff after errors: full jitter over firstMs x 2^n, at most maxMs (default 100, 10000). */
  backoff?: { firstMs?: number; maxMs?: number };
}

/** What the handler resolves with is the job's result: a JSON value of at most 64 KiB serialized (undefined or null: none). */
export type Handler<T = unknown, R = unknown> = (job: Job<T>) => Promise<R> | R;

/** Runs a handler for each job of a queue, at most `concurrency` at once. */
export declare class Worker<T = unknown, R = unknown> extends EventEmitter {
  constructor(queue: Queue<T> | string, handler: Handler<T, R>, options?: WorkerOptions & Partial<ConnectionOptions> & { client?: Client; connection?: ConnectionOptions | Client });
  readonly id: string;
  readonly queue: Queue<T>;
  readonly concurrency: number;
  /** Handlers running now. */
  readonly active: number;
  /** Jobs handed back to this worker by its first fetch (reclaim). */
  readonly reclaimed: number;
  /** Starts the loop (the constructor does unless autorun is false). */
  run(): void;
  /** Stops fetching, waits up to shutdownGraceMs for running handlers, hands back the rest. Idempotent. */
  close(): Promise<void>;

  on(event: 'active', listener: (job: Job<T>) => void): this;
  on(event: 'completed', listener: (job: Job<T>, result: R) => void): this;
  on(event: 'failed', listener: (job: Job<T>, err: unknown) => void): this;
  on(event: 'snoozed', listener: (job: Job<T>, retryAfterMs: number) => void): this;
  on(event: 'stalled', listener: (job: Job<T>) => void): this;
  on(event: 'reclaimed', listener: (count: number) => void): this;
  on(event: 'drained' | 'closed', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'active', listener: (job: Job<T>) => void): this;
  once(event: 'completed', listener: (job: Job<T>, result: R) => void): this;
  once(event: 'failed', listener: (job: Job<T>, err: unknown) => void): this;
  once(event: 'snoozed', listener: (job: Job<T>, retryAfterMs: number) => void): this;
  once(event: 'stalled', listener: (job: Job<T>) => void): this;
  once(event: 'reclaimed', listener: (count: number) => void): this;
  once(event: 'drained' | 'closed', listener: () => void): this;
  once(event: 'error', listener: (err: Error) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** A session's status, as check answers it and the live channel sends it. */
export interface RoomStatus {
  type?: 'status';
  session: string | null;
  status: 'waiting' | 'active' | 'grace' | 'gone' | 'prequeue' | 'closed';
  position: number | null;
  waiting: number;
  active: number;
  capacity: number;
  eta_ms: number | null;
  token: string | null;
  [field: string]: unknown;
}

/** An async iterator of statuses; return() (or break) closes the connection at once. */
export interface RoomUpdates extends AsyncIterableIterator<RoomStatus> {
  return(): Promise<IteratorResult<RoomStatus, undefined>>;
}

/** A waiting room's session routes and live channel. */
export declare class Room {
  constructor(name: string, options?: ClientOptions);
  readonly name: string;
  /** Joins (first check) or checks in; without a session the server names one. */
  check(session?: string | null, options?: { pass?: string }): Promise<RoomStatus>;
  touch(session: string): Promise<RoomStatus>;
  leave(session: string, options?: { final?: boolean }): Promise<RoomStatus>;
  /** Live statuses: a WebSocket when Node has one ("auto"), else Server-Sent Events. */
  updates(session?: string | null, options?: { transport?: 'auto' | 'websocket' | 'sse' }): RoomUpdates;
}

export interface SseEvent {
  type: string;
  data: string;
  id: string;
}

/** A `text/event-stream` parser fed text in chunks of any size. */
export declare class SseParser {
  constructor();
  lastEventId: string;
  retryMs: number | null;
  push(text: string): SseEvent[];
}

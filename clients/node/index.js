// anteroom: the Node.js client of an anteroom server (waiting rooms and reliable queues).
// No dependencies: node:http with keep-alive agents, node:events, Node's WebSocket when present.
export { Client } from './src/client.js';
export { AnteroomError, JobFailed, RateLimited, isRetryable } from './src/errors.js';
export { Queue } from './src/queue.js';
export { Room } from './src/room.js';
export { SseParser } from './src/sse.js';
export { Worker } from './src/worker.js';

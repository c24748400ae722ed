// Client: one server and one key, shared by the queues, workers and rooms made from it, so
// they share one keep-alive agent (one pool of connections).
import { Transport } from './http.js';
import { Queue } from './queue.js';
import { Room } from './room.js';

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

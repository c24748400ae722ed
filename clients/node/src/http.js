// The transport: JSON over node:http(s) with a keep-alive agent.
//
// Why not the global fetch: a worker parks a long poll on one connection while it acks and
// extends on others, and close() must be able to hang up exactly that parked request (the
// server then takes it out of the line at once, handing it no job). node:http gives us the
// request object to destroy and an agent whose sockets are kept alive between requests, so a
// busy worker costs one TCP connection per request in flight, not one per request.
import http from 'node:http';
import https from 'node:https';
import { AnteroomError } from './errors.js';

const DEFAULT_TIMEOUT_MS = 30_000;

export class Transport {
  // url: the server's root ("http://127.0.0.1:8080", or with a path prefix behind a proxy).
  // key: sent as "Authorization: Bearer KEY" (the queue key or the admin key).
  // agent: an http(s).Agent to share; by default one of our own with keepAlive.
  constructor({ url, key = null, agent = null, keepAlive = true, timeoutMs = DEFAULT_TIMEOUT_MS } = {}) {
    if (!url) throw new TypeError('anteroom: the server url is required');
    const base = new URL(url);
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new TypeError(`anteroom: unsupported protocol ${base.protocol}`);
    }
    this.base = base;
    this.prefix = base.pathname.replace(/\/+$/, '');
    this.key = key;
    this.timeoutMs = timeoutMs;
    this.module = base.protocol === 'https:' ? https : http;
    this.ownAgent = !agent;
    this.agent = agent ?? new this.module.Agent({ keepAlive, keepAliveMsecs: 15_000 });
  }

  // The http(s) URL of a path, for the WebSocket client (ws: / wss:).
  url(path) {
    return new URL(this.prefix + path, this.base);
  }

  // Sends a request and resolves with {status, headers, json, text} whatever the status.
  // opts.signal aborts it (the socket is destroyed); opts.timeoutMs bounds the wait for the
  // answer (a long poll passes its wait plus a margin).
  async send(method, path, body, opts = {}) {
    const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
    try {
      return await this.sendOnce(method, path, payload, opts);
    } catch (err) {
      // A kept-alive connection the server closed while idle (its --idle-timeout-ms) fails the
      // next request sent on it before the server read a byte of it: send it once more on a
      // fresh connection (what Node's documentation advises, via req.reusedSocket).
      if (!err.staleSocket) throw err;
      return this.sendOnce(method, path, payload, opts);
    }
  }

  sendOnce(method, path, payload, { signal, timeoutMs = this.timeoutMs, headers = {} } = {}) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      const req = this.module.request(this.url(path), {
        method,
        agent: this.agent,
        headers: this.headers(payload, headers),
      });
      let settled = false;
      const finish = (fn, value) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        fn(value);
      };
      const onAbort = () => {
        req.destroy();
        finish(reject, abortError(signal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      req.setTimeout(timeoutMs, () => {
        const err = new Error(`anteroom: no answer to ${method} ${path} within ${timeoutMs} ms`);
        err.code = 'ETIMEDOUT';
        req.destroy(err);
      });
      req.on('error', (err) => {
        if (req.reusedSocket && !answered && err.code === 'ECONNRESET') err.staleSocket = true;
        finish(reject, err);
      });
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', (err) => finish(reject, err));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json = null;
          try { json = text ? JSON.parse(text) : null; } catch { /* not JSON: left null */ }
          finish(resolve, { status: res.statusCode, headers: res.headers, json, text });
        });
      });
      req.end(payload ?? undefined);
    });
  }

  // Sends a request and resolves with the parsed JSON answer; any status but 2xx rejects with
  // an AnteroomError carrying the server's code and message.
  async json(method, path, body, opts) {
    const res = await this.send(method, path, body, opts);
    if (res.status >= 200 && res.status < 300) return res.json;
    throw errorOf(res);
  }

  // Opens a streaming GET (Server-Sent Events) and resolves with {req, res} once the head of a
  // 2xx answer arrived; rejects with an AnteroomError otherwise. The caller destroys req.
  stream(path, headers = {}) {
    return new Promise((resolve, reject) => {
      const req = this.module.request(this.url(path), {
        method: 'GET',
        agent: this.agent,
        headers: this.headers(null, { accept: 'text/event-stream', ...headers }),
      });
      req.on('error', reject);
      req.on('response', (res) => {
        if (res.statusCode >= 200 && res.statusCode < 300) return resolve({ req, res });
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json = null;
          try { json = JSON.parse(text); } catch { /* not JSON */ }
          reject(errorOf({ status: res.statusCode, headers: res.headers, json, text }));
        });
      });
      req.end();
    });
  }

  headers(payload, extra) {
    const h = { ...extra };
    if (this.key) h.authorization = `Bearer ${this.key}`;
    if (payload) {
      h['content-type'] = 'application/json';
      h['content-length'] = payload.length;
    }
    return h;
  }

  // Closes the kept-alive sockets of an agent we made (a caller's agent stays theirs).
  close() {
    if (this.ownAgent) this.agent.destroy();
  }
}

export function errorOf({ status, headers, json, text }) {
  const e = json && typeof json === 'object' && json.error ? json.error : {};
  const retryAfter = Number(headers?.['retry-after']);
  return new AnteroomError(status, e.code || `http_${status}`, e.message || text || `HTTP ${status}`, {
    retryAfterMs: retryAfter > 0 ? retryAfter * 1000 : 0,
    body: json,
  });
}

function abortError(signal) {
  const err = new Error('anteroom: the request was aborted', { cause: signal?.reason });
  err.name = 'AbortError';
  err.code = 'ABORT_ERR';
  return err;
}

// A path segment: names are [A-Za-z0-9._:-] on the server, but a caller's typo must not turn
// into another route.
export const seg = (name) => encodeURIComponent(String(name));

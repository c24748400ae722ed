// Room: a waiting room's session routes (docs/api.md "Rooms") and its live channel.
//
// The session id is the session's only credential, so it never goes in a URL (proxy and CDN
// logs keep URLs): the body of check/touch/leave, the Anteroom-Session header on the SSE
// stream, and the `anteroom.session.B64` subprotocol on the WebSocket (whose API, in Node as in
// browsers, can send no header).
import { AnteroomError } from './errors.js';
import { Feed } from './feed.js';
import { clientOf } from './client.js';
import { seg } from './http.js';
import { SseParser } from './sse.js';

export class Room {
  constructor(name, options = {}) {
    this.name = String(name);
    this.client = clientOf(options);
    this.transport = this.client.transport;
    this.path = `/v1/rooms/${seg(this.name)}`;
  }

  // Joins the line (first check) or checks in; without a session the server names a new one
  // (the answer's `session`). {pass}: a pass code redeemed by this check.
  check(session, { pass } = {}) {
    const body = {};
    if (session !== undefined && session !== null) body.session = session;
    if (pass !== undefined) body.pass = pass;
    return this.transport.json('POST', `${this.path}/check`, body);
  }

  // Activity of an admitted session (resets its idle timer; a session in grace is active again).
  touch(session) {
    return this.transport.json('POST', `${this.path}/touch`, { session });
  }

  // Leaves: a waiting session at once; an admitted one keeps its slot for grace_ms, unless
  // final (then the next in line is admitted at once).
  leave(session, { final = false } = {}) {
    return this.transport.json('POST', `${this.path}/leave`, { session, final });
  }

  // The session's status objects as they change, from the live channel: an async iterator of
  // {type: "status", session, status, position, waiting, active, capacity, eta_ms, token, ...}.
  // Opening it is a check-in (an unknown session joins). It ends after a `gone` status (the
  // server closes the stream) or on return() / break, which closes the connection; a refused
  // or failed connection rejects the pending next() (an AnteroomError when the server answered).
  // transport: "auto" (a WebSocket when Node has one, else SSE), "websocket" or "sse".
  updates(session, { transport = 'auto' } = {}) {
    const feed = new Feed(null);
    const useWs = transport === 'websocket' || (transport === 'auto' && typeof globalThis.WebSocket === 'function');
    if (useWs) this.openWebSocket(feed, session, transport === 'auto');
    else this.openSse(feed, session);
    return feed;
  }

  openSse(feed, session) {
    const headers = session ? { 'anteroom-session': session } : {};
    let req = null;
    feed.hangUp = () => req?.destroy();
    this.transport.stream(`${this.path}/events`, headers).then(({ req: r, res }) => {
      req = r;
      if (feed.done) return req.destroy(); // returned while connecting
      res.setEncoding('utf8'); // decodes UTF-8 split across chunks
      const parser = new SseParser();
      res.on('data', (text) => {
        for (const event of parser.push(text)) deliver(feed, event.data);
      });
      res.on('end', () => feed.end(null));
      res.on('error', (err) => feed.end(err));
      req.on('error', (err) => feed.end(err));
    }, (err) => feed.end(err));
  }

  // A WebSocket refused before its first message says nothing of why (the API gives no status):
  // with `fallback`, SSE is tried then, and answers an AnteroomError when the server refuses.
  openWebSocket(feed, session, fallback) {
    if (typeof globalThis.WebSocket !== 'function') {
      return feed.end(new Error('anteroom: this Node has no global WebSocket (Node 22+, or 20 with --experimental-websocket)'));
    }
    const url = this.transport.url(`${this.path}/ws`);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const protocols = ['anteroom'];
    if (session) protocols.push(`anteroom.session.${Buffer.from(session).toString('base64url')}`);
    const ws = new globalThis.WebSocket(url.href, protocols);
    let heard = false;
    feed.hangUp = () => ws.close(1000);
    ws.onmessage = (m) => {
      heard = true;
      if (typeof m.data === 'string') deliver(feed, m.data);
    };
    ws.onclose = (e) => {
      if (feed.done) return;
      if (!heard && fallback) return this.openSse(feed, session);
      if (heard && e.code === 1000) return feed.end(null);
      feed.end(new Error(`anteroom: the WebSocket closed (${e.code}${e.reason ? `: ${e.reason}` : ''})`));
    };
    ws.onerror = () => { /* onclose follows and decides */ };
  }
}

function deliver(feed, data) {
  let message;
  try {
    message = JSON.parse(data);
  } catch {
    return feed.end(new AnteroomError(0, 'bad_message', `anteroom: not JSON on the live channel: ${data.slice(0, 200)}`));
  }
  if (message && message.type === 'status') feed.push(message);
  // Heartbeats only keep the connection alive: nothing to hand out.
}

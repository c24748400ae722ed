/*
 * anteroom.js: the browser client of an anteroom waiting room. Plain JavaScript, no
 * dependencies; load it as a classic script and use window.Anteroom:
 *
 *   <script src="https://anteroom.example/anteroom.js"></script>
 *
 * Anteroom.wait({room, server?, onUpdate?, pass?, onPassRefused?}) -> Promise<token>
 *   Joins the room's line (or resumes this tab's place in it) and resolves with the admission
 *   token (a JWT) once admitted. With `pass` (a code from POST /v1/rooms/ROOM/passes), the
 *   first check redeems it: an admit pass lets the holder in when a slot is free, else first
 *   in line; a front pass, first in line. A refused code (wrong, used up, expired, revoked:
 *   an Anteroom.ApiError with the server's message) goes to onPassRefused(err), and the wait
 *   goes on without it. onUpdate(status) gets every status object:
 *   {type:"status", session, status:"waiting"|"active"|"grace"|"gone"|"prequeue"|"closed",
 *    position, waiting, active, capacity, eta_ms, token, phase:"open"|"queue"|"prequeue"|
 *    "closed", queueing_method, refresh_after_ms, starts_in_ms, ends_in_ms, odds}
 *   (position is null in the random method, where odds is {chance_next, p25_ms, p50_ms,
 *   p75_ms}), plus two fields of this client's own: startsAt and endsAt, the times
 *   starts_in_ms and ends_in_ms point to by this browser's clock (ms since the epoch, taken
 *   when the status arrived), or null: what a countdown counts to between messages.
 *   Rejects with an Anteroom.ApiError when the API refuses (e.g. 404 unknown_room); a room that
 *   takes nobody new ("closed") is no refusal: wait() keeps asking, every refresh_after_ms.
 *   The connection stays open after admission, holding the slot, until the page goes away or
 *   stay()/wait()/leave() is called.
 *
 * Anteroom.stay({room, server?, onUpdate?, onLost?}) -> {close()}
 *   On the protected page: keeps this tab's slot alive through a live connection. The session
 *   is the one wait() stored; or, handed an `anteroom_token` query parameter or cookie (the
 *   waiting page was on another origin), the connection names the token instead
 *   (see "Credentials" below) and the server keeps alive the session that holds its admission,
 *   never telling the page which one (the session id is the session's credential; status
 *   objects then say session: null, and each fresh token replaces the one kept).
 *   When the status becomes anything but active or grace, calls onLost(status); by default
 *   it sends the person to SERVER/wait/ROOM. Closing the page starts the room's grace period
 *   on the server; nothing is sent on unload.
 *
 * Anteroom.leave({room?, final = true, server?}) -> Promise<status | null>
 *   Closes the live connection, forgets the stored session and token, and posts
 *   /v1/rooms/ROOM/leave {session, final}. room defaults to the room of the last wait/stay.
 *
 * Anteroom.decodeToken(token) -> claims object or null (decoded, NOT verified).
 *
 * server defaults to the origin this script was loaded from. Storage (sessionStorage, so per
 * tab and surviving reloads): anteroom:session:ROOM and anteroom:token:ROOM.
 *
 * Transport: a WebSocket (/v1/rooms/ROOM/ws); if it never works, Server-Sent Events
 * (/v1/rooms/ROOM/events, read with fetch); if those never work either, polling POST
 * /v1/rooms/ROOM/check, again after each answer's refresh_after_ms (at least 250 ms; before the
 * first answer, and from a server that does not say, every min(2000, checkin_timeout_ms / 3)
 * ms). A transport that has worked once is reconnected with exponential backoff and jitter
 * (250 ms doubling up to 10 s) instead of being abandoned; a 429 waits at least its
 * Retry-After. A "closed" status ends a live connection (the server keeps nothing of a join it
 * did not take), and the room is asked again after its refresh_after_ms.
 *
 * Challenge: when the room has one ({"type": "pow", "difficulty": N} in its room object),
 * wait() first gets a puzzle for its session (GET /v1/rooms/ROOM/challenge) and
 * solves it with Web Crypto's SHA-256 (batches of hashes, yielding to the page every 50 ms,
 * giving up after 64 x 2^N tries), then joins with `challenge` and `solution` (query
 * parameters of the live channel, body fields of a check). The proof is reused on reconnects
 * until shortly before it expires.
 *
 * Credentials: the session id and the token are bearer secrets, so they never go in a URL
 * (where proxy and CDN access logs would keep them): a header (Anteroom-Session,
 * Anteroom-Token) on the challenge and the event stream, a WebSocket subprotocol
 * (anteroom.session.B64 / anteroom.token.B64 beside "anteroom", B64 the value in base64url)
 * on the WebSocket, and the body of a check.
 */
(() => {
  'use strict';

  const BACKOFF_FIRST_MS = 250;
  const BACKOFF_MAX_MS = 10000;
  const FIRST_MESSAGE_MS = 10000;  // a live connection silent this long after opening failed
  const SILENCE_MS = 45000;        // three missed heartbeats: the connection is dead
  const POLL_MAX_MS = 2000;
  const POLL_MIN_MS = 250;
  const TRANSPORTS = ['ws', 'sse', 'poll'];
  const SOLVE_BATCH = 64;          // hashes in flight at once
  const SOLVE_SLICE_MS = 50;       // longest run without yielding to the page
  const PROOF_MARGIN_MS = 30000;   // a proof this close to its expiry is solved anew

  // Where anteroom is: the origin the script came from, and the path it is served under (a
  // proxy may serve anteroom under a prefix of the site, e.g. /anteroom/anteroom.js).
  const trimBase = (url) => url.origin + url.pathname.replace(/\/[^/]*$/, '');
  const scriptOrigin = (() => {
    try {
      const src = document.currentScript && document.currentScript.src;
      if (src) return trimBase(new URL(src, location.href));
    } catch (_) { /* fall through */ }
    return location.origin;
  })();

  class ApiError extends Error {
    constructor(status, code, message, retryAfterMs = 0) {
      super(message || code);
      this.name = 'ApiError';
      this.status = status;  // HTTP status
      this.code = code;      // the API's error code, e.g. "unknown_room"
      this.retryAfterMs = retryAfterMs;  // from Retry-After (429), 0 when not said
    }
  }

  // sessionStorage may be missing or refuse writes (private modes): the client still works,
  // only a reload then starts over.
  const storage = {
    get(key) { try { return sessionStorage.getItem(key); } catch (_) { return null; } },
    set(key, value) { try { sessionStorage.setItem(key, value); } catch (_) { /* ignored */ } },
    remove(key) { try { sessionStorage.removeItem(key); } catch (_) { /* ignored */ } },
  };
  const sessionKey = (room) => `anteroom:session:${room}`;
  // The client names a new session itself (128 random bits, as unguessable as the server's) and
  // stores the name before connecting: a connection lost before its first message, or a
  // fallback to the next transport, then goes on with the same place in line instead of
  // leaving behind a session nobody knows. Without Web Crypto the server names it.
  function newSessionId() {
    const c = globalThis.crypto;
    if (!c || typeof c.getRandomValues !== 'function') return null;
    const bytes = c.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }
  const tokenKey = (room) => `anteroom:token:${room}`;

  // `server`: an origin or a URL of anteroom's root ("https://shop.example/anteroom").
  const baseUrl = (server) => {
    if (!server) return scriptOrigin;
    const url = new URL(server, location.href);
    return url.origin + url.pathname.replace(/\/+$/, '');
  };
  const roomPath = (room) => `/v1/rooms/${encodeURIComponent(room)}`;

  async function api(base, method, path, body, headers = {}) {
    const init = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const response = await fetch(base + path, init);
    let data = null;
    try { data = await response.json(); } catch (_) { /* not JSON */ }
    if (!response.ok) {
      const error = (data && data.error) || {};
      const retryAfter = Number(response.headers && response.headers.get('Retry-After'));
      throw new ApiError(response.status, error.code || `http_${response.status}`,
        error.message || response.statusText, retryAfter > 0 ? retryAfter * 1000 : 0);
    }
    return data;
  }

  // The credential a live connection or a challenge carries, as a header and as a WebSocket
  // subprotocol (a browser's WebSocket can send no header).
  const base64Url = (text) => btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  function credential(session, token) {
    if (session) {
      return { headers: { 'Anteroom-Session': session },
        protocols: ['anteroom', `anteroom.session.${base64Url(session)}`] };
    }
    if (token) {
      return { headers: { 'Anteroom-Token': token },
        protocols: ['anteroom', `anteroom.token.${base64Url(token)}`] };
    }
    return { headers: {}, protocols: [] };
  }

  const streamsWithFetch = () => typeof fetch === 'function' &&
    typeof ReadableStream !== 'undefined' && typeof AbortController !== 'undefined' &&
    typeof TextDecoder !== 'undefined';

  // Server-Sent Events read with fetch, since EventSource can send no header and the credential
  // must stay out of the URL. Looks like an EventSource to open(): onmessage({data}) per event,
  // onerror() once when the stream is refused, fails or ends; never retries by itself.
  class FetchedEventStream {
    constructor(url, headers) {
      this.abort = new AbortController();
      this.run(url, headers).catch(() => this.fail());
    }

    async run(url, headers) {
      const response = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers },
        cache: 'no-store', signal: this.abort.signal });
      const type = (response.headers && response.headers.get('Content-Type')) || '';
      if (!response.ok || !response.body || !type.startsWith('text/event-stream')) {
        try { await response.body?.cancel(); } catch (_) { /* gone already */ }
        return this.fail();
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffered = '';
      let afterCr = false;  // the last text ended in CR
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return this.fail();
        let text = decoder.decode(value, { stream: true });
        // A CRLF split across two chunks is one line end, not two.
        if (afterCr && text) {
          if (text[0] === '\n') text = text.slice(1);
          afterCr = false;
        }
        if (text) afterCr = text.endsWith('\r');
        buffered += text.replace(/\r\n?/g, '\n');
        for (let end; (end = buffered.indexOf('\n\n')) >= 0;) {
          const data = buffered.slice(0, end).split('\n').filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
          buffered = buffered.slice(end + 2);
          if (data && !this.closed) this.onmessage?.({ data });
        }
      }
    }

    fail() {
      if (this.closed) return;
      this.closed = true;
      this.onerror?.({});
    }

    close() {
      this.closed = true;
      this.abort.abort();
    }
  }

  function leadingZeroBits(bytes) {
    let bits = 0;
    for (const byte of bytes) {
      if (byte === 0) { bits += 8; continue; }
      return bits + Math.clz32(byte) - 24;
    }
    return bits;
  }

  // A solution of a proof-of-work puzzle: the first decimal string s such that
  // SHA-256(nonce || s) starts with `difficulty` zero bits, or null when `stopped()` says so or
  // after 64 x 2^difficulty tries (a miss that unlikely means something is wrong).
  async function solvePuzzle(nonce, difficulty, stopped) {
    const subtle = globalThis.crypto && globalThis.crypto.subtle;
    if (!subtle || typeof subtle.digest !== 'function') return null;
    const prefix = Array.from(nonce, (c) => c.charCodeAt(0));
    const limit = 64 * 2 ** Math.min(difficulty, 32);
    let sliceEnd = Date.now() + SOLVE_SLICE_MS;
    for (let start = 0; start < limit; start += SOLVE_BATCH) {
      const tries = [];
      for (let i = start; i < start + SOLVE_BATCH; i++) {
        const text = String(i);
        const bytes = new Uint8Array(prefix.length + text.length);
        bytes.set(prefix);
        for (let k = 0; k < text.length; k++) bytes[prefix.length + k] = text.charCodeAt(k);
        tries.push(subtle.digest('SHA-256', bytes).then((d) => [text, new Uint8Array(d)]));
      }
      for (const [text, digest] of await Promise.all(tries)) {
        if (leadingZeroBits(digest) >= difficulty) return text;
      }
      if (Date.now() >= sliceEnd) {
        await new Promise((resolve) => setTimeout(resolve, 0));  // let the page breathe
        if (stopped()) return null;
        sliceEnd = Date.now() + SOLVE_SLICE_MS;
      }
    }
    return null;
  }

  // A refusal that retrying cannot fix (bad name, unknown room), as opposed to a network error,
  // a 5xx or overload.
  const isFatal = (err) => err instanceof ApiError && err.status >= 400 && err.status < 500 &&
    err.status !== 408 && err.status !== 429 && err.code !== 'challenge_required';

  function backoffMs(attempt) {
    const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** Math.min(attempt, 16));
    return ceiling / 2 + Math.random() * ceiling / 2;
  }

  function decodeToken(token) {
    try {
      const part = String(token).split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      // base64 -> bytes -> %XX escapes -> UTF-8 text
      const escaped = Array.from(atob(part), (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
      return JSON.parse(decodeURIComponent(escaped.join('')));
    } catch (_) {
      return null;
    }
  }

  // The token handed to this page by the waiting page: ?anteroom_token=... or the cookie.
  function handedToken() {
    try {
      const query = new URLSearchParams(location.search).get('anteroom_token');
      if (query) return query;
      const cookie = document.cookie.split(/;\s*/).find((c) => c.startsWith('anteroom_token='));
      return cookie ? decodeURIComponent(cookie.slice('anteroom_token='.length)) : null;
    } catch (_) {
      return null;
    }
  }

  // One session's live status: connects, falls back, reconnects, and hands every status
  // object to onStatus until close(). onFatal(err) once when the API refuses for good.
  class Live {
    // solve: whether this connection may solve the room's challenge to join (wait() does;
    // stay() keeps a place and never joins anew).
    // token: instead of a session, the admission token whose holder to keep alive (stay()).
    // pass: a code to redeem with the first check (wait()); onPassRefused(err) if refused.
    constructor({ room, base, session, token = null, onStatus, onFatal, solve = false,
      pass = null, onPassRefused = null }) {
      Object.assign(this, { room, base, session, token, onStatus, onFatal, solve, pass,
        onPassRefused });
      this.passTries = 0;   // failed attempts to redeem the pass (network, overload)
      this.challenge = null;  // the room's {type, difficulty}, when it has one
      this.proof = null;      // {challenge, solution, expiresMs, difficulty} for this session
      this.proofTries = 0;    // refusals of our proof since the last status
      this.level = 0;       // index into TRANSPORTS
      this.worked = {};     // transport -> it delivered a message once
      this.attempt = 0;     // failures since the last message, for the backoff
      this.conn = null;     // {close()} of the current transport
      this.closed = false;
      this.pollMs = 0;
      this.retryTimer = 0;
      this.watchdog = 0;
    }

    async start() {
      // Asking for the room first turns an unknown room into an answer rather than endless
      // reconnects (a refused upgrade does not say why), and gives the polling interval.
      try {
        this.learnRoom(await api(this.base, 'GET', roomPath(this.room)));
      } catch (err) {
        if (isFatal(err)) return this.fail(err);
      }
      this.connect();
    }

    close() {
      this.closed = true;
      clearTimeout(this.retryTimer);
      this.teardown();
    }

    learnRoom(info) {
      const timeout = info && Number(info.checkin_timeout_ms);
      if (timeout >= 0) this.pollMs = Math.max(POLL_MIN_MS, Math.min(POLL_MAX_MS, timeout / 3));
      if (info && 'challenge' in info) this.challenge = info.challenge || null;
    }

    // Whether joining takes a proof this connection does not hold (or holds too close to its
    // expiry, or for a lower difficulty than the room's now).
    needsProof() {
      const c = this.challenge;
      if (!this.solve || !c || c.type !== 'pow') return false;
      const p = this.proof;
      return !(p && p.difficulty >= c.difficulty && p.expiresMs - PROOF_MARGIN_MS > Date.now());
    }

    // Gets a puzzle for this session and solves it. Rejects with an ApiError when it cannot.
    async prove() {
      this.proof = null;
      const asked = Date.now();
      const puzzle = await api(this.base, 'GET', `${roomPath(this.room)}/challenge`, undefined,
        credential(this.session, null).headers);
      if (!puzzle || puzzle.type !== 'pow') return;  // turned off meanwhile
      if (puzzle.session) this.session = puzzle.session;
      const solution = await solvePuzzle(puzzle.nonce, puzzle.difficulty, () => this.closed);
      if (solution === null) {
        if (this.closed) return;
        throw new ApiError(403, 'challenge_required',
          'this browser could not solve the room\'s challenge (no Web Crypto?)');
      }
      // Expiry by this clock (expires_in_ms), not the server's: the two may disagree.
      this.proof = { challenge: puzzle.nonce, solution, difficulty: puzzle.difficulty,
        expiresMs: asked + Number(puzzle.expires_in_ms) };
    }

    get transport() { return TRANSPORTS[this.level]; }

    // Solves the room's challenge first when needed, then connects (redeeming a pass first).
    connect() {
      if (this.closed) return;
      if (this.needsProof()) {
        this.prove().then(() => this.begin(), (err) => {
          if (this.closed) return;
          if (isFatal(err) || (err instanceof ApiError && err.code === 'challenge_required')) {
            return this.fail(err);
          }
          this.retryTimer = setTimeout(() => this.connect(),
            Math.max(backoffMs(this.attempt++), err.retryAfterMs || 0));
        });
        return;
      }
      this.begin();
    }

    begin() {
      if (this.pass) return this.redeem();
      this.open();
    }

    // A pass is a bearer secret: it goes in the body of one check, never in a URL. Then the
    // live connection follows the place it gave. A refusal is final (onPassRefused, and the
    // wait goes on without the pass); a network error or overload is retried twice.
    async redeem() {
      const body = { pass: this.pass };
      if (this.session) body.session = this.session;
      if (this.proof) {
        Object.assign(body, { challenge: this.proof.challenge, solution: this.proof.solution });
      }
      try {
        const status = await api(this.base, 'POST', `${roomPath(this.room)}/check`, body);
        if (this.closed) return;
        this.pass = null;
        this.report({ type: 'status', ...status });
      } catch (err) {
        if (this.closed) return;
        if (!isFatal(err) && this.passTries++ < 2) {
          const wait = Math.max(backoffMs(this.passTries), (err && err.retryAfterMs) || 0);
          this.retryTimer = setTimeout(() => this.connect(), wait);
          return;
        }
        this.pass = null;
        callSafely(this.onPassRefused, err);
      }
      if (!this.closed) this.open();
    }

    open() {
      if (this.closed) return;
      this.received = false;
      const kind = this.transport;
      if (kind === 'ws' && typeof WebSocket === 'undefined') return this.fallBack();
      if (kind === 'sse' && !streamsWithFetch()) return this.fallBack();
      if (kind === 'poll') return this.poll();
      const url = new URL(this.base + roomPath(this.room) + (kind === 'ws' ? '/ws' : '/events'));
      if (kind === 'ws') url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      // A proof is no secret: it only works for the session it was solved for.
      if (this.proof) {
        url.searchParams.set('challenge', this.proof.challenge);
        url.searchParams.set('solution', this.proof.solution);
      }
      const { headers, protocols } = credential(this.session, this.token);
      let source;
      try {
        source = kind === 'ws' ? new WebSocket(url.href, protocols)
          : new FetchedEventStream(url.href, headers);
      } catch (_) {
        return this.fallBack();
      }
      const conn = { close: () => source.close() };
      this.conn = conn;
      source.onmessage = (event) => { if (this.conn === conn) this.receive(event.data); };
      // WebSocket: error then close; EventSource: error only (we never let it retry itself).
      source.onerror = source.onclose = () => { if (this.conn === conn) this.dropped(); };
      this.arm(FIRST_MESSAGE_MS);
    }

    // The wait before asking again after `status`: the server's refresh_after_ms, which paces
    // polling clients (sooner before a start and during a draw, 30 s when closed, 0 when gone:
    // join again now), at least POLL_MIN_MS; the interval from the room's check-in timeout when
    // the server does not say.
    refreshMs(status) {
      const hint = status ? status.refresh_after_ms : undefined;
      if (typeof hint === 'number' && hint >= 0) return Math.max(POLL_MIN_MS, hint);
      return this.pollMs || POLL_MAX_MS;
    }

    // Polling: the last resort, and what works through any proxy.
    poll() {
      const conn = { stopped: false, timer: 0 };
      conn.close = () => { conn.stopped = true; clearTimeout(conn.timer); };
      this.conn = conn;
      const tick = async () => {
        try {
          if (!this.pollMs) this.learnRoom(await api(this.base, 'GET', roomPath(this.room)));
          const body = this.session ? { session: this.session }
            : this.token ? { token: this.token } : {};
          if (this.proof) {
            Object.assign(body, { challenge: this.proof.challenge, solution: this.proof.solution });
          }
          const status = await api(this.base, 'POST', `${roomPath(this.room)}/check`, body);
          if (conn.stopped) return;
          this.deliver({ type: 'status', ...status });
          if (conn.stopped) return;
          if (this.pollFailed && !this.retriedLive) return this.retryLive();
          conn.timer = setTimeout(tick, this.refreshMs(status));
        } catch (err) {
          if (conn.stopped) return;
          if (isFatal(err)) return this.fail(err);
          if (err instanceof ApiError && err.code === 'challenge_required') {
            // Our proof no longer does (expired, or the difficulty went up): solve anew, twice
            // at most before giving up.
            if (!this.solve || this.proofTries++ >= 2) return this.fail(err);
            this.proof = null;
            this.learnRoom(await api(this.base, 'GET', roomPath(this.room)).catch(() => null));
          } else {
            this.pollFailed = true;
          }
          this.retryAfterMs = (err instanceof ApiError && err.retryAfterMs) || 0;
          this.dropped();
        }
      };
      tick();
    }

    // Polling began while the server could not be reached at all, so the live transports may
    // have failed for that reason alone: give them one more chance now that it answers.
    retryLive() {
      this.retriedLive = true;
      this.teardown();
      this.level = 0;
      this.connect();
    }

    receive(text) {
      let message;
      try { message = JSON.parse(text); } catch (_) { return; }
      if (!message || typeof message !== 'object') return;
      if (message.type === 'heartbeat') {
        this.arm(SILENCE_MS);
        return;
      }
      if (message.type === undefined || message.type === 'status') this.deliver(message);
    }

    deliver(status) {
      this.received = true;
      this.worked[this.transport] = true;
      this.attempt = 0;
      this.proofTries = 0;
      if (status.session) this.session = status.session;
      if (status.token && !this.session) this.token = status.token;  // the freshest, for reconnects
      if (this.transport !== 'poll') this.arm(SILENCE_MS);
      this.report(status);
      // A join the room did not take keeps nothing on the server, so a live connection has
      // nothing to follow: it is closed, and the room asked again when the server says.
      if (status.status === 'closed' && this.transport !== 'poll' && !this.closed) {
        this.teardown();
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(() => this.reconnect(), this.refreshMs(status));
      }
    }

    // Hands a status to the page, with this browser's times for its countdowns.
    report(status) {
      if (status.session) this.session = status.session;
      // Countdowns by this clock: the live channel sends no message as a countdown runs down.
      const now = Date.now();
      const at = (ms) => (typeof ms === 'number' && ms >= 0 ? now + ms : null);
      status.startsAt = at(status.starts_in_ms);
      status.endsAt = at(status.ends_in_ms);
      this.onStatus(status);
    }

    // The current connection ended or never worked.
    dropped() {
      const kind = this.transport;
      this.teardown();
      if (this.closed) return;
      if (!this.received && !this.worked[kind] && kind !== 'poll') return this.fallBack();
      const wait = Math.max(backoffMs(this.attempt++), this.retryAfterMs || 0);
      this.retryAfterMs = 0;
      this.retryTimer = setTimeout(() => this.reconnect(), wait);
    }

    async reconnect() {
      if (this.closed) return;
      // A live transport that fails to reopen may face a room deleted meanwhile.
      if (this.transport !== 'poll' && !this.received) {
        try {
          await api(this.base, 'GET', roomPath(this.room));
        } catch (err) {
          if (isFatal(err)) return this.fail(err);
        }
      }
      this.connect();
    }

    fallBack() {
      this.teardown();
      this.level = Math.min(this.level + 1, TRANSPORTS.length - 1);
      this.connect();
    }

    fail(err) {
      if (this.closed) return;
      this.close();
      this.onFatal(err);
    }

    arm(ms) {
      clearTimeout(this.watchdog);
      this.watchdog = setTimeout(() => this.dropped(), ms);
    }

    teardown() {
      clearTimeout(this.watchdog);
      const conn = this.conn;
      this.conn = null;
      if (conn) {
        try { conn.close(); } catch (_) { /* already closed */ }
      }
    }
  }

  let current = null;  // {room, base, live}: the one live connection of this page

  function replaceCurrent(room, base, live) {
    if (current) current.live.close();
    current = { room, base, live };
  }

  function checkRoom(room) {
    if (typeof room !== 'string' || room === '') throw new TypeError('Anteroom: room is required');
  }

  function callSafely(callback, value) {
    if (typeof callback !== 'function') return;
    try { callback(value); } catch (err) { setTimeout(() => { throw err; }); }
  }

  function wait({ room, server, onUpdate, pass, onPassRefused } = {}) {
    checkRoom(room);
    const base = baseUrl(server);
    let session = storage.get(sessionKey(room));
    if (!session) {
      session = newSessionId();
      if (session) storage.set(sessionKey(room), session);
    }
    return new Promise((resolve, reject) => {
      let settled = false;
      const live = new Live({
        room,
        base,
        session,
        solve: true,
        pass: typeof pass === 'string' && pass !== '' ? pass : null,
        onPassRefused,
        onStatus: (status) => {
          if (status.session) storage.set(sessionKey(room), status.session);
          if (status.token) storage.set(tokenKey(room), status.token);
          callSafely(onUpdate, status);
          if (!settled && status.status === 'active' && status.token) {
            settled = true;
            resolve(status.token);
          }
        },
        onFatal: (err) => {
          if (!settled) {
            settled = true;
            reject(err);
          }
        },
      });
      replaceCurrent(room, base, live);
      live.start();
    });
  }

  function stay({ room, server, onUpdate, onLost } = {}) {
    checkRoom(room);
    const base = baseUrl(server);
    let live = null;
    let closed = false;
    const lost = (status) => {
      if (live) live.close();
      if (typeof onLost === 'function') return callSafely(onLost, status);
      location.href = `${base}/wait/${encodeURIComponent(room)}`;
    };
    const begin = (session, token) => {
      if (closed) return;
      live = new Live({
        room,
        base,
        session,
        token,
        onStatus: (status) => {
          if (status.session) storage.set(sessionKey(room), status.session);
          if (status.token) storage.set(tokenKey(room), status.token);
          callSafely(onUpdate, status);
          if (status.status !== 'active' && status.status !== 'grace') lost(status);
        },
        onFatal: (err) => lost({ type: 'status', session, status: 'gone', error: err }),
      });
      replaceCurrent(room, base, live);
      if (session || token) {
        live.start();
      } else {
        setTimeout(() => lost({ type: 'status', session: null, status: 'gone' }));
      }
    };
    const session = storage.get(sessionKey(room));
    // A token handed over from the waiting page's origin, else the last one this tab kept (an
    // expired token of a held admission still does): the server keeps its holder alive
    // without naming it.
    let handed = null;
    if (!session) {
      for (const candidate of [handedToken(), storage.get(tokenKey(room))]) {
        const claims = candidate ? decodeToken(candidate) : null;
        if (claims && claims.room === room) {
          handed = candidate;
          break;
        }
      }
    }
    begin(session, handed);
    return {
      close: () => {
        closed = true;
        if (live) live.close();
      },
    };
  }

  async function leave({ room, final = true, server } = {}) {
    room = room || (current && current.room);
    checkRoom(room);
    let base = server ? baseUrl(server) : scriptOrigin;
    if (current && current.room === room) {
      if (!server) base = current.base;
      current.live.close();
      current = null;
    }
    const session = storage.get(sessionKey(room));
    storage.remove(sessionKey(room));
    storage.remove(tokenKey(room));
    if (!session) return null;
    try {
      return await api(base, 'POST', `${roomPath(room)}/leave`, { session, final: !!final });
    } catch (err) {
      if (err instanceof ApiError && err.code === 'unknown_session') return null;
      throw err;
    }
  }

  window.Anteroom = Object.freeze({ wait, stay, leave, decodeToken, ApiError });
})();

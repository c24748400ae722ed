// A parser of `text/event-stream` (the WHATWG HTML "Server-sent events" interpretation rules),
// fed text as it arrives in chunks of any size:
//   - lines end in CRLF, LF or CR (a CRLF split across two chunks is one line end);
//   - `data:` lines append to the event's data, joined with "\n"; one space after the colon
//     is dropped;
//   - `event:`, `id:` and `retry:` set those fields; a line starting with ":" is a comment (the
//     server's keepalive); other fields are ignored;
//   - a blank line dispatches the event, unless it holds no data.
export class SseParser {
  constructor() {
    this.buffer = '';
    this.afterCr = false; // the last chunk ended in CR: a LF starting the next is the same end
    this.reset();
    this.lastEventId = '';
    this.retryMs = null;
  }

  reset() {
    this.data = [];
    this.type = '';
  }

  // Feeds a chunk of text; returns the events it completed: [{type, data, id}].
  push(text) {
    if (this.afterCr && text.startsWith('\n')) text = text.slice(1);
    this.afterCr = text.endsWith('\r');
    this.buffer += text;
    const events = [];
    let start = 0;
    for (;;) {
      const cr = this.buffer.indexOf('\r', start);
      const lf = this.buffer.indexOf('\n', start);
      if (cr < 0 && lf < 0) break;
      const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
      const line = this.buffer.slice(start, end);
      start = end + (this.buffer[end] === '\r' && this.buffer[end + 1] === '\n' ? 2 : 1);
      const event = this.line(line);
      if (event) events.push(event);
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  line(line) {
    if (line === '') {
      const event = this.data.length
        ? { type: this.type || 'message', data: this.data.join('\n'), id: this.lastEventId }
        : null;
      this.reset();
      return event;
    }
    if (line.startsWith(':')) return null; // a comment: keepalive
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.type = value;
    else if (field === 'id' && !value.includes('\0')) this.lastEventId = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retryMs = Number(value);
    return null;
  }
}

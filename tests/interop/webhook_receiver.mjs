// The receiving end of tests/integration/webhook_interop_test.cc: a Node HTTP server on
// 127.0.0.1 (port 0) that checks every delivery with the Standard Webhooks reference library
// (npm `standardwebhooks`, `new Webhook(secret).verify(body, headers)`), answers 204 when it
// verifies and 400 with the library's message when not, and prints one JSON line per delivery
// on stdout ({verified, id, payload | error}). The first line is "PORT <n>". Exits 0 after
// COUNT deliveries; a watchdog ends it if the test never sends them.
//
//   node webhook_receiver.mjs <whsec_...> <COUNT> [PORT]
import http from 'node:http';
import { Webhook } from 'standardwebhooks';

const [secret, countText, portText] = process.argv.slice(2);
const webhook = new Webhook(secret);
let left = Number(countText);

setTimeout(() => {
  process.stderr.write('webhook_receiver: watchdog: deliveries never came\n');
  process.exit(3);
}, 120_000).unref();

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const id = req.headers['webhook-id'];
    let verdict;
    try {
      const payload = webhook.verify(body, req.headers);
      verdict = { verified: true, id, payload, method: req.method, url: req.url };
      res.writeHead(204).end();
    } catch (e) {
      verdict = { verified: false, id, error: String(e.message) };
      res.writeHead(400, { 'content-type': 'text/plain' }).end(String(e.message));
    }
    process.stdout.write(JSON.stringify(verdict) + '\n');
    if (--left === 0) server.close(() => process.exit(0));
  });
});
server.listen(Number(portText || 0), '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});

// A webhook receiver for scripts/bench-webhooks.sh: answers 204 to every POST on 127.0.0.1 (port
// 0), counts them and the connections they came on, prints "PORT <n>" first and "RECEIVED <n>"
// and "CONNECTIONS <n>" on SIGTERM.
import http from 'node:http';

let received = 0;
let connections = 0;
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    received += 1;
    res.writeHead(204).end();
  });
});
server.keepAliveTimeout = 5_000;
server.on('connection', () => {
  connections += 1;
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`PORT ${server.address().port}\n`));
process.on('SIGTERM', () => {
  process.stdout.write(`RECEIVED ${received}\nCONNECTIONS ${connections}\n`);
  process.exit(0);
});

// A webhook receiver that answers 200 to everything and counts deliveries (GET /stats).
// Run as `node webhook-receiver.mjs PORT`.
import http from 'node:http';

let received = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ received }));
    return;
  }
  req.resume();
  req.on('end', () => {
    received += 1;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 }).end('ok');
  });
});
server.keepAliveTimeout = 120_000;
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`ready ${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));

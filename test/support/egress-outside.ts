// The "outside world" of test/host/egress.test.ts, run in a network namespace of its
// own: a DNS server for the test's zone, HTTP and HTTPS servers (certificates from the
// test's CA) for the names in it, a DNS-over-HTTPS stand-in and a UDP listener. Every
// query, request and datagram it gets is printed as one JSON line, so that the test can
// say what reached the outside and what never did.
//
// Arguments: one JSON object: { zone: {name: address}, web: [{address, name, cert, key}],
// udp: {address, port}, dns: address, tcpPort: number }.
import { createSocket } from 'node:dgram';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer } from 'node:net';
import * as dnsPacket from 'dns-packet';

interface Outside {
  zone: Record<string, string>;
  web: { address: string; name: string; cert: string; key: string }[];
  udp: { address: string; port: number };
  dns: string;
  tcpPort: number;
}

const outside = JSON.parse(process.argv[2] ?? '{}') as Outside;
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

function answerFor(name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const [zoneName, address] of Object.entries(outside.zone)) {
    if (lower === zoneName || lower.endsWith(`.${zoneName}`)) return address;
  }
  return undefined;
}

const dns = createSocket('udp4');
dns.on('message', (message, remote) => {
  const query = dnsPacket.decode(message);
  const question = query.questions?.[0];
  say({ event: 'dns', name: question?.name, type: question?.type, from: remote.address });
  const address = question && question.type === 'A' ? answerFor(question.name) : undefined;
  const known = question ? answerFor(question.name) !== undefined : false;
  dns.send(
    dnsPacket.encode({
      type: 'response',
      id: query.id ?? 0,
      flags: dnsPacket.RECURSION_AVAILABLE | (known ? 0 : 3),
      questions: query.questions ?? [],
      answers: address && question ? [{ type: 'A', name: question.name, ttl: 60, data: address }] : [],
    }),
    remote.port,
    remote.address,
  );
});

const udp = createSocket('udp4');
udp.on('message', (message, remote) => say({ event: 'udp', data: message.toString(), from: remote.address }));

let listening = 0;
const ready = () => {
  listening -= 1;
  if (listening === 0) say({ event: 'listening' });
};

const handler = (server: string, scheme: string) => (req: IncomingMessage, res: ServerResponse) => {
  say({ event: 'request', server, scheme, host: req.headers.host, url: req.url, from: req.socket.remoteAddress });
  res.end(`${server} ${scheme} host=${req.headers.host ?? ''}\n`);
};

for (const web of outside.web) {
  listening += 3;
  createHttpServer(handler(web.name, 'http')).listen(80, web.address, ready);
  createHttpsServer({ cert: web.cert, key: web.key }, handler(web.name, 'https')).listen(443, web.address, ready);
  // A plain TCP port, for ranges an allowlist lets through directly.
  createTcpServer((socket) => {
    say({ event: 'tcp', server: web.name, from: socket.remoteAddress });
    socket.end(`${web.name} tcp\n`);
  }).listen(outside.tcpPort, web.address, ready);
}
listening += 2;
dns.bind(53, outside.dns, ready);
udp.bind(outside.udp.port, outside.udp.address, ready);

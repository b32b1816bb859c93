// A proxyless grpc-js xDS client (@grpc/grpc-js-xds) for meshpilot's
// end-to-end tests. It calls the health service of each target in rounds
// and prints how many RPCs of a round each backend answered, in the demo's
// report form, then how many failed and the last error; a line is printed
// when a target's outcome (the backends that answered, the error) differs
// from its previous round's:
//
//   GRPC_XDS_BOOTSTRAP=bootstrap.json node client.js xds:///echo:7070 ...
//   xds:///echo:7070  10:04:05  127.0.0.51: 6  127.0.0.52: 6  failed: 0
//
// It runs until it is killed.
'use strict';

const net = require('net');

// EndpointSlices carry documentation addresses (192.0.2.N), which the API
// server accepts, while the test's backends listen on 127.0.0.N: dial those
// instead, as the Go clients of the tests do (grpctest.DocToLoopback).
// Nothing outside loopback is ever dialled this way.
function docToLoopback(host) {
  return host.startsWith('192.0.2.') ? '127.0.0.' + host.slice('192.0.2.'.length) : host;
}
const connect = net.connect;
net.connect = function (options, ...rest) {
  if (options && typeof options === 'object' && typeof options.host === 'string') {
    options = { ...options, host: docToLoopback(options.host) };
  }
  return connect.call(this, options, ...rest);
};

const grpc = require('@grpc/grpc-js');
require('@grpc/grpc-js-xds').register();

// The resolver validates the bootstrap too, but a refused one only shows as
// an unrelated error on every RPC; validate it first to report why.
try {
  require('@grpc/grpc-js-xds/build/src/xds-bootstrap').loadBootstrapInfo();
} catch (err) {
  console.log(`bootstrap refused: ${err.message}`);
  process.exit(1);
}

const perRound = 12;
const pauseMs = 100;
const identity = (b) => b;

// check makes one Health.Check call (an empty request is a valid
// HealthCheckRequest) and resolves to the backend that answered.
function check(client) {
  return new Promise((resolve, reject) => {
    const call = client.makeUnaryRequest('/grpc.health.v1.Health/Check', identity, identity,
      Buffer.alloc(0), { deadline: Date.now() + 5000 }, (err) => {
        if (err) {
          reject(err);
          return;
        }
        const host = call.getPeer().replace(/:\d+$/, '');
        resolve(docToLoopback(host));
      });
  });
}

const lastOutcome = new Map();

async function round(target, client) {
  const counts = new Map();
  let failed = 0;
  let lastError = '';
  for (let i = 0; i < perRound; i++) {
    try {
      const backend = await check(client);
      counts.set(backend, (counts.get(backend) || 0) + 1);
    } catch (err) {
      failed++;
      lastError = `${grpc.status[err.code]}: ${err.details}`;
    }
  }
  const backends = [...counts.keys()].sort();
  const outcome = `${backends} ${failed > 0} ${lastError}`;
  if (lastOutcome.get(target) === outcome) {
    return;
  }
  lastOutcome.set(target, outcome);
  const time = new Date().toISOString().slice(11, 19);
  const served = backends.map((b) => `${b}: ${counts.get(b)}`).join('  ');
  console.log(`${target}  ${time}  ${served}  failed: ${failed}${lastError ? '  last error: ' + lastError : ''}`);
}

async function main() {
  const targets = process.argv.slice(2);
  if (targets.length === 0) {
    console.error('usage: node client.js xds:///name:port ...');
    process.exit(2);
  }
  const clients = targets.map((t) => new grpc.Client(t, grpc.credentials.createInsecure()));
  for (;;) {
    for (let i = 0; i < targets.length; i++) {
      await round(targets[i], clients[i]);
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

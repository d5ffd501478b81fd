// The driver of a JavaScript context: one Node.js process whose globals persist between
// runs, as Node's own REPL keeps them (top-level await included; `import ... from`
// statements become dynamic imports). It speaks as the Python driver does (driver.py):
// JSON lines on stdin ({"id", "code", "env"}), records on stdout (an ASCII record
// separator, one line of JSON, a newline): what the code prints as it is printed, then
// the run's reply {"id", "result", "bundle", "error", "count"}. A string's value is its
// own text; any other value is shown as Node's REPL shows it. SIGINT ends a run that
// waits (an await); one that never yields cannot be interrupted, and its context is
// ended by the server after the interrupt's grace.
'use strict';
const fs = require('fs');
const repl = require('repl');
const stream = require('stream');
const util = require('util');
const readline = require('readline');

const PIECE = 4096;
const MAX_TEXT = 1024 * 1024;
const write = (fd, text) => {
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length;) {
    try {
      at += fs.writeSync(fd, bytes, at);
    } catch (error) {
      if (error.code !== 'EAGAIN') throw error;
    }
  }
};
const record = (value) => write(1, '\x1e' + JSON.stringify(value) + '\n');
const cut = (text) => (text.length <= MAX_TEXT ? text : text.slice(0, MAX_TEXT) + '…');

let run = null;
let count = 0;
const pending = { stdout: '', stderr: '' };
const flush = (name) => {
  while (pending[name]) {
    const line = pending[name].indexOf('\n') + 1 || Math.min(pending[name].length, PIECE);
    const end = Math.min(line, PIECE);
    const text = pending[name].slice(0, end);
    pending[name] = pending[name].slice(end);
    if (run !== null) record({ id: run, stream: name, text });
  }
};
for (const name of ['stdout', 'stderr']) {
  process[name].write = (chunk, encoding, callback) => {
    pending[name] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    if (pending[name].includes('\n') || pending[name].length >= PIECE) flush(name);
    const done = typeof encoding === 'function' ? encoding : callback;
    if (done) done();
    return true;
  };
}

const server = repl.start({
  input: new stream.PassThrough(),
  output: new stream.Writable({ write: (chunk, encoding, done) => done() }),
  terminal: false,
  useGlobal: false,
  ignoreUndefined: true,
  prompt: '',
});

// The code's console is the process's (whose writes are records); an error the REPL
// would print (it catches them in a domain of its own) is the run's.
server.context.console = console;
let failed = null;
server._domain.removeAllListeners('error');
server._domain.on('error', (error) => {
  if (failed) failed(error);
});

// Static imports, which a REPL refuses, as dynamic ones.
const IMPORT = /^[ \t]*import\s+(?:([\w$]+)\s*,?\s*)?(?:\*\s+as\s+([\w$]+)|\{([^}]*)\})?\s*(?:from\s*)?(['"][^'"]+['"])\s*;?[ \t]*$/gm;
const imports = (code) =>
  code.replace(IMPORT, (_, name, namespace, names, from) => {
    const bound = [];
    if (name) bound.push(`default: ${name}`);
    if (names) {
      for (const part of names.split(',').map((p) => p.trim()).filter(Boolean)) {
        const [imported, local] = part.split(/\s+as\s+/);
        bound.push(local ? `${imported}: ${local}` : imported);
      }
    }
    if (namespace) return `const ${namespace} = await import(${from});` + (bound.length ? ` const {${bound.join(', ')}} = ${namespace};` : '');
    return bound.length ? `const {${bound.join(', ')}} = await import(${from});` : `await import(${from});`;
  });

// An error of the code's (made in the REPL's context, so no instance of this realm's
// Error): its stack without the driver's and Node's own frames.
const errorOf = (error) => {
  if (error && typeof error === 'object' && 'message' in error) {
    const stack = String(error.stack || '')
      .split('\n')
      .filter((line) => !/^\s+at .*(node:|\[eval\]|<anonymous>)/.test(line))
      .join('\n');
    return { name: String(error.name || 'Error'), value: cut(String(error.message)), traceback: cut(stack) };
  }
  return { name: 'Error', value: cut(util.inspect(error)), traceback: '' };
};

const shown = (value) => (typeof value === 'string' ? value : util.inspect(value, { depth: 4 }));

let interrupt = null;
process.on('SIGINT', () => {
  if (interrupt) interrupt();
});

const evaluate = (code) =>
  new Promise((resolve) => {
    interrupt = () => resolve({ error: { name: 'Interrupted', value: 'the run was interrupted', traceback: '' } });
    failed = (error) => resolve({ error: errorOf(error) });
    server.eval(imports(code), server.context, 'cell', (error, value) => {
      if (error) {
        // The REPL reports an unfinished statement as recoverable: it is a syntax error here.
        resolve({ error: errorOf(error.err || error) });
      } else {
        resolve({ value });
      }
    });
  });

const withEnv = async (env, body) => {
  const saved = {};
  for (const [name, value] of Object.entries(env)) {
    saved[name] = process.env[name];
    process.env[name] = String(value);
  }
  try {
    return await body();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
};

const queue = [];
let busy = false;
const next = async () => {
  if (busy || queue.length === 0) return;
  busy = true;
  const request = queue.shift();
  count += 1;
  run = request.id;
  let reply;
  try {
    reply = await withEnv(request.env || {}, () => evaluate(String(request.code || '')));
  } catch (error) {
    reply = { error: errorOf(error) };
  }
  flush('stdout');
  flush('stderr');
  run = null;
  interrupt = null;
  failed = null;
  let result = null;
  if (!reply.error && reply.value !== undefined) {
    result = cut(shown(reply.value));
  }
  record({ id: request.id, result, bundle: result === null ? null : { 'text/plain': result }, error: reply.error || null, count });
  busy = false;
  next();
};

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    return;
  }
  queue.push(request);
  next();
});
lines.on('close', () => process.exit(0));
process.on('uncaughtException', (error) => {
  if (run !== null) pending.stderr += `Uncaught ${error && error.stack ? error.stack : error}\n`;
});
process.on('unhandledRejection', () => {});

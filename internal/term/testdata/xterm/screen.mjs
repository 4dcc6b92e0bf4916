// Feeds a file to @xterm/headless and prints, as JSON, the time its parser
// took (ms: the fastest of REPEAT runs, each on a new terminal, from the
// first write to the last write's callback; cpuMs: the process's CPU time
// in that run, which a machine shared with other work distorts less) and
// the final screen's lines
// (trailing spaces trimmed). The data goes in 32 KB chunks, each after the
// previous one was parsed (xterm's flow control; it drops data past 50 MB
// pending). Usage: node screen.mjs FILE COLS ROWS [REPEAT], with NODE_PATH
// naming the node_modules folder @xterm/headless is installed in (make
// installs it outside the repo, so it is loaded with require, which reads
// NODE_PATH; an import would look only beside this file).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const xterm = createRequire(import.meta.url)('@xterm/headless');

const [file, cols, rows, repeat = '1'] = process.argv.slice(2);
const data = readFileSync(file);
const chunk = 32 * 1024; // as troupe's PTY reader hands it over

function run() {
  const term = new xterm.Terminal({ cols: Number(cols), rows: Number(rows), scrollback: 2000, allowProposedApi: true });
  return new Promise((resolve) => {
    const start = performance.now();
    const cpu0 = process.cpuUsage();
    let i = 0;
    const next = () => {
      if (i >= data.length) {
        const cpu = process.cpuUsage(cpu0);
        resolve({ ms: performance.now() - start, cpuMs: (cpu.user + cpu.system) / 1000, term });
        return;
      }
      const part = data.subarray(i, i + chunk);
      i += chunk;
      term.write(part, next);
    };
    next();
  });
}

let best = Infinity;
let bestCPU = Infinity;
let last;
for (let n = 0; n < Number(repeat); n++) {
  const r = await run();
  best = Math.min(best, r.ms);
  bestCPU = Math.min(bestCPU, r.cpuMs);
  if (last) last.dispose();
  last = r.term;
}
const buf = last.buffer.active;
const lines = [];
for (let y = 0; y < last.rows; y++) {
  const line = buf.getLine(buf.baseY + y);
  lines.push(line ? line.translateToString(true) : '');
}
process.stdout.write(JSON.stringify({ ms: best, cpuMs: bestCPU, lines, rss: process.memoryUsage().rss }));

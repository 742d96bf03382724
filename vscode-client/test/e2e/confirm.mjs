// For tests/test_vscode_e2e.py: through the headless Chromium's DevTools port, wait for the
// confirmation VS Code shows before a KernelBand job, write what it says to OUT, and press
// its confirming button (the one that is not Cancel). Needs a Node with WebSocket (22+).
// usage: node confirm.mjs DEVTOOLS_PORT OUT SECONDS
import { writeFileSync } from 'node:fs';

const [port, out, seconds = '120'] = process.argv.slice(2);
const deadline = Date.now() + Number(seconds) * 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const PROBE = `(() => {
  const box = document.querySelector('.monaco-dialog-box');
  if (!box) return null;
  const text = (sel) => (box.querySelector(sel)?.innerText ?? '').trim();
  const buttons = [...box.querySelectorAll('.monaco-button')].filter((b) => b.innerText.trim());
  const seen = { message: text('.dialog-message-text'), detail: text('.dialog-message-detail'),
                 buttons: buttons.map((b) => b.innerText.trim()) };
  const go = buttons.find((b) => !/cancel/i.test(b.innerText));
  if (go) { go.click(); seen.pressed = go.innerText.trim(); }
  return JSON.stringify(seen);
})()`;

async function page() {
  while (Date.now() < deadline) {
    try {
      const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      const p = list.find((t) => t.type === 'page' && t.webSocketDebuggerUrl);
      if (p) return p.webSocketDebuggerUrl;
    } catch {
      // not up yet
    }
    await sleep(500);
  }
  throw new Error('no page in the browser');
}

const ws = new WebSocket(await page());
await new Promise((resolve, reject) => {
  ws.onopen = resolve;
  ws.onerror = reject;
});
let id = 0;
const pending = new Map();
ws.onmessage = (e) => {
  const m = JSON.parse(e.data);
  pending.get(m.id)?.(m);
  pending.delete(m.id);
};
const evaluate = (expression) =>
  new Promise((resolve) => {
    const n = ++id;
    pending.set(n, (m) => resolve(m.result?.result?.value ?? null));
    ws.send(JSON.stringify({ id: n, method: 'Runtime.evaluate', params: { expression, returnByValue: true } }));
  });

let seen = null;
while (!seen && Date.now() < deadline) {
  seen = await evaluate(PROBE);
  if (!seen) await sleep(500);
}
writeFileSync(out, seen ?? JSON.stringify({ error: 'no dialog appeared' }));
ws.close();
process.exit(0);

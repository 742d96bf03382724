// The real-editor pass in VS Code (code-server in headless Chromium, driven by Playwright):
// a new user's path through the packaged extension on examples/, without a GPU. Run by
// scripts/editor_pass/run.sh, which starts code-server; writes $OUT (JSON: every check, what
// the page showed) and PNG screenshots into $SHOTS.
//   env: CS_URL, WS (the workspace folder), SHOTS, OUT, PLAYWRIGHT_CORE (its package dir)
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const WS = process.env.WS;
const SHOTS = process.env.SHOTS;
const OUT = process.env.OUT;
// a ratio ("48.23×", "1.5x") or a before -> after pair of times
const SPEED_CLAIM = /\d(?:\.\d+)?\s*[x×](?![a-z])|(?:ms|µs|\d s)\s*(?:→|->)/;

const report = { checks: [], shots: [], seen: { notifications: [], statusbar: [], lenses: [] }, errors: [] };
const check = (id, name, ok, detail = '') => {
  report.checks.push({ id, name, ok: !!ok, detail: String(detail).slice(0, 600) });
  console.log(`${ok ? 'PASS' : 'FAIL'} [${id}] ${name}${ok ? '' : ` — ${String(detail).slice(0, 300)}`}`);
};

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run'],
});
const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
const sleep = (ms) => page.waitForTimeout(ms);

async function shot(name, what) {
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file });
  report.shots.push({ file: `${name}.png`, what });
}
const texts = (sel) =>
  page.$$eval(sel, (els) => els.map((e) => (e.innerText || e.textContent).replace(/\s+/g, ' ').trim()).filter(Boolean))
    .catch(() => []);
const notifications = () => texts('.notifications-toasts .notification-toast');
const statusbar = () => texts('#workbench\\.parts\\.statusbar .statusbar-item');
const lenses = () => texts('.monaco-editor .codelens-decoration');
const modalOpen = async () => (await page.$$('.monaco-dialog-box')).length > 0;

async function sample() {
  // everything a user could read about a job, collected while it runs
  for (const [key, fn] of [['notifications', notifications], ['statusbar', statusbar], ['lenses', lenses]]) {
    for (const t of await fn()) {
      if (!report.seen[key].includes(t)) report.seen[key].push(t);
    }
  }
}

async function command(name) {
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+Shift+P');
  await sleep(700);
  await page.keyboard.type(name);
  // the command's own row, once the palette lists it
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
  await row.waitFor({ timeout: 15000 });
  await row.click();
  await sleep(800);
}

async function openFile(name) {
  for (let attempt = 0; attempt < 3; attempt++) {
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+P');
    await sleep(700);
    await page.keyboard.type(name);
    // the file's row, not the first fuzzy match, once the results are there
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
    try {
      await row.waitFor({ timeout: 15000 });
      await row.click();
    } catch {
      continue;
    }
    const opened = await waitFor(async () => (await texts('.tab.active')).some((t) => t.replace(/\s/g, '').includes(name)), 10000, 300);
    if (opened) {
      await sleep(1500);
      return;
    }
  }
  throw new Error(`could not open ${name} (tabs: ${(await texts('.tab')).join(' | ')}; html: ${
    await page.$$eval('.tab', (els) => els.map((e) => e.className).join(' ; '))})`);
}

async function waitFor(fn, ms, every = 1000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > end) return v;
    await sample();
    await sleep(every);
  }
}

async function clickLens(prefix) {
  const link = page.locator('.monaco-editor .codelens-decoration a', { hasText: prefix }).first();
  await link.click();
}

/** Ctrl+. (or the light bulb) at the cursor: the offered actions' titles. */
async function codeActions() {
  const rows = '.action-widget .monaco-list-row, .context-view .monaco-list-row';
  await sleep(1500);
  await page.keyboard.press('Control+.');
  let got = await waitFor(async () => (await texts(rows)).length > 0, 6000, 300);
  if (!got) {
    await page.locator('.lightBulbWidget, .codicon-lightbulb, .codicon-lightbulb-autofix').first().click().catch(() => undefined);
    got = await waitFor(async () => (await texts(rows)).length > 0, 6000, 300);
  }
  return texts(rows);
}

async function dismissToasts() {
  for (const b of await page.$$('.notifications-toasts .codicon-notifications-clear')) {
    await b.click().catch(() => undefined);
  }
  await sleep(300);
}

async function editorText() {
  return page.evaluate(() => {
    const lines = [...document.querySelectorAll('.editor-group-container.active .monaco-editor .view-line')];
    return lines.map((l) => l.textContent.replace(/\u00a0/g, ' ')).join('\n');
  });
}

/** The whole "KernelBand" output channel: VS Code writes each channel to a log file too
 * (the panel shows only the lines in view). */
function outputLog() {
  const found = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/KernelBand\.log$/.test(e.name)) found.push(p);
    }
  };
  walk(path.join(process.env.UD, 'logs'));
  return found.map((f) => fs.readFileSync(f, 'utf8')).join('\n');
}

async function outputText() {
  await command('KernelBand: Show output');
  await sleep(1500);
  await page.keyboard.press('Control+J'); // the panel shows it; the log file has all of it
  return outputLog();
}

try {
  await page.goto(`${process.env.CS_URL}/?folder=${encodeURIComponent(WS)}`);
  await page.waitForSelector('.monaco-workbench', { timeout: 180000 });
  await sleep(6000);

  // ---------------------------------------------------------------- the lenses on open
  await openFile('add_scale.py');
  const onOpen = await waitFor(async () => (await lenses()).find((t) => t.startsWith('Optimize')), 60000);
  check('lens', 'lenses on open: Optimize | Profile | …', onOpen && /^Optimize \| Profile/.test(onOpen), onOpen);
  await shot('01_lenses_on_open', 'add_scale.py opened: the lens line above axpy_kernel');

  // ---------------------------------------------------------------- defect 12 and 1: Optimize without a GPU
  const t0 = Date.now();
  await clickLens('Optimize');
  const phase = await waitFor(async () => (await notifications()).find((t) => /starting the engine|preparing/.test(t)), 30000, 500);
  check('12', 'progress says what runs while no event comes', phase, phase);
  await sleep(4000);
  await sample();
  await shot('02_optimize_preparing', 'Optimize running: the notification names the phase and the time so far; the lens shows the job');
  const counted = await waitFor(async () => (await notifications()).find((t) => /\d\/4 evaluated/.test(t)), 150000, 700);
  await shot('03_optimize_counting', 'Optimize evaluating candidates: counts, no ratio (interpreter times)');
  check('12b', 'progress counts candidates', counted, counted);
  const end = await waitFor(async () => (await notifications()).find((t) => /found a variant|no faster|failed/.test(t)), 180000, 700);
  report.optimize_seconds = (Date.now() - t0) / 1000;
  await sample();
  await shot('04_optimize_end', 'Optimize ended: a correct variant, speed needs a GPU, with a Review variant button');
  check('4', 'the end notification offers Review variant', end && /correct; speed needs a GPU/.test(end) && /Review variant/.test(end), end);
  const statusSeen = report.seen.statusbar.filter((t) => /KernelBand/.test(t));
  const seenAll = [...report.seen.notifications, ...statusSeen, ...report.seen.lenses];
  const claims = seenAll.filter((t) => SPEED_CLAIM.test(t));
  check('1', 'no ratio and no time pair in notifications, status bar and lenses during the run', claims.length === 0,
    claims.join(' || '));

  // ---------------------------------------------------------------- defect 3: review first, decide after
  await page.locator('.notifications-toasts .notification-toast a.monaco-button', { hasText: 'Review variant' }).first().click();
  const diffOpen = await waitFor(async () => (await page.$$('.monaco-diff-editor')).length > 0, 20000, 500);
  // the evidence opens beside it, then the review waits for a decision
  await waitFor(async () => (await notifications()).some((t) => /review the variant/.test(t)), 30000, 500);
  await sleep(1500);
  check('3', 'the review opens the diff', diffOpen);
  check('3b', 'no modal over the diff', !(await modalOpen()));
  const titleActions = await page.$$eval('.editor-actions .action-label', (els) => els.map((e) => e.getAttribute('aria-label') || e.title || ''));
  check('3c', "Apply and Discard in the diff editor's title bar", titleActions.some((t) => /Apply this variant/.test(t))
    && titleActions.some((t) => /Discard this variant/.test(t)), titleActions.join(', '));
  const evidence = await page.evaluate(() => {
    const groups = [...document.querySelectorAll('.editor-group-container')];
    const g = groups.find((x) => (x.querySelector('.tab.active') || {}).textContent?.includes('KernelBand evidence'));
    return g ? [...g.querySelectorAll('.view-line')].map((l) => l.textContent.replace(/\u00a0/g, ' ')).join('\n') : '';
  });
  check('3d', 'the evidence beside the diff', /KernelBand: variant of/.test(evidence) && /correct; speed needs a GPU/.test(evidence)
    && !/GPU: CPU|to measure its speed/.test(evidence) && !SPEED_CLAIM.test(evidence), evidence.slice(0, 300));
  const reviewToast = (await notifications()).find((t) => /review the variant/.test(t));
  check('3e', 'a non-modal notification asks Apply / Discard', reviewToast && /Apply/.test(reviewToast) && /Discard/.test(reviewToast), reviewToast);
  const reviewTexts = [reviewToast || '', ...(await texts('.editor-group-container .tab'))];
  check('1b', 'the review claims no speed', !reviewTexts.some((t) => SPEED_CLAIM.test(t)), reviewTexts.join(' | '));
  await shot('05_review_diff_evidence', 'Review: the diff (left: current, right: variant), the evidence preview beside it, ✓/✕ in the title bar, a non-modal notification');
  // the diff can be scrolled and read: nothing blocks the editor
  await page.mouse.move(500, 500);
  await page.mouse.wheel(0, 400);
  await sleep(500);
  await shot('06_review_scrolled', 'The diff scrolled while the review is pending');
  // closing the diff never applies
  const before = fs.readFileSync(path.join(WS, 'add_scale.py'), 'utf8');
  await page.keyboard.press('Escape');
  await dismissToasts();
  check('3f', 'dismissing the notification does not decide', (await page.$$('.monaco-diff-editor')).length > 0);
  await page.locator('.tab.active .codicon-close').first().click().catch(() => page.keyboard.press('Control+W'));
  await sleep(2000);
  await openFile('add_scale.py');
  const afterClose = await editorText();
  check('3g', 'closing the diff applies nothing', !afterClose.includes('cache_modifier') && !/BLOCK_SIZE=(?!128)\d+\)/.test(afterClose)
    && fs.readFileSync(path.join(WS, 'add_scale.py'), 'utf8') === before, afterClose.slice(0, 200));

  // ---------------------------------------------------------------- defect 4: the lens reaches the variant; title-bar Apply
  const cpuLens = await waitFor(async () => (await lenses()).find((t) => /Variant found/.test(t)), 20000);
  check('4b', 'the lens Variant found: … · Review', cpuLens && /Variant found: correct; speed needs a GPU · Review/.test(cpuLens), cpuLens);
  await clickLens('Variant found');
  await waitFor(async () => (await page.$$('.monaco-diff-editor')).length > 0, 20000, 500);
  await sleep(2000);
  await page.locator('.editor-actions .action-label[aria-label*="Apply this variant"]').first().click();
  await sleep(3000);
  await openFile('add_scale.py');
  const applied = await editorText();
  check('3h', "the title bar's Apply applies the variant to the open document", /BLOCK_SIZE=(?!128)\d+|cache_modifier|eviction_policy/.test(applied), applied.slice(0, 300));
  await waitFor(async () => (await lenses()).some((t) => /Applied variant/.test(t)), 15000);
  await shot('07_applied', 'After Apply: the document holds the variant (unsaved), the lens offers Re-verify');
  await page.keyboard.press('Control+Z');
  await sleep(2500);
  const undone = await waitFor(async () => (await lenses()).find((t) => /Variant found/.test(t)), 15000);
  check('undo', 'undo restores the text and the variant is offered again', undone, undone);

  // Ctrl+. offers the review
  await page.locator('.view-line', { hasText: 'def axpy_kernel' }).first().click();
  const actions = await codeActions();
  await shot('08_quick_fix_review', 'Ctrl+. on the kernel: Review found variant (correct; speed needs a GPU)');
  check('4c', 'Ctrl+. offers Review found variant', actions.some((t) => /Review found variant/.test(t)), actions.join(' | '));
  await page.keyboard.press('Escape');

  // ---------------------------------------------------------------- defect 5: stale variant
  await page.locator('.view-line', { hasText: 'mask = offsets < n_elements' }).first().click();
  await page.keyboard.press('End');
  await page.keyboard.press('Enter');
  await page.keyboard.type('# bounds of the last block');
  await sleep(3000);
  const afterComment = await lenses();
  check('5', 'a comment inside the kernel keeps the variant (rebased)', afterComment.some((t) => /Variant found/.test(t)), afterComment.join(' / '));
  await page.locator('.view-line', { hasText: 'alpha * x + y, mask=mask' }).first().click();
  await page.keyboard.press('End');
  for (let i = 0; i < ', mask=mask)'.length; i++) await page.keyboard.press('ArrowLeft');
  await page.keyboard.type(' + 0.0');
  await sleep(3000);
  const afterCode = await lenses();
  await shot('09_stale_variant_hidden', 'After a change of the kernel code: no Variant found lens');
  check('5b', 'a change of the kernel code hides the variant', !afterCode.some((t) => /Variant found|Apply found/.test(t)), afterCode.join(' / '));
  await command('File: Revert File'); // back to the text on disk (the first Optimize's)
  await sleep(2500);

  // ---------------------------------------------------------------- defect 6: inlay hints after Profile, no keystroke
  await dismissToasts();
  await clickLens('Profile');
  const profiled = await waitFor(async () => (await notifications()).find((t) => /KernelBand: axpy_kernel: .*(interpreter|bottleneck)/.test(t)), 150000);
  check('6a', 'Profile ends', profiled, profiled);
  await sleep(2500);
  const hinted = await editorText();
  check('6', 'the inlay hint appears without a keystroke', /regs|\(interpreter\)/.test(hinted.split('\n').find((l) => l.includes('def axpy_kernel')) || ''),
    hinted.split('\n').find((l) => l.includes('def axpy_kernel')));
  await shot('10_inlay_after_profile', 'Profile done: the inlay hint after the signature, no keystroke');
  await page.locator('.view-line', { hasText: 'return out' }).first().click();
  await page.keyboard.press('End');
  await page.keyboard.type(' ');
  await sleep(2500);
  const spaced = (await editorText()).split('\n').find((l) => l.includes('def axpy_kernel')) || '';
  const lensSpaced = await lenses();
  check('6b', 'not "(earlier version)" after a space outside the kernel', !/earlier version/.test(spaced) && !lensSpaced.some((t) => /earlier version/.test(t)),
    spaced + ' / ' + lensSpaced.join(' / '));
  await page.keyboard.press('Control+Z');

  // ---------------------------------------------------------------- defect 10: the second Optimize re-checks the stored variant
  await command('File: Revert File'); // the text the first Optimize ran on
  await sleep(2500);
  await dismissToasts();
  report.seen.notifications = [];
  await clickLens('Optimize');
  await waitFor(async () => (await notifications()).find((t) => /found a variant|no faster|failed/.test(t)), 240000, 700);
  const second = report.seen.notifications;
  check('10', 'the re-check of the stored variant is not "#0 … 0/4"', second.some((t) => /re-checked the variant an earlier session found/.test(t))
    && !second.some((t) => /#0|0\/4 evaluated/.test(t)), second.join(' || '));
  check('10b', 'the count reaches the budget before the end', second.some((t) => /4\/4 evaluated/.test(t)), second.filter((t) => /evaluated/.test(t)).join(' || '));
  check('1c', 'no ratio and no time pair in the second run', !second.some((t) => SPEED_CLAIM.test(t)), second.filter((t) => SPEED_CLAIM.test(t)).join(' || '));
  await dismissToasts();

  // ---------------------------------------------------------------- defect 7: Create harness with a scalar argument
  await openFile('scaled.py');
  await waitFor(async () => (await lenses()).some((t) => /Create harness/.test(t)), 30000);
  await clickLens('Create harness');
  await sleep(2500);
  const stub = await editorText();
  check('7', 'the harness stub passes the multiplier as a float', /s = 0\.5/.test(stub), stub.split('\n').filter((l) => /= /.test(l)).slice(-4).join(' | '));
  await shot('11_harness_stub', 'Create harness on scale(x, s): s is a float, not a tensor');
  await page.keyboard.press('Control+S');
  await sleep(2500);
  await dismissToasts();
  await clickLens('Profile');
  // the end of the profile (its summary, or a failure), not its progress notification
  const stubRun = await waitFor(async () => (await notifications()).find((t) => /KernelBand: scale_kernel: |profiling scale_kernel failed/.test(t)), 150000);
  check('7b', 'the stub runs (Profile of scale_kernel)', stubRun && !/failed|IncompatibleType/.test(stubRun), stubRun);
  await dismissToasts();

  // ---------------------------------------------------------------- defect 2: the KB101 fix keeps the kernel
  await openFile('ragged.py');
  await sleep(3000);
  await page.locator('.view-line', { hasText: 'tl.arange(0, 100)' }).first().click();
  const fixes = await codeActions();
  await shot('12_kb101_fix', 'KB101 quick fix: round the arange up and mask the extra lanes');
  check('2', 'KB101 offers the masking fix', fixes.some((t) => /Round the tl.arange end up to 128 and mask the extra lanes/.test(t)), fixes.join(' | '));
  await page.keyboard.press('Enter');
  await sleep(2500);
  const fixedText = await editorText();
  check('2b', 'the fix rounds the arange and masks the extra lanes', /tl\.arange\(0, 128\)/.test(fixedText) && /\(offs < n\) & \(tl\.arange\(0, 128\) < 100\)/.test(fixedText),
    fixedText.split('\n').filter((l) => /arange|mask =/.test(l)).join(' | '));

  // ---------------------------------------------------------------- defect 8: a Triton file that never parsed
  await openFile('broken.py');
  await sleep(4000);
  await page.keyboard.press('Control+Shift+M');
  await sleep(2000);
  const problems = await page.evaluate(() => {
    const panel = document.querySelector('.part.panel');
    return panel ? panel.innerText : '';
  });
  await shot('13_does_not_parse', 'A Triton file that never parsed: the KernelBand warning in Problems');
  check('8', 'a diagnostic says the file does not parse', /KernelBand cannot analyse this file: it does not parse/.test(problems), problems.slice(0, 300));
  await page.keyboard.press('Control+J');

  // ---------------------------------------------------------------- defect 11: no internal text in the output
  const output = await outputText();
  report.output_tail = output.slice(-4000);
  const internal = ['unknown message id', "{'budget'", 'GPU: CPU', 'stale running session', 'to measure its speed',
    'Traceback'].filter((s) => output.includes(s));
  check('11', 'no internal text in the output channel', internal.length === 0 && output.length > 0, internal.join(', ') || `${output.length} chars`);
  check('1d', 'no ratio and no time pair in the output channel', !SPEED_CLAIM.test(output), (output.match(SPEED_CLAIM) || [''])[0]);
  await shot('14_output_channel', 'The KernelBand output channel after the runs');
} catch (err) {
  report.errors.push(String(err && err.stack ? err.stack : err));
  console.log(`ERROR ${err}`);
  await shot('99_error', 'the page when the driver stopped').catch(() => undefined);
} finally {
  fs.writeFileSync(OUT, JSON.stringify(report, null, 1));
  await browser.close();
}
const failed = report.checks.filter((c) => !c.ok).length;
console.log(`${report.checks.length - failed} passed, ${failed} failed`);
process.exit(failed || report.errors.length ? 1 : 0);

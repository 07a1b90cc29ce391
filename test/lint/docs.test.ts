// The documents: every relative link in README.md and docs/*.md points to a file that
// exists, and no document (nor bench/README.md, nor a comment in src/, test/, bench/)
// counts work in sessions, rounds of work or numbered issues: documents say what is true
// now, and how a number was reached belongs in commit messages.

import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';

const ROOT = path.resolve(__dirname, '../../..');

/** Relative link targets of a Markdown text (inline links and images), without anchors. */
export function relativeLinks(md: string): string[] {
  const out: string[] = [];
  // Code spans and fenced blocks hold code, not links.
  const text = md.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1];
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
    out.push(target.split('#')[0]);
  }
  return out;
}

const COUNTING = [
  /\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\d+(st|nd|rd|th))[- ]sessions?\b/i,
  /\b(this|that|previous|earlier|last|next|the same|one|a later|an earlier)\s+session\b/i,
  /\bsessions?'\s/i,
  /\bsession of \d{4}/i,
  /\bsittings?\b/i,
  /\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+round\s*:/i,
  /^#+\s*(first|second|third|fourth|fifth)\s+round\b/im,
  /\bissue\s+#?\d+\b/i,
];

/** The phrases of `text` that count work in sessions, rounds or numbered issues. */
export function countingPhrases(text: string): string[] {
  const found: string[] = [];
  for (const re of COUNTING) {
    const m = re.exec(text);
    if (m) found.push(m[0]);
  }
  return found;
}

// A document says what is true now: how it came to be ("before, …", a comparison with an
// earlier run, a run named by its commit) belongs in commit messages. And it names nothing a
// user lacks: the project's own spec and design notes are not shipped.
const HISTORY = [
  /(?<!\bas )\bbefore,\s/i,
  /\bagainst the run\b/i,
  /\ban earlier (run|series)\b/i,
  /(?<![\w/.#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}(?![\w-])/,
  /\b(?:[Aa]t|commit|build)\s+[0-9a-f]{7,12}\b/,
];
const UNSHIPPED = [/\b(PROTOCOL|ARCHITECTURE)\.md\b/, /\.\.\/shared\//];

/** Markdown prose: fenced blocks and code spans removed (commands may hold a hash). */
function prose(md: string): string {
  return md.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
}

/** The phrases of a document's prose that tell history or point to files users lack. */
export function historyPhrases(md: string): string[] {
  const text = prose(md);
  const found: string[] = [];
  for (const re of [...HISTORY, ...UNSHIPPED]) {
    const m = re.exec(text);
    if (m) found.push(m[0]);
  }
  return found;
}

function docs(): string[] {
  const files = ['README.md', 'bench/README.md'];
  for (const f of fs.readdirSync(path.join(ROOT, 'docs'))) if (f.endsWith('.md')) files.push(`docs/${f}`);
  return files;
}

function sources(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) sources(rel, out);
    else if (/\.(ts|js|mjs|cjs|c|md)$/.test(e.name)) out.push(rel);
  }
  return out;
}

/** The comment text of a source file (line and block comments; Markdown whole). */
function comments(file: string, text: string): string {
  if (file.endsWith('.md')) return text;
  return [...text.matchAll(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g)].map((m) => m[0]).join('\n');
}

t.test('the checkers find what they look for', async (t) => {
  t.same(relativeLinks('[a](docs/x.md#y) [b](https://e.org/z) [c](#top) `[d](no.md)` ![e](img/p.svg "t")'), ['docs/x.md', 'img/p.svg']);
  for (const bad of ['in the eleventh session', 'Issue 9 before / after', 'issue #9', 'the third round: the API path', 'Third round: x', 'fourth session', 'this session', 'the previous session\'s runs', 'session of 2026-11-22']) {
    t.not(countingPhrases(bad).length, 0, `flags "${bad}"`);
  }
  for (const ok of ['3 rounds, medians', 'round 2 of this run', 'per-round ratios', 'a login session', 'AWS_SESSION_TOKEN', 'GET /api/session', 'a round trip']) {
    t.same(countingPhrases(ok), [], `passes "${ok}"`);
  }
});

t.test('every relative link in README.md and docs/*.md points to an existing file', async (t) => {
  const files = ['README.md', ...docs().filter((f) => f.startsWith('docs/'))];
  let links = 0;
  for (const f of files) {
    for (const target of relativeLinks(fs.readFileSync(path.join(ROOT, f), 'utf8'))) {
      links++;
      const rel = path.relative(ROOT, path.resolve(ROOT, path.dirname(f), target));
      t.ok(fs.existsSync(path.join(ROOT, rel)), `${f}: link to ${target} (${rel}) exists`);
    }
  }
  t.ok(links > 50, `links checked: ${links}`);
});

t.test('no document or comment counts sessions, rounds of work or numbered issues', async (t) => {
  const files = [...docs(), ...sources('src'), ...sources('test'), ...sources('bench')]
    .filter((f) => f !== 'test/lint/docs.test.ts');
  for (const f of files) {
    const text = comments(f, fs.readFileSync(path.join(ROOT, f), 'utf8'));
    t.same(countingPhrases(text), [], f);
  }
});

t.test('the history checker finds what it looks for', async (t) => {
  for (const bad of ['(before, such clients held it ~15 s)', 'Against the run at 18903cc: fan-out', 'at commit d3862c1', 'At 8322756 (defaults)',
    'paired with cfd19e3\'s build', 'an earlier series at the same load', 'The wire contract is PROTOCOL.md', 'see ARCHITECTURE.md', 'in ../shared/reference']) {
    t.not(historyPhrases(bad).length, 0, `flags "${bad}"`);
  }
  for (const ok of ['as before, a subscription', 'before the first message', '`git worktree add /tmp/base cfd19e3`', 'the 2,670,813 messages',
    '0x1f2e3d4c', '[protocol.md](protocol.md)', 'sha256 of "abc"', 'HMAC-SHA256', 'v8.4.0']) {
    t.same(historyPhrases(ok), [], `passes "${ok}"`);
  }
});

t.test('documents say what is true now and point only to shipped files', async (t) => {
  const files = [...docs(), 'CHANGELOG.md'];
  for (const f of files) t.same(historyPhrases(fs.readFileSync(path.join(ROOT, f), 'utf8')), [], f);
  // The client plug-ins ship in the package: their comments name docs/, not the project's notes.
  for (const f of fs.readdirSync(path.join(ROOT, 'client'))) {
    const text = fs.readFileSync(path.join(ROOT, 'client', f), 'utf8');
    t.notOk(UNSHIPPED.some((re) => re.test(text)), `client/${f} names no unshipped file`);
  }
});

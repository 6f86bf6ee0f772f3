#!/usr/bin/env node
// Reference checks of the C tokenizer (./prepare_data) against js-tiktoken's "gpt2" encoding,
// run at test time. Used by tests/test_tokenizer.sh. Each subcommand prints what it checked
// and exits non-zero on the first difference, showing the text around it.
//
//   node tests/tiktoken_ref.js shard TXT BIN       BIN's tokens == js-tiktoken(TXT, <|endoftext|> allowed)
//   node tests/tiktoken_ref.js nlp PREP TOK        whole nlp-corpus, one sentence per line
//   node tests/tiktoken_ref.js nasty PREP TOK      hand-written hard strings, one process each
//   node tests/tiktoken_ref.js unicode PREP TOK N  N random strings over many scripts/whitespace
//   node tests/tiktoken_ref.js roundtrip PREP TOK N  decode(encode(x)) == x for random bytes
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const root = path.resolve(__dirname, '..');
let enc;
try {
  enc = require(path.join(root, 'node_modules', 'js-tiktoken')).getEncoding('gpt2');
} catch (e) {
  console.error('SKIP: js-tiktoken not installed (run: bash scripts/setup.sh): ' + e.message);
  process.exit(77);
}

const ordinary = (s) => enc.encode(s, [], []);           // "<|endoftext|>" as plain text
const withSpecial = (s) => enc.encode(s, 'all');

function die(msg) { console.error('FAIL: ' + msg); process.exit(1); }

function cEncode(prep, tok, buf) {
  const r = spawnSync(prep, ['--encode', '--tokenizer', tok], { input: buf, maxBuffer: 1 << 30 });
  if (r.status !== 0) die(`${prep} --encode exited ${r.status}${r.signal ? ' (' + r.signal + ')' : ''}: ${r.stderr}`);
  const s = r.stdout.toString().trim();
  return s ? s.split('\n').map(Number) : [];
}

function cDecode(prep, tok, ids) {
  const r = spawnSync(prep, ['--decode', '--tokenizer', tok], { input: ids.join('\n') + '\n', maxBuffer: 1 << 30 });
  if (r.status !== 0) die(`${prep} --decode exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

const show = (ids) => JSON.stringify(enc.decode(ids));

// compares token lists; on a difference prints the neighbourhood and exits
function compare(what, got, want) {
  const n = Math.min(got.length, want.length);
  let i = 0;
  while (i < n && got[i] === want[i]) i++;
  if (i === n && got.length === want.length) return;
  const a = Math.max(0, i - 8);
  die(`${what}: first difference at token ${i} (C ${got.length} tokens, js-tiktoken ${want.length})\n` +
      `  context: ${show(want.slice(a, i))}\n` +
      `  C:           ${JSON.stringify(got.slice(i, i + 8))} ${show(got.slice(i, i + 8).filter((x) => x >= 0 && x < 50257))}\n` +
      `  js-tiktoken: ${JSON.stringify(want.slice(i, i + 8))} ${show(want.slice(i, i + 8))}`);
}

function readShard(file) {
  const b = fs.readFileSync(file);
  if (b.length < 1024) die(`${file}: shorter than the 1024-byte header`);
  const magic = b.readInt32LE(0), version = b.readInt32LE(4), n = b.readUInt32LE(8);
  if (magic !== 20240520 || version !== 1) die(`${file}: bad header (magic ${magic}, version ${version})`);
  if (b.length !== 1024 + 2 * n) die(`${file}: header says ${n} tokens, file has ${(b.length - 1024) / 2}`);
  const out = new Array(n);
  for (let i = 0; i < n; i++) out[i] = b.readUInt16LE(1024 + 2 * i);
  return out;
}

// deterministic PRNG (mulberry32)
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NASTY = [
  '', ' ', '  ', '\n', '\r\n', 'a', 'Hello world', 'Hello world!\r\nSecond line\r\n\r\n',
  'tabs\tand\t\ttabs \t mixed\t', 'multiple   spaces    here     ', 'trailing spaces   ', '   leading spaces',
  'trailing newline\n', 'trailing spaces and newline  \n', ' \n \n\n   \n\t\n',
  "it's they're we've I'm you'll he'd can't won't IT'S THEY'RE O'Neil 's 't",
  "'s'''t''re' 've 'm 'll 'd", 'numbers 1 12 123 1234 12345 3.14159 1,000,000 -42 +7 1e10 0x1F 2024-01-01',
  '١٢٣ ٤٥ Ⅻ ½ ² ³ ① 𝟙𝟚𝟛', 'CJK: 中文字符测试，日本語のテキスト。한국어 텍스트',
  'emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷 🏳️‍🌈 ❤️ ✨', 'combining: e\u0301 a\u0300\u0316 n\u0303 Z\u0337\u0335\u0334a\u0336lgo',
  'Zalgo: Ḩ̷̛ȩ̶ ̸c̴o̵m̷e̶s̸', 'nbsp\u00a0here\u00a0\u00a0and\u2003em\u2009thin\u202fnarrow\u3000ideo',
  'line\u2028sep\u2029para', 'bom\ufeffin\ufeffthe\ufeff middle', 'nel\u0085next\u180emongolian',
  'control \u0001\u0002\u001b[31m red \u001b[0m \u0000 nul', 'unit sep \u001c\u001d\u001e\u001f end',
  '<|endoftext|> is ordinary text here <|endoftext|>', 'url: https://example.com/a/b?c=d&e=f#g',
  'code: if (x == 1) { return y->z[0]; } // comment', 'email: someone@example.org',
  '!!!???...,,,;;;:::---___***', '"quoted" \'single\' `back` «guillemets» „low“ ‘curly’',
  'Ελληνικά κείμενο Русский текст עברית العربية हिन्दी ไทย', 'mixed123abc ABC123 a1b2c3',
  'x'.repeat(300), ' '.repeat(300) + 'y', '\n'.repeat(50), 'ab'.repeat(500), '1234567890'.repeat(30),
  'supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis',
  '\t\t\tindented\n\t\t\tcode\n', "new unicode: \u{31350}\u{2EBF0}'t \u{1E4D0}'s \u{1CCF0}'ll \u{11F04}x",
  'private use \uE000\uF8FF \u{F0000} unassigned \u0378 \u{E0001}', 'ﬁ ﬂ ligatures Å Å Ω Ω',
  'a \n b \r c \t d \u000b e \u000c f', '   \n\n   \n   x',
];

function nasty(prep, tok) {
  for (const [i, s] of NASTY.entries()) compare(`nasty string ${i} ${JSON.stringify(s.slice(0, 40))}`, cEncode(prep, tok, Buffer.from(s, 'utf8')), ordinary(s));
  console.log(`nasty strings: ${NASTY.length} strings (CRLF, tabs, spaces, numbers, contractions, CJK, emoji, combining marks, Unicode whitespace, new Unicode letters) identical to js-tiktoken`);
}

function unicode(prep, tok, count) {
  const r = rng(12345);
  const pools = [
    () => String.fromCharCode(32 + Math.floor(r() * 95)),                          // printable ASCII
    () => ' \t\n\r\u000b\u000c'[Math.floor(r() * 6)],
    () => ['\u00a0', '\u1680', '\u2000', '\u2005', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff', '\u0085', '\u180e', '\u001c', '\u200b'][Math.floor(r() * 15)],
    () => ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'"][Math.floor(r() * 9)],
    () => String.fromCodePoint(0x4e00 + Math.floor(r() * 0x5000)),                // CJK
    () => String.fromCodePoint(0x1f300 + Math.floor(r() * 0x300)),                 // emoji
    () => String.fromCodePoint(0x300 + Math.floor(r() * 0x70)),                    // combining
    () => String.fromCodePoint(0x370 + Math.floor(r() * 0x700)),                   // Greek .. Arabic
    () => String.fromCodePoint(0x900 + Math.floor(r() * 0x800)),                   // Indic, Thai
    () => { let c; do { c = Math.floor(r() * 0x110000); } while (c >= 0xd800 && c < 0xe000); return String.fromCodePoint(c); },
    () => { let c; do { c = 0x10000 + Math.floor(r() * 0x30000); } while (false); return String.fromCodePoint(c); },
    () => String.fromCodePoint(0x660 + Math.floor(r() * 10)) + String.fromCodePoint(0x2160 + Math.floor(r() * 16)),
  ];
  let text = '';
  const parts = [];
  for (let k = 0; k < count; k++) {
    let s = '';
    const len = 1 + Math.floor(r() * 30);
    for (let j = 0; j < len; j++) s += pools[Math.floor(r() * pools.length)]();
    parts.push(s);
  }
  text = parts.join('');
  const t0 = Date.now();
  compare('random unicode text', cEncode(prep, tok, Buffer.from(text, 'utf8')), ordinary(text));
  // a few dozen of them alone, so that string starts and ends are exercised
  for (let k = 0; k < 40; k++) compare(`random unicode string ${k} ${JSON.stringify(parts[k])}`, cEncode(prep, tok, Buffer.from(parts[k], 'utf8')), ordinary(parts[k]));
  console.log(`random unicode: ${count} random strings (${Buffer.byteLength(text)} bytes, all planes, JS whitespace set) identical to js-tiktoken (${Date.now() - t0} ms)`);
}

function nlp(prep, tok) {
  const dir = path.join(root, 'node_modules', 'nlp-corpus', 'builds');
  const files = fs.readdirSync(dir).filter((f) => /^doc-\d+\.json$/.test(f)).sort((a, b) => parseInt(a.slice(4)) - parseInt(b.slice(4)));
  const sentences = [];
  for (const f of files) sentences.push(...JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')));
  const text = sentences.join('\n');
  const buf = Buffer.from(text, 'utf8');
  let t0 = Date.now();
  const got = cEncode(prep, tok, buf);
  const tc = Date.now() - t0;
  t0 = Date.now();
  const want = ordinary(text);
  const tj = Date.now() - t0;
  compare('nlp-corpus', got, want);
  const nonAscii = [...text].filter((c) => c.codePointAt(0) > 127).length;
  console.log(`nlp-corpus: ${files.length} files, ${sentences.length} sentences, ${buf.length} bytes (${nonAscii} non-ASCII characters) -> ${got.length} tokens identical to js-tiktoken (C ${tc} ms incl. process start, js ${tj} ms)`);
}

function shard(txt, bin) {
  const text = fs.readFileSync(txt, 'utf8');
  const got = readShard(bin);
  const t0 = Date.now();
  const want = withSpecial(text);
  compare(`${bin} vs ${txt}`, got, want);
  const docs = got.filter((x) => x === 50256).length;
  console.log(`${bin}: ${got.length} tokens, ${docs} documents, identical to js-tiktoken on ${txt} (${Buffer.byteLength(text)} bytes, js ${Date.now() - t0} ms)`);
}

function roundtrip(prep, tok, count) {
  const r = rng(777);
  const byte = () => Math.floor(r() * 256);
  const gens = [
    () => Buffer.from(Array.from({ length: Math.floor(r() * 64) }, byte)),                     // random bytes
    () => Buffer.from(Array.from({ length: Math.floor(r() * 64) }, () => 0x80 + Math.floor(r() * 128))), // continuation/lead bytes only
    () => {                                                                                    // valid UTF-8 with damage
      const parts = [];
      const n = 1 + Math.floor(r() * 20);
      for (let k = 0; k < n; k++) {
        const c = r();
        if (c < 0.3) parts.push(Buffer.from('word '));
        else if (c < 0.4) parts.push(Buffer.from([0xed, 0xa0, 0x80]));                        // encoded surrogate
        else if (c < 0.5) parts.push(Buffer.from([0xc0, 0x80]));                              // overlong NUL
        else if (c < 0.6) parts.push(Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80]));            // 5-byte form
        else if (c < 0.7) parts.push(Buffer.from([0xf4, 0x90, 0x80, 0x80]));                  // above U+10FFFF
        else if (c < 0.8) parts.push(Buffer.from('中文😀').subarray(0, Math.floor(r() * 10)));  // truncated sequences
        else if (c < 0.9) parts.push(Buffer.from([0xff, 0xfe, 0x20, 0x0a, 0x0d, 0x09]));
        else parts.push(Buffer.from(' \u00a0\u3000 é', 'utf8'));
      }
      return Buffer.concat(parts);
    },
  ];
  let total = 0, tokens = 0;
  const cases = [];
  for (let k = 0; k < count; k++) cases.push(gens[k % gens.length]());
  cases.push(Buffer.from(Array.from({ length: 200000 }, byte)));                               // one large blob
  for (const [k, x] of cases.entries()) {
    const ids = cEncode(prep, tok, x);
    if (ids.some((id) => !(id >= 0 && id < 50256))) die(`roundtrip case ${k}: token id out of range in ${JSON.stringify(ids)}`);
    const y = cDecode(prep, tok, ids);
    if (!x.equals(y)) die(`roundtrip case ${k}: decode(encode(x)) != x for x = ${x.toString('hex').slice(0, 200)}`);
    total += x.length; tokens += ids.length;
  }
  console.log(`roundtrip: decode(encode(x)) == x for ${cases.length} random byte strings (${total} bytes, invalid UTF-8 included, ${tokens} tokens)`);
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'shard') shard(args[0], args[1]);
else if (cmd === 'nlp') nlp(args[0], args[1]);
else if (cmd === 'nasty') nasty(args[0], args[1]);
else if (cmd === 'unicode') unicode(args[0], args[1], parseInt(args[2] || '3000', 10));
else if (cmd === 'roundtrip') roundtrip(args[0], args[1], parseInt(args[2] || '150', 10));
else die('usage: tiktoken_ref.js shard|nlp|nasty|unicode|roundtrip ...');

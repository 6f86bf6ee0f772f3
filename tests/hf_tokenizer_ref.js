#!/usr/bin/env node
// The tokenizer files ./export_model writes (tools/hf_tokenizer.h) against references, at test
// time; used by tests/test_hf_tokenizer.sh. Exits non-zero on the first difference.
//
//   node tests/hf_tokenizer_ref.js DIR TEXT
//
// 1. vocab.json: 50257 entries; each token's text, read back through GPT-2's bytes_to_unicode
//    (encoder.py's, written out below), is the bytes of the same id in js-tiktoken's "gpt2"
//    encoding; "<|endoftext|>" is 50256, its special token.
// 2. merges.txt: "#version: 0.2", then 50000 merges, merge k joining two tokens into token 256 + k
//    (the rank tiktoken gives the joined bytes).
// 3. tokenizer.json holds the same vocabulary and merges; its special token and
//    tokenizer_config.json's and special_tokens_map.json's are <|endoftext|>.
// 4. Hugging Face's own tokenizers.js (@huggingface/tokenizers) loads tokenizer.json with
//    tokenizer_config.json and encodes TEXT line by line, and hand-written hard strings, as
//    js-tiktoken does, token for token; it decodes them back to the same text. "<|endoftext|>"
//    inside a text is the special token for Hugging Face, plain text for tiktoken's
//    encode_ordinary: those lines are compared as transformers encodes them.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
let enc, Tokenizer;
try {
  enc = require(path.join(root, 'node_modules', 'js-tiktoken')).getEncoding('gpt2');
  ({ Tokenizer } = require(path.join(root, 'node_modules', '@huggingface', 'tokenizers')));
} catch (e) {
  console.error('SKIP: js-tiktoken or @huggingface/tokenizers not installed (run: bash scripts/setup.sh): ' + e.message);
  process.exit(77);
}

function die(msg) { console.error('FAIL: ' + msg); process.exit(1); }
const dir = process.argv[2], textPath = process.argv[3];
if (!dir || !textPath) die('usage: node tests/hf_tokenizer_ref.js DIR TEXT');
const readJson = (name) => {
  try { return JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')); } catch (e) { die(`${name}: ${e.message}`); }
};
const EOT = '<|endoftext|>';

// GPT-2's bytes_to_unicode (openai/gpt-2 encoder.py)
const bs = [];
for (let b = 33; b <= 126; b++) bs.push(b);
for (let b = 161; b <= 172; b++) bs.push(b);
for (let b = 174; b <= 255; b++) bs.push(b);
const cs = bs.slice();
for (let b = 0, n = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
const charToByte = new Map(bs.map((b, i) => [String.fromCharCode(cs[i]), b]));
const tokenBytes = (s) => [...s].map((c) => {
  if (!charToByte.has(c)) die(`token text ${JSON.stringify(s)} has the character U+${c.codePointAt(0).toString(16)}, not in bytes_to_unicode`);
  return charToByte.get(c);
});
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// 1. vocab.json
const vocab = readJson('vocab.json');
const entries = Object.entries(vocab);
if (entries.length !== 50257) die(`vocab.json: ${entries.length} entries, expected 50257`);
if (vocab[EOT] !== 50256 || enc.specialTokens[EOT] !== 50256) die(`vocab.json: ${EOT} is ${vocab[EOT]}, js-tiktoken's is ${enc.specialTokens[EOT]}`);
const seen = new Set();
for (const [text, id] of entries) {
  if (seen.has(id)) die(`vocab.json: id ${id} appears twice`);
  seen.add(id);
  if (text === EOT) continue;
  const want = enc.textMap.get(id);
  if (!want || !same(tokenBytes(text), [...want])) die(`vocab.json: ${JSON.stringify(text)} is ${id}; js-tiktoken's ${id} is bytes [${want}]`);
}
console.log(`vocab.json: 50257 tokens, each the bytes of js-tiktoken's gpt2 token of the same id (GPT-2's bytes_to_unicode); ${EOT} = 50256`);

// 2. merges.txt
const lines = fs.readFileSync(path.join(dir, 'merges.txt'), 'utf8').split('\n');
if (lines[0] !== '#version: 0.2' || lines[lines.length - 1] !== '') die('merges.txt: expected "#version: 0.2" first and a newline at the end');
const merges = lines.slice(1, -1);
if (merges.length !== 50000) die(`merges.txt: ${merges.length} merges, expected 50000`);
merges.forEach((m, k) => {
  const parts = m.split(' ');
  if (parts.length !== 2) die(`merges.txt line ${k + 2}: ${JSON.stringify(m)} is not two tokens`);
  const [a, b] = parts.map(tokenBytes);
  const rank = enc.rankMap.get([...a, ...b].join(','));
  if (rank !== 256 + k || enc.rankMap.get(a.join(',')) === undefined || enc.rankMap.get(b.join(',')) === undefined)
    die(`merges.txt line ${k + 2}: ${JSON.stringify(m)} joins into tiktoken rank ${rank}, expected ${256 + k}`);
});
console.log('merges.txt: 50000 merges, merge k joins two tokens into tiktoken\'s token 256 + k');

// 3. tokenizer.json, tokenizer_config.json, special_tokens_map.json
const tj = readJson('tokenizer.json'), tc = readJson('tokenizer_config.json'), sm = readJson('special_tokens_map.json');
const mv = tj.model && tj.model.vocab, mm = tj.model && tj.model.merges;
if (!tj.model || tj.model.type !== 'BPE') die('tokenizer.json: model.type is not "BPE"');
if (Object.keys(mv).length !== 50257 || entries.some(([t, id]) => mv[t] !== id)) die('tokenizer.json: model.vocab differs from vocab.json');
if (!Array.isArray(mm) || !same(mm, merges)) die('tokenizer.json: model.merges differ from merges.txt');
const added = tj.added_tokens || [];
if (added.length !== 1 || added[0].id !== 50256 || added[0].content !== EOT || !added[0].special) die(`tokenizer.json: added_tokens ${JSON.stringify(added)}`);
for (const [name, j] of [['tokenizer_config.json', tc], ['special_tokens_map.json', sm]])
  for (const k of ['bos_token', 'eos_token', 'unk_token']) if (j[k] !== EOT) die(`${name}: ${k} is ${JSON.stringify(j[k])}, expected ${EOT}`);
if (tc.tokenizer_class !== 'GPT2Tokenizer') die(`tokenizer_config.json: tokenizer_class ${tc.tokenizer_class}`);
console.log(`tokenizer.json: the same vocabulary and merges, ${EOT} its special token; bos, eos and unk are ${EOT}`);

// 4. Hugging Face's tokenizers.js against js-tiktoken
const hf = new Tokenizer(tj, tc);
const hfEncode = (s) => hf.encode(s, { add_special_tokens: false }).ids;
const tiktoken = (s) => enc.encode(s, s.includes(EOT) ? 'all' : [], []);
const hard = ["Hello world, it's 2024!", ' leading space', 'trailing space ', 'a  b   c\n\n\nd', "I'll've 'S 'LL",
  '\u4e2d\u6587 caf\u00e9 na\u00efve \u{1F600}\u{1F3FD}', 'x\u00a0y\u2003z\t\r\n', 'numbers 1234567 3.14159 0x1f', '', ' ',
  '\u0000\u0001 control', 'tab\there', `${EOT}The start`];
const text = fs.readFileSync(textPath, 'utf8').split('\n').concat(hard);
let tokens = 0;
for (const [i, line] of text.entries()) {
  const got = hfEncode(line), want = tiktoken(line);
  if (!same(got, want)) die(`line ${i + 1} ${JSON.stringify(line.slice(0, 80))}: tokenizers.js ${JSON.stringify(got.slice(0, 12))}, js-tiktoken ${JSON.stringify(want.slice(0, 12))}`);
  const back = got.length ? hf.decode(got, { skip_special_tokens: false }) : '';
  if (back !== line) die(`line ${i + 1}: tokenizers.js decodes ${JSON.stringify(back.slice(0, 80))}, not the text`);
  tokens += got.length;
}
console.log(`tokenizers.js: ${text.length} lines of ${path.basename(textPath)} and hand-written strings, ${tokens} tokens, ` +
            'encoded as js-tiktoken encodes them and decoded back to the text');

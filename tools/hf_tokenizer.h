// tools/hf_tokenizer.h: the tokenizer files of a Hugging Face model folder, written from zeroc's
// GPT-2 tokenizer file (tokenizer.h) by tools/export_model.c, so that AutoTokenizer.from_pretrained
// loads the exported folder as AutoModelForCausalLM does:
//   vocab.json               {token: id}, byte for byte GPT-2's encoder.json: each token's bytes
//                            spelled with GPT-2's bytes_to_unicode, written as Python's json.dumps did
//   merges.txt               "#version: 0.2", then the 50000 merges in rank order: GPT-2's vocab.bpe
//   tokenizer.json           the same vocabulary and merges for the tokenizers library (GPT2TokenizerFast,
//                            and transformers 5's GPT2Tokenizer): a byte-level BPE with GPT-2's split
//                            pattern, <|endoftext|> its one special token, as the Hub's gpt2 folder has it
//   tokenizer_config.json    GPT2Tokenizer; <|endoftext|> as bos, eos and unk; no prefix space, no bos added
//   special_tokens_map.json  the same three special tokens
// Only the merges are not in zeroc's file: tokenizer_merge_pair recovers each from the ranks.
// One difference stays: transformers reads "<|endoftext|>" written in a text as the special
// token, zeroc's data tools as plain text (tokenizer.h's encode_ordinary).
#pragma once
#include "tokenizer.h"

#define HF_EOT_TEXT "<|endoftext|>"

// A token as GPT-2's files spell it, a JSON string with its quotes (json.dumps' ASCII escapes:
// \" and \\, \uXXXX for every character past '~'). EOT is its text.
static void hf_token_json(FILE *f, const Tokenizer *t, int id) {
    size_t n;
    const unsigned char *s = tokenizer_decode(t, id, &n);
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        int c = id == t->eot ? s[i] : gpt2_byte_to_unicode(s[i]);
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c >= ' ' && c <= '~') fputc(c, f);
        else fprintf(f, "\\u%04x", c);
    }
    fputc('"', f);
}

// A merge's half as merges.txt spells it: the mapped characters in UTF-8 (all below U+0800);
// in_json: inside a JSON string, where " and \ are escaped.
static void hf_token_text(FILE *f, const Tokenizer *t, int id, int in_json) {
    size_t n;
    const unsigned char *s = tokenizer_decode(t, id, &n);
    for (size_t i = 0; i < n; i++) {
        int c = gpt2_byte_to_unicode(s[i]);
        if (in_json && (c == '"' || c == '\\')) fprintf(f, "\\%c", c);
        else if (c < 0x80) fputc(c, f);
        else { fputc(0xC0 | (c >> 6), f); fputc(0x80 | (c & 0x3F), f); }
    }
}

// {"!": 0, ..., "<|endoftext|>": 50256}: the ids in order, encoder.json's separators
static void hf_vocab_object(FILE *f, const Tokenizer *t) {
    fputc('{', f);
    for (int id = 0; id < t->vocab_size; id++) {
        if (id) fputs(", ", f);
        hf_token_json(f, t, id);
        fprintf(f, ": %d", id);
    }
    fputc('}', f);
}

// The merges in rank order, each as "left right" (merges.txt's lines, tokenizer.json's strings).
// `sep` goes between them, `quote` around each.
static void hf_merges(FILE *f, Tokenizer *t, const char *sep, const char *quote) {
    for (int id = 0, k = 0; id < t->vocab_size; id++) {
        int l, r;
        if (!tokenizer_merge_pair(t, id, &l, &r)) continue;
        if (id != 256 + k) fatal("%s: token %d is a merge, but merges make tokens 256, 257, ... in order", t->path, id);
        fprintf(f, "%s%s", k++ ? sep : "", quote);
        hf_token_text(f, t, l, quote[0] != 0);
        fputc(' ', f);
        hf_token_text(f, t, r, quote[0] != 0);
        fputs(quote, f);
    }
}

// writes one file of dir atomically through `body`
typedef void (*HfBody)(FILE *f, Tokenizer *t, int max_len);
static void hf_tokenizer_file(const char *dir, const char *name, HfBody body, Tokenizer *t, int max_len) {
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    AtomicFile a = atomic_open(path);
    body(a.f, t, max_len);
    if (ferror(a.f)) out_fail(&a, "write failed", errno ? errno : EIO);   // a buffered write failed: nothing renamed
    atomic_commit(&a);
}

static void hf_write_vocab(FILE *f, Tokenizer *t, int max_len) { (void)max_len; hf_vocab_object(f, t); }

static void hf_write_merges(FILE *f, Tokenizer *t, int max_len) {
    (void)max_len;
    fputs("#version: 0.2\n", f);
    hf_merges(f, t, "\n", "");
    fputs("\n", f);
}

// The special token as tokenizer.json's added_tokens (with its id) and tokenizer_config.json's
// added_tokens_decoder (keyed by it: transformers makes an AddedToken of the rest) describe it.
static void hf_added_token(FILE *f, int id, int with_id) {
    if (with_id) fprintf(f, "{\"id\": %d, ", id);
    else fputc('{', f);
    fputs("\"content\": \"" HF_EOT_TEXT "\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
          "\"normalized\": true, \"special\": true}", f);
}

// The byte-level pieces: the pre-tokenizer splits with GPT-2's pattern (use_regex) and maps bytes
// to characters; the decoder maps them back. No prefix space, as GPT-2 and zeroc encode.
static void hf_write_tokenizer_json(FILE *f, Tokenizer *t, int max_len) {
    (void)max_len;
    const char *byte_level = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}";
    fputs("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [", f);
    hf_added_token(f, t->eot, 1);
    fprintf(f, "],\n  \"normalizer\": null,\n  \"pre_tokenizer\": %s,\n  \"post_processor\": {\"type\": \"ByteLevel\", "
               "\"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true},\n  \"decoder\": %s,\n", byte_level, byte_level);
    fputs("  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": \"\", "
          "\"end_of_word_suffix\": \"\", \"fuse_unk\": false, \"byte_fallback\": false,\n    \"vocab\": ", f);
    hf_vocab_object(f, t);
    fputs(",\n    \"merges\": [", f);
    hf_merges(f, t, ", ", "\"");
    fputs("]}\n}\n", f);
}

static void hf_write_tokenizer_config(FILE *f, Tokenizer *t, int max_len) {
    fputs("{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"added_tokens_decoder\": {", f);
    fprintf(f, "\"%d\": ", t->eot);
    hf_added_token(f, t->eot, 0);
    fprintf(f, "},\n  \"bos_token\": \"" HF_EOT_TEXT "\",\n  \"eos_token\": \"" HF_EOT_TEXT "\",\n  \"unk_token\": \"" HF_EOT_TEXT "\",\n"
               "  \"add_prefix_space\": false,\n  \"add_bos_token\": false,\n  \"errors\": \"replace\",\n"
               "  \"clean_up_tokenization_spaces\": false,\n  \"model_max_length\": %d\n}\n", max_len);
}

static void hf_write_special_tokens(FILE *f, Tokenizer *t, int max_len) {
    (void)t; (void)max_len;
    fputs("{\"bos_token\": \"" HF_EOT_TEXT "\", \"eos_token\": \"" HF_EOT_TEXT "\", \"unk_token\": \"" HF_EOT_TEXT "\"}\n", f);
}

// Whether t is GPT-2's kind of tokenizer: its end-of-text token is <|endoftext|>. Returns 1, or 0 with err.
static int hf_tokenizer_usable(const Tokenizer *t, char *err, size_t errn) {
    size_t n;
    const unsigned char *eot = tokenizer_decode(t, t->eot, &n);
    if (n == strlen(HF_EOT_TEXT) && memcmp(eot, HF_EOT_TEXT, n) == 0) return 1;
    snprintf(err, errn, "%s: the end-of-text token %d is '%.*s', not " HF_EOT_TEXT ": not GPT-2's tokenizer", t->path, t->eot, (int)n, eot);
    return 0;
}

// The five files into dir, for a model of max_len positions.
static void hf_tokenizer_write(Tokenizer *t, const char *dir, int max_len) {
    hf_tokenizer_file(dir, "vocab.json", hf_write_vocab, t, max_len);
    hf_tokenizer_file(dir, "merges.txt", hf_write_merges, t, max_len);
    hf_tokenizer_file(dir, "tokenizer.json", hf_write_tokenizer_json, t, max_len);
    hf_tokenizer_file(dir, "tokenizer_config.json", hf_write_tokenizer_config, t, max_len);
    hf_tokenizer_file(dir, "special_tokens_map.json", hf_write_special_tokens, t, max_len);
}

#!/usr/bin/env python3
"""The demo's last word: how far the loss fell, against what word frequencies alone give.

    demo_summary.py LOG.jsonl TRAIN.bin VAL.bin

Prints the train loss averaged over the first and last tenth of the steps, every val loss, and the
cross-entropy on VAL of the unigram model of TRAIN (token frequencies, add-0.1 smoothing): a model
below it predicts from context, not only from how common a token is. Standard library only.
"""
import array, collections, json, math, sys


def tokens(path):
    a = array.array("H")
    with open(path, "rb") as f:
        f.seek(1024)
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return a


def main():
    log, train_path, val_path = sys.argv[1:4]
    recs = [json.loads(line) for line in open(log)]
    train = [r["loss"] for r in recs if r.get("type") == "train"]
    val = [(r["step"], r["val_loss"]) for r in recs if r.get("type") == "val"]
    if not train:
        sys.exit("demo_summary: no train records in %s" % log)
    k = max(1, len(train) // 10)
    counts = collections.Counter(tokens(train_path))
    V, total = 50257, sum(counts.values())
    val_tokens = tokens(val_path)
    unigram = -sum(math.log((counts.get(t, 0) + 0.1) / (total + 0.1 * V)) for t in val_tokens) / len(val_tokens)
    print("demo: train loss %.2f (mean of steps 1-%d) -> %.2f (mean of the last %d steps)" % (sum(train[:k]) / k, k, sum(train[-k:]) / k, k))
    print("demo: val loss   " + "  ".join("%d: %.2f" % sv for sv in val))
    print("demo: word frequencies alone (unigram of the train data) give %.2f on val; uniform over the vocabulary %.2f" % (unigram, math.log(V)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Reference retrieval engines for bench/retrieval.ts, run with Debian's /usr/bin/python3
(apt-get install python3-sklearn python3-scipy python3-numpy).

  /usr/bin/python3 bench/python/ir_reference.py <BEIR folder> [--topk 10] [--max-queries N]
                                                [--max-docs N] [--engines tfidf,bm25]

The folder holds corpus.jsonl ({_id,title,text}; a document is title + " " + text), queries.jsonl
({_id,text}) and, optionally, qrels.tsv. Two engines:

- tfidf: scikit-learn TfidfVectorizer(sublinear_tf=True, stop_words='english'); rows are L2-normalised,
  so X @ q is the cosine; top k by argpartition.
- bm25: Okapi BM25 (k1 1.2, b 0.75, Lucene's idf ln(1 + (N - df + 0.5)/(df + 0.5))) in numpy/scipy:
  CountVectorizer(stop_words='english') term counts, the per-posting BM25 weights precomputed into a
  sparse term × document matrix (CSR), a query sums the rows of its terms (times their query counts).

Build time = vectorising the corpus + precomputing the weights (reading the files excluded). Query time
= analysing the query + scoring + top-k selection, per query, one after another (after a warm-up).
Prints one JSON object on stdout. nDCG@10 / R@100 (trec_eval-style) when qrels exist.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp
import sklearn
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path):
    qrels = {}
    if not os.path.exists(path):
        return qrels
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) < 3:
                continue
            try:
                score = float(fields[2])
            except ValueError:
                continue  # header
            qrels.setdefault(fields[0], {})[fields[1]] = score
    return qrels


def top_k(scores, k):
    """Indices of the k best scores (score descending), like a heap-based top-k."""
    n = scores.shape[0]
    if k >= n:
        idx = np.arange(n)
    else:
        idx = np.argpartition(-scores, k - 1)[:k]
    idx = idx[scores[idx] > 0]
    return idx[np.lexsort((idx, -scores[idx]))]


def ndcg_recall(run, qrels, doc_ids):
    ndcg = recall = 0.0
    for qid, judgments in qrels.items():
        hits = run.get(qid, [])
        ranked = sorted(((float(s), doc_ids[d]) for d, s in hits), key=lambda x: (-x[0], _neg(x[1])))
        dcg = sum(
            max(0.0, judgments.get(doc, 0.0)) / math.log2(i + 2) for i, (_, doc) in enumerate(ranked[:10])
        )
        ideal = sorted((g for g in judgments.values() if g > 0), reverse=True)
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:10]))
        ndcg += dcg / idcg if idcg > 0 else 0.0
        relevant = sum(1 for g in judgments.values() if g > 0)
        found = sum(1 for _, doc in ranked[:100] if judgments.get(doc, 0) > 0)
        recall += found / relevant if relevant else 0.0
    n = len(qrels)
    return (ndcg / n, recall / n) if n else (None, None)


class _neg(str):
    """Reverse string order (trec_eval breaks score ties by document id, descending)."""

    def __lt__(self, other):
        return str.__gt__(self, other)


def summarise(times_ms):
    a = np.sort(np.asarray(times_ms))
    return {
        "mean": float(a.mean()),
        "p50": float(a[len(a) // 2]),
        "p99": float(a[min(len(a) - 1, int(len(a) * 0.99))]),
    }


def run_tfidf(texts, queries, k, eval_queries):
    start = time.perf_counter()
    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english")
    matrix = vectorizer.fit_transform(texts).tocsr()  # documents × terms, rows L2-normalised
    matrix_t = matrix.T.tocsr()  # terms × documents, for row slicing
    build_ms = (time.perf_counter() - start) * 1000

    def search(text, k):
        q = vectorizer.transform([text])  # 1 × terms, L2-normalised
        if q.nnz == 0:
            return np.empty(0, dtype=np.int64), None
        scores = np.asarray((q @ matrix_t).todense()).ravel()
        return top_k(scores, k), scores

    return build_ms, search, len(vectorizer.vocabulary_), matrix.nnz


def run_bm25(texts, queries, k, eval_queries, k1=1.2, b=0.75):
    start = time.perf_counter()
    counter = CountVectorizer(stop_words="english")
    tf = counter.fit_transform(texts).tocsc().astype(np.float64)  # documents × terms
    n_docs = tf.shape[0]
    lengths = np.asarray(tf.sum(axis=1)).ravel()
    avgdl = lengths.mean() if n_docs else 1.0
    df = np.diff(tf.indptr)
    idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    norms = k1 * (1 - b + b * lengths / avgdl)
    # Per posting: idf · tf·(k1+1) / (tf + K_d), in CSC (column = term) order.
    rows = tf.indices
    data = tf.data
    term_of = np.repeat(np.arange(tf.shape[1]), df)
    weights = idf[term_of] * data * (k1 + 1) / (data + norms[rows])
    matrix_t = sp.csr_matrix((weights, rows, tf.indptr), shape=(tf.shape[1], n_docs))  # terms × docs
    vocabulary = counter.vocabulary_
    analyze = counter.build_analyzer()
    build_ms = (time.perf_counter() - start) * 1000

    def search(text, k):
        counts = {}
        for token in analyze(text):
            t = vocabulary.get(token)
            if t is not None:
                counts[t] = counts.get(t, 0) + 1
        if not counts:
            return np.empty(0, dtype=np.int64), None
        ids = np.fromiter(counts.keys(), dtype=np.int64)
        qtf = np.fromiter(counts.values(), dtype=np.float64)
        scores = np.asarray(sp.csr_matrix(qtf).dot(matrix_t[ids]).todense()).ravel()
        return top_k(scores, k), scores

    return build_ms, search, len(vocabulary), tf.nnz


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--topk", type=int, default=10)
    parser.add_argument("--max-queries", type=int, default=0)
    parser.add_argument("--max-docs", type=int, default=0, help="index only the first N documents")
    parser.add_argument("--engines", default="tfidf,bm25")
    args = parser.parse_args()

    corpus = read_jsonl(os.path.join(args.dir, "corpus.jsonl"))
    if args.max_docs:
        corpus = corpus[: args.max_docs]
    queries = read_jsonl(os.path.join(args.dir, "queries.jsonl"))
    qrels = read_qrels(os.path.join(args.dir, "qrels.tsv"))
    if qrels:
        queries = [q for q in queries if q["_id"] in qrels]
    if args.max_queries:
        queries = queries[: args.max_queries]
    texts = [f"{d.get('title') or ''} {d.get('text') or ''}" for d in corpus]
    doc_ids = [str(d["_id"]) for d in corpus]

    out = {
        "collection": args.dir,
        "documents": len(texts),
        "queries": len(queries),
        "topK": args.topk,
        "python": sys.version.split()[0],
        "versions": {"numpy": np.__version__, "scipy": scipy.__version__, "sklearn": sklearn.__version__},
        "engines": {},
    }
    runners = {"tfidf": run_tfidf, "bm25": run_bm25}
    for name in args.engines.split(","):
        build_ms, search, vocabulary, postings = runners[name](texts, queries, args.topk, qrels)
        for q in queries[:20]:  # warm-up
            search(q["text"], args.topk)
        times = []
        for q in queries:
            start = time.perf_counter()
            search(q["text"], args.topk)
            times.append((time.perf_counter() - start) * 1000)
        result = {
            "build_ms": build_ms,
            "query_ms": summarise(times),
            "vocabulary": vocabulary,
            "postings": int(postings),
        }
        if qrels:
            run = {}
            for q in queries:
                idx, scores = search(q["text"], 100)
                run[q["_id"]] = [] if scores is None else [(int(d), float(scores[d])) for d in idx]
            result["ndcg10"], result["recall100"] = ndcg_recall(run, qrels, doc_ids)
        out["engines"][name] = result
    out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

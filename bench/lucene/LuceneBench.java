// The Lucene side of bench/segments.ts: the same corpus and queries, BM25, indexed and searched with
// Debian's Lucene 8 (liblucene8-java). bench/lib/lucene.ts compiles and runs it; it prints one JSON object.
//
//   java -Xmx2g -cp <lucene jars>:<classes> LuceneBench <corpus.txt> <queries.txt> <adds.txt> <index dir>
//        [--nrt-samples 200] [--delete-seed 42]
//
// Files hold one text per line (newlines inside a text were written as spaces: the analyzer splits on
// both alike). Document i of the corpus gets the id "d<i>"; the adds are "a<i>".
// Index: EnglishAnalyzer (Lucene's English stop words, possessives, Porter stemming) and
// BM25Similarity(1.2, 0.75), on disk in an MMapDirectory wrapped in an NRTCachingDirectory (Lucene's
// advice for near-real-time search: small flushed segments stay in memory until merged or committed),
// one stored StringField "id" and one unstored TextField "body"; the other settings are Lucene's
// defaults (TieredMergePolicy, compound files for small segments) but a 256 MB indexing buffer. Queries: each query's analysed terms as SHOULD clauses (what a QueryParser with the
// default OR operator builds), top 10, one warm-up pass then one timed pass, once the merges the
// indexing started have ended.
// Near-real-time writes: addDocument (or deleteDocuments by id) followed by
// DirectoryReader.openIfChanged(reader, writer), which makes the change visible to new searches.

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.MMapDirectory;
import org.apache.lucene.store.NRTCachingDirectory;
import org.apache.lucene.util.Version;

public final class LuceneBench {
  private static final int TOP_K = 10;
  private static final double RAM_BUFFER_MB = 256;

  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: LuceneBench <corpus.txt> <queries.txt> <adds.txt> <index dir> [--nrt-samples N] [--delete-seed S]");
      System.exit(2);
    }
    Path corpus = Paths.get(args[0]);
    List<String> queries = readLines(Paths.get(args[1]));
    List<String> adds = readLines(Paths.get(args[2]));
    Path indexDir = Paths.get(args[3]);
    int nrtSamples = 200;
    long deleteSeed = 42;
    for (int i = 4; i + 1 < args.length; i += 2) {
      if (args[i].equals("--nrt-samples")) nrtSamples = Integer.parseInt(args[i + 1]);
      else if (args[i].equals("--delete-seed")) deleteSeed = Long.parseLong(args[i + 1]);
      else throw new IllegalArgumentException("unknown option " + args[i]);
    }

    Analyzer analyzer = new EnglishAnalyzer();
    BM25Similarity similarity = new BM25Similarity(1.2f, 0.75f);
    StringBuilder json = new StringBuilder("{");
    json.append("\"lucene\":").append(quote(Version.LATEST.toString()));
    json.append(",\"java\":").append(quote(System.getProperty("java.vm.name") + " " + System.getProperty("java.version")));
    json.append(",\"maxHeapMB\":").append(Runtime.getRuntime().maxMemory() / (1024 * 1024));
    json.append(",\"directory\":\"NRTCachingDirectory(MMapDirectory, 5 MB, 60 MB)\"");
    json.append(",\"analyzer\":\"EnglishAnalyzer\"");
    json.append(",\"similarity\":\"BM25Similarity(k1=1.2, b=0.75)\"");
    json.append(",\"ramBufferMB\":").append(RAM_BUFFER_MB);

    try (NRTCachingDirectory directory = new NRTCachingDirectory(new MMapDirectory(indexDir), 5.0, 60.0)) {
      // Bulk indexing, then a commit: what a one-shot build costs. Closing the writer waits for the
      // background merges the indexing started, so that none shares the CPU with the timed queries.
      long start = System.nanoTime();
      int documents = 0;
      try (IndexWriter writer = new IndexWriter(directory, writerConfig(analyzer, similarity, IndexWriterConfig.OpenMode.CREATE))) {
        try (BufferedReader reader = Files.newBufferedReader(corpus, StandardCharsets.UTF_8)) {
          String line;
          while ((line = reader.readLine()) != null) {
            writer.addDocument(document("d" + documents, line));
            documents++;
          }
        }
        writer.commit();
        json.append(",\"documents\":").append(documents);
        json.append(",\"indexMs\":").append(fmt(millisSince(start)));
      }
      json.append(",\"mergesSettledMs\":").append(fmt(millisSince(start)));

      try (IndexWriter writer = new IndexWriter(directory, writerConfig(analyzer, similarity, IndexWriterConfig.OpenMode.APPEND))) {
        DirectoryReader reader = DirectoryReader.open(writer);
        json.append(",\"segmentsAfterIndexing\":").append(reader.leaves().size());
        json.append(",\"indexBytes\":").append(directorySize(indexDir));

        // Queries: one warm-up pass, then one timed pass.
        List<Query> parsed = new ArrayList<>();
        for (String q : queries) parsed.add(toQuery(analyzer, q));
        IndexSearcher searcher = searcher(reader, similarity);
        long hits = 0;
        for (Query q : parsed) hits += searcher.search(q, TOP_K).scoreDocs.length;
        double[] times = new double[parsed.size()];
        for (int i = 0; i < parsed.size(); i++) {
          long t = System.nanoTime();
          hits += searcher.search(parsed.get(i), TOP_K).scoreDocs.length;
          times[i] = millisSince(t);
        }
        json.append(",\"queries\":").append(parsed.size());
        json.append(",\"query\":").append(latency(times));

        // Near-real-time: add one document, reopen; delete one document, reopen; add one, commit.
        int samples = Math.min(nrtSamples, adds.size());
        double[] addReopen = new double[samples];
        for (int i = 0; i < samples; i++) {
          long t = System.nanoTime();
          writer.addDocument(document("a" + i, adds.get(i)));
          DirectoryReader next = DirectoryReader.openIfChanged(reader, writer);
          addReopen[i] = millisSince(t);
          if (next != null) {
            reader.close();
            reader = next;
          }
        }
        Random random = new Random(deleteSeed);
        double[] deleteReopen = new double[samples];
        for (int i = 0; i < samples; i++) {
          String id = "d" + random.nextInt(documents);
          long t = System.nanoTime();
          writer.deleteDocuments(new Term("id", id));
          DirectoryReader next = DirectoryReader.openIfChanged(reader, writer);
          deleteReopen[i] = millisSince(t);
          if (next != null) {
            reader.close();
            reader = next;
          }
        }
        int commitSamples = Math.min(samples, 50);
        double[] addCommit = new double[commitSamples];
        for (int i = 0; i < commitSamples; i++) {
          String text = adds.get((samples + i) % adds.size());
          long t = System.nanoTime();
          writer.addDocument(document("c" + i, text));
          writer.commit();
          addCommit[i] = millisSince(t);
        }
        json.append(",\"nrtAddReopen\":").append(latency(addReopen));
        json.append(",\"nrtDeleteReopen\":").append(latency(deleteReopen));
        json.append(",\"addCommit\":").append(latency(addCommit));
        json.append(",\"segmentsAtEnd\":").append(reader.leaves().size());
        json.append(",\"hitsReturned\":").append(hits);
        reader.close();
      }
    }
    Runtime runtime = Runtime.getRuntime();
    json.append(",\"heapUsedMB\":").append((runtime.totalMemory() - runtime.freeMemory()) / (1024 * 1024));
    json.append("}");
    System.out.println(json);
  }

  private static IndexWriterConfig writerConfig(Analyzer analyzer, BM25Similarity similarity, IndexWriterConfig.OpenMode mode) {
    IndexWriterConfig config = new IndexWriterConfig(analyzer);
    config.setSimilarity(similarity);
    config.setOpenMode(mode);
    config.setRAMBufferSizeMB(RAM_BUFFER_MB);
    return config;
  }

  private static Document document(String id, String text) {
    Document document = new Document();
    document.add(new StringField("id", id, Field.Store.YES));
    document.add(new TextField("body", text, Field.Store.NO));
    return document;
  }

  private static IndexSearcher searcher(DirectoryReader reader, BM25Similarity similarity) {
    IndexSearcher searcher = new IndexSearcher(reader);
    searcher.setSimilarity(similarity);
    return searcher;
  }

  /** The query's analysed terms, each a SHOULD clause (repeated terms repeat, as QueryParser does). */
  private static Query toQuery(Analyzer analyzer, String text) throws IOException {
    BooleanQuery.Builder builder = new BooleanQuery.Builder();
    try (TokenStream stream = analyzer.tokenStream("body", text)) {
      CharTermAttribute term = stream.addAttribute(CharTermAttribute.class);
      stream.reset();
      while (stream.incrementToken()) {
        builder.add(new TermQuery(new Term("body", term.toString())), BooleanClause.Occur.SHOULD);
      }
      stream.end();
    }
    return builder.build();
  }

  private static List<String> readLines(Path file) throws IOException {
    List<String> lines = new ArrayList<>();
    for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) if (!line.isEmpty()) lines.add(line);
    return lines;
  }

  private static long directorySize(Path dir) throws IOException {
    try (var files = Files.list(dir)) {
      return files.mapToLong(p -> {
        try {
          return Files.size(p);
        } catch (IOException e) {
          return 0;
        }
      }).sum();
    }
  }

  private static double millisSince(long startNanos) {
    return (System.nanoTime() - startNanos) / 1e6;
  }

  /** {mean, p50, p90, p99, max, count} in milliseconds; quantiles interpolated linearly. */
  private static String latency(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    double sum = 0;
    for (double v : sorted) sum += v;
    int n = sorted.length;
    return "{\"mean\":" + fmt(n == 0 ? Double.NaN : sum / n) + ",\"p50\":" + fmt(quantile(sorted, 0.5))
        + ",\"p90\":" + fmt(quantile(sorted, 0.9)) + ",\"p99\":" + fmt(quantile(sorted, 0.99))
        + ",\"max\":" + fmt(n == 0 ? Double.NaN : sorted[n - 1]) + ",\"count\":" + n + "}";
  }

  private static double quantile(double[] sorted, double q) {
    if (sorted.length == 0) return Double.NaN;
    double position = (sorted.length - 1) * q;
    int low = (int) Math.floor(position);
    int high = (int) Math.ceil(position);
    return sorted[low] + (sorted[high] - sorted[low]) * (position - low);
  }

  private static String fmt(double value) {
    return Double.isFinite(value) ? String.format(Locale.ROOT, "%.4f", value) : "null";
  }

  private static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }
}

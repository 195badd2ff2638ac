package org.ldptelemetry;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.zip.CRC32;

/**
 * The queue of perturbed reports, the privacy ledger, the device secret, the opt-out and
 * the retired metrics: in memory, and with a storage directory also in an append-only
 * journal that survives a killed process (docs/guides/jvm.md, "What survives a crash").
 *
 * <p>Every change is one line appended with {@code write()} before the call returns (a
 * report and its ledger charge are one line, so they are queued and charged together), so
 * a process killed at any instant (SIGKILL, an Android low-memory kill) loses nothing the
 * app was told was queued. The file is fsync'ed before every upload: a report never
 * leaves the device before its charge is on disk, so a power loss can forget only reports
 * that were never sent, and never lets the budget be overspent. A line is a CRC-32 and a
 * record; a torn last line (power loss mid-write) is cut off on open. The journal is
 * rewritten as a snapshot when acknowledged reports make up most of it.
 */
final class Store {
  /** One queued report. */
  static final class Entry {
    final long key;
    final byte[] data;
    final String metric;
    final long bundled; // the version of a bundled definition not yet vetted, else 0
    final Ledger.Charge charge;
    boolean attempted;

    Entry(long key, byte[] data, String metric, long bundled, Ledger.Charge charge, boolean attempted) {
      this.key = key;
      this.data = data;
      this.metric = metric;
      this.bundled = bundled;
      this.charge = charge;
      this.attempted = attempted;
    }
  }

  /** Why a report was not queued: a drop reason. */
  static final class Refused extends Exception {
    private static final long serialVersionUID = 1L;
    final String reason;

    Refused(String reason) {
      super(reason, null, false, false);
      this.reason = reason;
    }
  }

  static final String JOURNAL = "journal";
  static final long COMPACT_AT = 1 << 20; // a journal this long is rewritten once mostly dead
  static final long OPEN_COMPACT_AT = 64 << 10; // on open, a journal this long is rewritten

  private final LinkedHashMap<Long, Entry> queue = new LinkedHashMap<>();
  final Ledger ledger = new Ledger();
  private final Set<String> retired = new HashSet<>();
  private final Map<String, String> definitions = new HashMap<>();
  private final int maxCount;
  private final long maxBytes;
  private long bytes;
  private long evicted;
  private long nextKey = 1;
  private byte[] secret;
  private boolean disabled;

  private final File dir;
  private RandomAccessFile lockFile;
  private FileLock lock;
  private FileOutputStream out;
  private long journalLength;
  private long liveLength; // bytes of the records a snapshot would keep
  private boolean dirty; // written since the last fsync
  private final CRC32 crc = new CRC32();
  private byte[] line = new byte[512];

  /**
   * A store; with {@code dir}, the journal there is opened (and created).
   *
   * @throws IOException the directory cannot be used, or another process holds it
   */
  Store(File dir, int maxCount, long maxBytes) throws IOException {
    this.dir = dir;
    this.maxCount = maxCount;
    this.maxBytes = maxBytes;
    if (dir == null) return;
    if (!dir.isDirectory() && !dir.mkdirs()) throw new IOException("cannot create " + dir);
    lockFile = new RandomAccessFile(new File(dir, "lock"), "rw");
    try {
      lock = lockFile.getChannel().tryLock();
    } catch (OverlappingFileLockException e) {
      lock = null;
    }
    if (lock == null) {
      lockFile.close();
      throw new IOException(dir + " is in use by another client (one client per storage directory)");
    }
    File journal = new File(dir, JOURNAL);
    long valid = journal.exists() ? replay(journal) : 0;
    if (journal.exists() && journal.length() != valid) {
      try (RandomAccessFile f = new RandomAccessFile(journal, "rw")) {
        f.setLength(valid); // a torn or corrupt tail: whatever followed it was never acknowledged
      }
    }
    out = new FileOutputStream(journal, true);
    journalLength = valid;
    liveLength = valid;
    if (valid > OPEN_COMPACT_AT) compact(); // start from a snapshot: replay time stays bounded
  }

  boolean durable() {
    return dir != null;
  }

  // -- the journal -----------------------------------------------------------------------

  private static String hexName(String s) {
    return Mechanism.toHex(s.getBytes(StandardCharsets.UTF_8));
  }

  private static String unhexName(String s) {
    return new String(Mechanism.hex(s), StandardCharsets.UTF_8);
  }

  /** Append one record: "crc32 record\n". */
  private void append(String record, byte[] tail) throws IOException {
    if (out == null) return;
    int headLength = record.length();
    int total = 9 + headLength + (tail == null ? 0 : tail.length + 1) + 1;
    if (line.length < total) line = new byte[Math.max(total, 2 * line.length)];
    int at = 9;
    for (int i = 0; i < headLength; i++) line[at++] = (byte) record.charAt(i);
    if (tail != null) {
      line[at++] = ' ';
      System.arraycopy(tail, 0, line, at, tail.length);
      at += tail.length;
    }
    crc.reset();
    crc.update(line, 9, at - 9);
    long c = crc.getValue();
    for (int i = 7; i >= 0; i--) {
      line[i] = (byte) "0123456789abcdef".charAt((int) (c & 15));
      c >>>= 4;
    }
    line[8] = ' ';
    line[at++] = '\n';
    out.write(line, 0, at);
    journalLength += at;
    dirty = true;
  }

  /** Make every record written so far durable (before an upload: charges first). */
  synchronized void sync() throws IOException {
    if (out != null && dirty) {
      out.getFD().sync();
      dirty = false;
    }
  }

  /** Read the journal; the length of its valid prefix. */
  private long replay(File journal) throws IOException {
    byte[] all;
    try (FileInputStream in = new FileInputStream(journal)) {
      ByteArrayOutputStream buf = new ByteArrayOutputStream((int) Math.min(journal.length(), 1 << 26));
      byte[] chunk = new byte[65536];
      for (int n; (n = in.read(chunk)) > 0; ) buf.write(chunk, 0, n);
      all = buf.toByteArray();
    }
    int pos = 0;
    while (pos < all.length) {
      int end = pos;
      while (end < all.length && all[end] != '\n') end++;
      if (end >= all.length || end - pos < 10 || all[pos + 8] != ' ') break;
      crc.reset();
      crc.update(all, pos + 9, end - pos - 9);
      long expected;
      try {
        expected = Long.parseLong(new String(all, pos, 8, StandardCharsets.US_ASCII), 16);
      } catch (NumberFormatException e) {
        break;
      }
      if (expected != crc.getValue()) break;
      try {
        apply(all, pos + 9, end);
      } catch (RuntimeException e) {
        break; // unreadable: treat as torn
      }
      pos = end + 1;
    }
    return pos;
  }

  private void apply(byte[] all, int from, int to) {
    // The record's head is ASCII; an R or Q record's report (after the 6th space) is bytes.
    int tailAt = -1;
    if (all[from] == 'R' || all[from] == 'Q') {
      int spaces = 0;
      for (int i = from; i < to; i++) {
        if (all[i] == ' ' && ++spaces == 7) {
          tailAt = i + 1;
          break;
        }
      }
      if (tailAt < 0) throw new IllegalArgumentException("short record");
    }
    String head = new String(all, from, (tailAt < 0 ? to : tailAt - 1) - from, StandardCharsets.UTF_8);
    String[] f = head.split(" ");
    switch (f[0]) {
      case "R": // R key day eps perm bundled metric-hex <report>: queued and charged
      case "Q": // Q key day eps perm bundled metric-hex <report>: queued, charged in a snapshot's L rows
        {
          long key = Long.parseLong(f[1]);
          int day = Integer.parseInt(f[2]);
          double eps = Double.parseDouble(f[3]);
          double perm = f[4].equals("-") ? Double.NaN : Double.parseDouble(f[4]);
          String metric = unhexName(f[6]);
          byte[] data = new byte[to - tailAt];
          System.arraycopy(all, tailAt, data, 0, data.length);
          boolean attempted = f[5].startsWith("a");
          long bundled = Long.parseLong(attempted ? f[5].substring(1) : f[5]);
          Ledger.Charge charge = new Ledger.Charge(metric, eps, day, day, 0, perm);
          queue.put(key, new Entry(key, data, metric, bundled, charge, attempted));
          bytes += data.length;
          nextKey = Math.max(nextKey, key + 1);
          if (f[0].equals("R")) ledger.apply(charge, 1);
          return;
        }
      case "A":
        for (int i = 1; i < f.length; i++) {
          Entry e = queue.get(Long.parseLong(f[i]));
          if (e != null) e.attempted = true;
        }
        return;
      case "K":
      case "U":
        for (int i = 1; i < f.length; i++) {
          Entry e = queue.remove(Long.parseLong(f[i]));
          if (e == null) continue;
          bytes -= e.data.length;
          if (f[0].equals("U")) ledger.apply(e.charge, -1);
        }
        return;
      case "S":
        secret = f[1].equals("-") ? null : Mechanism.hex(f[1]);
        return;
      case "D":
        disabled = f[1].equals("1");
        return;
      case "T":
        retired.add(unhexName(f[1]));
        return;
      case "N":
        retired.remove(unhexName(f[1]));
        return;
      case "F":
        definitions.put(unhexName(f[1]), unhexName(f[2]));
        return;
      case "C":
        nextKey = Math.max(nextKey, Long.parseLong(f[1]));
        return;
      case "L": // L metric-hex day reports eps
        {
          String metric = unhexName(f[1]);
          TreeMap<Integer, double[]> byDay = ledger.days.get(metric);
          if (byDay == null) ledger.days.put(metric, byDay = new TreeMap<>());
          byDay.put(Integer.parseInt(f[2]), new double[] {Double.parseDouble(f[3]), Double.parseDouble(f[4])});
          return;
        }
      case "G": // G metric-hex reports eps since [perm]
        {
          String metric = unhexName(f[1]);
          ledger.lifetime.put(metric, new double[] {Double.parseDouble(f[2]), Double.parseDouble(f[3]), Double.parseDouble(f[4])});
          if (f.length > 5) ledger.permanent.put(metric, Double.parseDouble(f[5]));
          return;
        }
      default:
        throw new IllegalArgumentException("unknown record");
    }
  }

  private static String num(double x) {
    return Double.toString(x); // reads back exactly
  }

  private String reportHead(char tag, Entry e) {
    return tag + " " + e.key + " " + e.charge.day + " " + num(e.charge.epsilon) + " "
        + (Double.isNaN(e.charge.permanent) ? "-" : num(e.charge.permanent)) + " "
        + (e.attempted ? "a" : "") + e.bundled + " " + hexName(e.metric);
  }

  /** Rewrite the journal as a snapshot of the live state (atomically: a new file renamed over). */
  private void compact() throws IOException {
    if (out == null) return;
    File tmp = new File(dir, JOURNAL + ".tmp");
    FileOutputStream old = out;
    out = new FileOutputStream(tmp, false);
    journalLength = 0;
    try {
      append("C " + nextKey, null);
      if (secret != null) append("S " + Mechanism.toHex(secret), null);
      if (disabled) append("D 1", null);
      for (String m : retired) append("T " + hexName(m), null);
      for (Map.Entry<String, String> d : definitions.entrySet()) append("F " + hexName(d.getKey()) + " " + hexName(d.getValue()), null);
      for (Map.Entry<String, TreeMap<Integer, double[]>> m : ledger.days.entrySet()) {
        for (Map.Entry<Integer, double[]> d : m.getValue().entrySet()) {
          append("L " + hexName(m.getKey()) + " " + d.getKey() + " " + num(d.getValue()[0]) + " " + num(d.getValue()[1]), null);
        }
      }
      for (Map.Entry<String, double[]> m : ledger.lifetime.entrySet()) {
        double[] v = m.getValue();
        Double perm = ledger.permanent.get(m.getKey());
        append("G " + hexName(m.getKey()) + " " + num(v[0]) + " " + num(v[1]) + " " + num(v[2]) + (perm == null ? "" : " " + num(perm)), null);
      }
      for (Entry e : queue.values()) append(reportHead('Q', e), e.data);
      out.getFD().sync();
      out.close();
    } catch (IOException e) {
      out.close();
      out = old;
      throw e;
    }
    old.close();
    if (!tmp.renameTo(new File(dir, JOURNAL))) throw new IOException("cannot replace the journal");
    out = new FileOutputStream(new File(dir, JOURNAL), true);
    liveLength = journalLength;
    dirty = false;
  }

  private void maybeCompact() throws IOException {
    if (out != null && journalLength > COMPACT_AT && journalLength > 4 * (liveLength + bytes)) compact();
  }

  // -- the queue -------------------------------------------------------------------------

  /**
   * Queue a report and charge its ε, atomically, after the ledger's checks; the oldest
   * reports beyond the quotas are dropped (refunded if never sent).
   *
   * @return the number of reports queued now
   * @throws Refused why not: budget, device_budget, disabled or queue_full
   */
  synchronized int put(byte[] data, String metric, long bundled, Ledger.Charge charge, Ledger.Caps caps) throws Refused, IOException {
    if (disabled) throw new Refused("disabled");
    String why = ledger.refusal(charge, caps);
    if (why != null) throw new Refused(why);
    if (data.length > maxBytes) throw new Refused("queue_full");
    Entry e = new Entry(nextKey++, data, metric, bundled, charge, false);
    append(reportHead('R', e), data);
    queue.put(e.key, e);
    bytes += data.length;
    ledger.apply(charge, 1);
    if (queue.size() > maxCount || bytes > maxBytes) {
      evict();
      maybeCompact(); // offline for long: evictions must not grow the journal without bound
    }
    return queue.size();
  }

  private void evict() throws IOException {
    List<Entry> gone = new ArrayList<>();
    Iterator<Entry> it = queue.values().iterator();
    long b = bytes;
    int n = queue.size();
    while (it.hasNext() && (n > maxCount || b > maxBytes)) {
      Entry e = it.next();
      gone.add(e);
      n--;
      b -= e.data.length;
    }
    remove(gone, true);
    evicted += gone.size();
  }

  /** The oldest reports, at most maxCount, whose bodies joined by commas fit maxBytes (at least one). */
  synchronized List<Entry> peek(int maxCount, long maxBytes) {
    List<Entry> out = new ArrayList<>();
    long size = 0;
    for (Entry e : queue.values()) {
      if (out.size() >= maxCount || (!out.isEmpty() && size + e.data.length + 1 > maxBytes)) break;
      out.add(e);
      size += e.data.length + 1;
    }
    return out;
  }

  /** Mark reports handed to the network (never refunded after) and make the journal durable. */
  synchronized void attempted(List<Entry> entries) throws IOException {
    StringBuilder r = new StringBuilder("A");
    boolean any = false;
    for (Entry sent : entries) {
      Entry e = queue.get(sent.key); // the stored one: a vetted entry is a rewritten copy
      if (e != null && !e.attempted) {
        e.attempted = true;
        r.append(' ').append(e.key);
        any = true;
      }
    }
    if (any) append(r.toString(), null);
    sync();
  }

  /** Remove reports the collector took (or refused for good). */
  synchronized void ack(Collection<Entry> entries) throws IOException {
    remove(entries, false);
    maybeCompact();
  }

  /** Remove reports; refund those never sent when {@code refund}. */
  private void remove(Collection<Entry> entries, boolean refund) throws IOException {
    StringBuilder acked = new StringBuilder("K");
    StringBuilder refunded = new StringBuilder("U");
    for (Entry e : entries) {
      if (queue.remove(e.key) == null) continue;
      bytes -= e.data.length;
      if (refund && !e.attempted) {
        ledger.apply(e.charge, -1);
        refunded.append(' ').append(e.key);
      } else {
        acked.append(' ').append(e.key);
      }
    }
    if (acked.length() > 1) append(acked.toString(), null);
    if (refunded.length() > 1) append(refunded.toString(), null);
  }

  synchronized int size() {
    return queue.size();
  }

  synchronized long bytes() {
    return bytes;
  }

  synchronized long evicted() {
    return evicted;
  }

  // -- secret, opt-out, retired metrics, saved definitions --------------------------------

  /** The device secret of memoized responses, made on first use (32 CSPRNG bytes). */
  synchronized byte[] secret(RandomSource random) throws Refused, IOException {
    if (disabled) throw new Refused("disabled");
    if (secret == null) {
      byte[] fresh = new byte[32];
      random.nextBytes(fresh, 0, 32);
      append("S " + Mechanism.toHex(fresh), null);
      sync();
      secret = fresh;
    }
    return secret;
  }

  /** Set the device secret (an app migrating one; tests). */
  synchronized void setSecret(byte[] value) throws IOException {
    append("S " + Mechanism.toHex(value), null);
    secret = value.clone();
  }

  synchronized boolean disabled() {
    return disabled;
  }

  /** Opt out: wipe the queue (refunding what was never sent) and the secret; persisted. */
  synchronized int disable() throws IOException {
    int n = queue.size();
    remove(new ArrayList<>(queue.values()), true);
    secret = null;
    disabled = true;
    append("S -", null);
    append("D 1", null);
    compact(); // the old secret leaves the file now
    return n;
  }

  synchronized void enable() throws IOException {
    disabled = false;
    append("D 0", null);
    sync();
  }

  synchronized Set<String> retired() {
    return new HashSet<>(retired);
  }

  /** Remember a retired metric and drop its queued reports (counted by the caller). */
  synchronized int retire(String metric) throws IOException {
    if (retired.add(metric)) append("T " + hexName(metric), null);
    List<Entry> gone = new ArrayList<>();
    for (Entry e : queue.values()) if (e.metric.equals(metric)) gone.add(e);
    remove(gone, true);
    return gone.size();
  }

  synchronized void unretire(String metric) throws IOException {
    if (retired.remove(metric)) append("N " + hexName(metric), null);
  }

  synchronized void saveDefinition(String name, String json) throws IOException {
    if (json.equals(definitions.get(name))) return;
    definitions.put(name, json);
    append("F " + hexName(name) + " " + hexName(json), null);
  }

  synchronized String loadDefinition(String name) {
    return definitions.get(name);
  }

  /** A copy of the ledger's state (privacy()). */
  synchronized Ledger snapshot() {
    Ledger copy = new Ledger();
    for (Map.Entry<String, TreeMap<Integer, double[]>> m : ledger.days.entrySet()) {
      TreeMap<Integer, double[]> byDay = new TreeMap<>();
      for (Map.Entry<Integer, double[]> d : m.getValue().entrySet()) byDay.put(d.getKey(), d.getValue().clone());
      copy.days.put(m.getKey(), byDay);
    }
    for (Map.Entry<String, double[]> m : ledger.lifetime.entrySet()) copy.lifetime.put(m.getKey(), m.getValue().clone());
    copy.permanent.putAll(ledger.permanent);
    return copy;
  }

  synchronized int latestDay() {
    return ledger.latestDay();
  }

  /** Flush the journal to disk and release the directory. */
  synchronized void close() {
    try {
      if (out != null) {
        sync();
        out.close();
      }
    } catch (IOException e) {
      // closing: nothing to tell the app
    }
    out = null;
    try {
      if (lock != null) lock.release();
      if (lockFile != null) lockFile.close();
    } catch (IOException e) {
      // released with the process anyway
    }
    lock = null;
  }
}

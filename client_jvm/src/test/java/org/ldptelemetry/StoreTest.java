package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The journal: quotas with refunds, snapshots that keep the ledger, a bounded file. */
class StoreTest {
  @TempDir File dir;

  private static Ledger.Charge charge(int day) {
    return new Ledger.Charge("app.theme", 0.5, day, day, 0, Double.NaN);
  }

  private static byte[] report(int i) {
    return ("{\"metric\":\"app.theme\",\"version\":1,\"id\":\"" + String.format("%032x", i) + "\",\"payload\":{\"v\":1}}").getBytes(StandardCharsets.US_ASCII);
  }

  @Test
  void theOldestBeyondTheQuotaAreDroppedAndRefundedIfNeverSent() throws Exception {
    Store store = new Store(dir, 10, 1 << 20);
    for (int i = 0; i < 12; i++) store.put(report(i), "app.theme", 0, charge(100), null);
    store.attempted(store.peek(3, 1 << 20)); // reports 2..4 were handed to the network
    for (int i = 12; i < 15; i++) store.put(report(i), "app.theme", 0, charge(100), null);
    assertEquals(10, store.size());
    assertEquals(5, store.evicted());
    // 15 charged; 0, 1 evicted unsent (refunded), 2, 3, 4 evicted after an attempt (kept)
    assertEquals(13.0, store.snapshot().lifetime.get("app.theme")[0]);
    store.close();
    Store again = new Store(dir, 10, 1 << 20);
    assertEquals(10, again.size());
    assertEquals(13.0, again.snapshot().lifetime.get("app.theme")[0], "the journal says the same");
    again.close();
  }

  @Test
  void acknowledgedReportsLeaveTheJournalAndItsSnapshotKeepsTheLedger() throws Exception {
    Store store = new Store(dir, 100_000, 1 << 30);
    File journal = new File(dir, Store.JOURNAL);
    for (int round = 0; round < 30; round++) {
      for (int i = 0; i < 1000; i++) store.put(report(round * 1000 + i), "app.theme", 0, charge(100 + round % 3), null);
      List<Store.Entry> batch = store.peek(1000, 1 << 30);
      store.attempted(batch);
      store.ack(batch);
    }
    assertEquals(0, store.size());
    assertTrue(journal.length() < 2 * Store.COMPACT_AT, "rewritten once mostly acknowledged: " + journal.length());
    store.put(report(-1), "app.theme", 0, charge(102), null);
    store.close();
    Store again = new Store(dir, 100_000, 1 << 30);
    Ledger ledger = again.snapshot();
    assertEquals(30_001.0, ledger.lifetime.get("app.theme")[0]);
    assertEquals(15_000.5, ledger.lifetime.get("app.theme")[1], 1e-6);
    assertEquals(10_001.0, ledger.spent("app.theme", 102, 102)[0]);
    assertEquals(1, again.size());
    assertEquals(30_001L, again.peek(1, 1 << 20).get(0).key - 0, "keys go on after a snapshot");
    again.close();
  }

  @Test
  void aReportLargerThanTheByteQuotaIsRefused() throws Exception {
    Store store = new Store(null, 10, 50);
    Store.Refused refused = assertThrows(Store.Refused.class, () -> store.put(report(1), "app.theme", 0, charge(1), null));
    assertEquals("queue_full", refused.reason);
  }
}

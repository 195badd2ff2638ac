package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The client against a real HTTP server playing the collector (TestCollector): one test per
 * guarantee of the upload policy, the ledger, the durable store and the opt-out.
 */
class ClientTest {
  @TempDir File dir;

  private static ClientOptions.Builder fast() {
    return ClientOptions.builder().flushAt(1000).flushIntervalMillis(60_000).timeoutMillis(10_000);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object o) {
    return (Map<String, Object>) o;
  }

  private static long dropped(Client c, String reason) {
    return (Long) map(c.stats().get("dropped")).get(reason);
  }

  @ParameterizedTest
  @ValueSource(strings = {"java.net.http", "HttpURLConnection"})
  void aReportIsPerturbedQueuedAndDeliveredInABatch(String which) throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 3, TestCollector.grr(1.0), ""));
      Transport t = which.equals("java.net.http") ? new HttpClientTransport(10_000) : new UrlConnectionTransport(10_000);
      try (Client client = new Client(collector.url() + "/", fast().transport(t).build())) {
        assertTrue(client.report("app.theme", "dark"));
        assertTrue(client.report("app.theme", 0));
        assertTrue(client.flush(60_000));
        Map<String, Object> stats = client.stats();
        assertEquals(2L, stats.get("reported"));
        assertEquals(2L, stats.get("accepted"));
        assertEquals(1L, stats.get("batches"));
        assertEquals(0L, stats.get("queued"));
      }
      List<String> batches = collector.batches();
      assertEquals(1, batches.size());
      Map<String, Object> body = map(Json.parse(batches.get(0)));
      List<?> reports = (List<?>) body.get("reports");
      assertEquals(2, reports.size());
      Map<String, Object> r = map(reports.get(0));
      assertEquals(List.of("metric", "version", "id", "payload"), List.copyOf(r.keySet()));
      assertEquals(3L, r.get("version"));
      assertTrue(((String) r.get("id")).matches("[0-9a-f]{32}"));
      assertTrue(List.of(0L, 1L, 2L).contains(map(r.get("payload")).get("v")));
    }
  }

  @Test
  void aRefusalToRetryKeepsTheReportsAndRetryAfterIsALowerBoundOfTheWait() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      collector.script.add(new int[] {503, 2});
      try (Client client = new Client(collector.url(), fast().build())) {
        assertTrue(client.report("app.theme", "light"));
        long start = System.nanoTime();
        assertTrue(client.flush(60_000));
        assertTrue((System.nanoTime() - start) / 1_000_000 >= 2000, "waited at least Retry-After");
        assertEquals(1L, client.stats().get("retries"));
        assertEquals("HTTP 503", client.stats().get("last_error"));
      }
      assertEquals(1, collector.reportsReceived());
    }
  }

  @Test
  void a503ListingRetryPositionsSendsOnlyThoseAgain() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      // A cluster shard down: the collector stored positions 0, 2 and 4, rejected 5, and
      // lists 1 and 3 to send again.
      collector.scriptedBody = "{\"error\":\"shard down\",\"details\":[],\"accepted\":3,\"duplicates\":0,"
          + "\"rejected\":[{\"index\":5,\"error\":\"bad\"}],\"retry\":[{\"index\":1,\"error\":\"x\"},{\"index\":3,\"error\":\"x\"}]}";
      collector.script.add(new int[] {503, 1});
      try (Client client = new Client(collector.url(), fast().build())) {
        for (int i = 0; i < 6; i++) assertTrue(client.report("app.theme", i % 3));
        assertFalse(client.flush(60_000), "the rejected one was dropped");
        Map<String, Object> stats = client.stats();
        assertEquals(0L, stats.get("queued"));
        assertEquals(5L, stats.get("sent"));
        assertEquals(1L, dropped(client, "rejected"));
        assertEquals(1L, stats.get("retries"));
        assertEquals(1L, stats.get("batches"));
      }
      List<?> first = (List<?>) map(Json.parse(collector.refused.get(0))).get("reports");
      List<String> batches = collector.batches();
      assertEquals(1, batches.size());
      List<?> again = (List<?>) map(Json.parse(batches.get(0))).get("reports");
      assertEquals(List.of(map(first.get(1)).get("id"), map(first.get(3)).get("id")),
          List.of(map(again.get(0)).get("id"), map(again.get(1)).get("id")));
      assertEquals(2, again.size());
    }
  }

  @Test
  void flushIsTrueOnlyWhenNothingIsQueuedAndNothingWasDroppedSinceTheLastFlush() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      try (Client client = new Client(collector.url(), fast().build())) {
        assertTrue(client.flush(60_000), "nothing made, nothing lost");
        assertFalse(client.report("app.theme", "purple")); // dropped on the device
        assertTrue(client.report("app.theme", "dark"));
        assertFalse(client.flush(60_000), "the queue is empty, but a report was dropped");
        assertEquals(0L, client.stats().get("queued"));
        assertTrue(client.flush(60_000), "the drop was told once");
        assertTrue(client.report("app.theme", "light"));
        assertTrue(client.flush(60_000));
        assertEquals(2, collector.reportsReceived());
      }
    }
  }

  @Test
  void a413HalvesTheBatchAndAFinalRefusalDropsIt() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      collector.script.add(new int[] {413, -1});
      try (Client client = new Client(collector.url(), fast().build())) {
        for (int i = 0; i < 4; i++) assertTrue(client.report("app.theme", i % 3));
        assertTrue(client.flush(60_000));
        assertEquals(2, collector.batches().size(), "the four reports in two halves");
        collector.script.add(new int[] {400, -1});
        assertTrue(client.report("app.theme", 1));
        assertFalse(client.flush(60_000), "the refused batch left the queue, but was dropped");
        assertEquals(1L, dropped(client, "rejected"));
        assertEquals(0L, client.stats().get("queued"));
        assertTrue(client.flush(60_000), "nothing dropped since the previous flush");
        assertEquals(4, collector.reportsReceived());
      }
    }
  }

  @Test
  void aMetricsBudgetRefusesTheReportBeyondItsPeriod() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.budgeted("app.theme", 2, "week"));
      try (Client client = new Client(collector.url(), fast().build())) {
        assertTrue(client.report("app.theme", "dark"));
        assertTrue(client.report("app.theme", "dark"));
        assertFalse(client.report("app.theme", "dark"));
        assertEquals(1L, dropped(client, "budget"));
        Map<String, Object> m = map(map(client.privacy().get("metrics")).get("app.theme"));
        assertEquals(0L, map(m.get("budget")).get("remaining_reports"));
        assertEquals(2.0, map(m.get("period")).get("epsilon"));
        assertEquals(2L, map(m.get("lifetime")).get("reports"));
      }
    }
  }

  @Test
  void aDeviceBudgetCapsTheTotalOverMetricsTheStricterOfAppsAndCollectors() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      String server = ",\"device_budget\":{\"epsilon_per_day\":null,\"epsilon_lifetime\":2.5}";
      collector.definitions.put("a.one", TestCollector.definition("a.one", 1, TestCollector.grr(1.0), server));
      collector.definitions.put("a.two", TestCollector.definition("a.two", 1, TestCollector.grr(1.0), server));
      try (Client client = new Client(collector.url(), fast().deviceBudget(10, Double.NaN).build())) {
        assertTrue(client.report("a.one", 0));
        assertTrue(client.report("a.two", 0));
        assertFalse(client.report("a.one", 0), "3 > 2.5, the collector's lifetime cap");
        assertEquals(1L, dropped(client, "device_budget"));
        assertEquals(Map.of("epsilon_per_day", 10.0, "epsilon_lifetime", 2.5), Map.copyOf(map(client.privacy().get("device_budget"))));
      }
    }
  }

  @Test
  void aRetiredMetricIsNoLongerReported() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      collector.retiredInAnswer = "app.theme";
      try (Client client = new Client(collector.url(), fast().build())) {
        assertTrue(client.report("app.theme", "dark"));
        assertTrue(client.flush(60_000));
        assertFalse(client.report("app.theme", "dark"));
        assertEquals(1L, dropped(client, "retired"));
      }
    }
  }

  @Test
  void anAppsMistakesAreCountedNeverThrown() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      String dims = ",\"dimensions\":[{\"name\":\"platform\",\"values\":[\"ios\",\"android\"]}]";
      collector.definitions.put("app.tab", TestCollector.definition("app.tab", 1, TestCollector.grr(1.0), dims));
      try (Client client = new Client(collector.url(), fast().build())) {
        assertFalse(client.report("no.such", "dark"));
        assertFalse(client.report("Bad Name", "dark"));
        assertFalse(client.report("app.theme", "purple"));
        assertFalse(client.report("app.theme", 3));
        assertFalse(client.report("app.theme", 1.5));
        assertFalse(client.report("app.theme", null));
        assertFalse(client.report("app.tab", "dark"));
        assertFalse(client.report("app.tab", "dark", Map.of("platform", "web")));
        assertTrue(client.report("app.tab", "dark", Map.of("platform", "android")));
        assertEquals(2L, dropped(client, "unknown_metric"));
        assertEquals(4L, dropped(client, "invalid_value"));
        assertEquals(2L, dropped(client, "invalid_dimensions"));
        assertThrows(IllegalArgumentException.class, () -> client.buildReport("app.theme", "purple", null));
        assertTrue(client.buildReport("app.tab", 1, Map.of("platform", "ios")).endsWith(",\"dimensions\":{\"platform\":\"ios\"}}"));
      }
      assertThrows(IllegalArgumentException.class, () -> new Client("ftp://x"));
      assertThrows(IllegalArgumentException.class, () -> ClientOptions.builder().flushAt(0).build());
    }
  }

  @Test
  void bundledDefinitionsReportOfflineAndAreVettedBeforeSending() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      String mine = TestCollector.definition("app.theme", 4, TestCollector.grr(1.0), "");
      String other = TestCollector.definition("app.mode", 2, TestCollector.grr(1.0), "").replace("app.theme", "app.mode");
      collector.versions.put("app.theme@4", mine);
      collector.versions.put("app.mode@2", other.replace("\"epsilon\":1.0", "\"epsilon\":2.0"));
      collector.definitionsDown = true; // an offline first start
      String bundle = "{\"metrics\":[" + mine + "," + other + "]}";
      try (Client client = new Client(collector.url(), fast().definitions(bundle).build())) {
        assertTrue(client.report("app.theme", "dark"));
        assertTrue(client.report("app.mode", "dark"));
        collector.definitionsDown = false; // back: the uploader asks for each bundled version
        assertFalse(client.flush(60_000), "app.theme's report delivered, app.mode's dropped");
        assertEquals(0L, client.stats().get("queued"));
        assertEquals(1L, dropped(client, "bundle_mismatch"), "app.mode v2 has other parameters on the collector");
      }
      assertEquals(1, collector.reportsReceived());
      Map<String, Object> r = map(((List<?>) map(Json.parse(collector.batches().get(0))).get("reports")).get(0));
      assertEquals("app.theme", r.get("metric"));
      assertEquals(4L, r.get("version"));
    }
  }

  @Test
  void theDurableStoreKeepsReportsAcrossRestartsAndCutsATornTail() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      collector.script.add(new int[] {503, -1});
      collector.script.add(new int[] {503, -1});
      collector.script.add(new int[] {503, -1});
      ClientOptions options = fast().storageDir(dir).build();
      try (Client client = new Client(collector.url(), options)) {
        for (int i = 0; i < 3; i++) assertTrue(client.report("app.theme", i));
        assertFalse(client.flush(), "three failures in a row pause the uploads");
        assertFalse(client.shutdown(1), "undelivered: kept in the directory");
      }
      try (FileOutputStream out = new FileOutputStream(new File(dir, Store.JOURNAL), true)) {
        out.write("0badc0de R 99 1 1.0 - 0 61 {\"metric\"".getBytes(StandardCharsets.US_ASCII)); // torn: no newline
      }
      collector.definitionsDown = true; // the saved definition serves an offline start
      try (Client client = new Client(collector.url(), options)) {
        assertEquals(3L, client.stats().get("queued"));
        assertTrue(client.report("app.theme", "auto"));
        assertTrue(client.flush(60_000));
        assertEquals(4L, map(map(map(client.privacy().get("metrics")).get("app.theme")).get("lifetime")).get("reports"));
      }
      assertEquals(4, collector.reportsReceived());
    }
  }

  @Test
  void anOptOutWipesTheQueueAndTheSecretRefundsWhatWasNeverSentAndSurvivesARestart() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      String memo = "{\"mechanism\":\"memo-grr\",\"epsilon\":1.0,\"domain_size\":3,\"permanent_epsilon\":4.0}";
      collector.definitions.put("app.lang", TestCollector.definition("app.lang", 1, memo, ""));
      ClientOptions options = fast().storageDir(dir).build();
      byte[] secret;
      try (Client client = new Client(collector.url(), options)) {
        assertTrue(client.report("app.lang", "dark"));
        secret = client.store().secret(RandomSource.secure());
        assertTrue(client.flush(60_000));
      }
      try (Client client = new Client(collector.url(), options)) {
        assertArrayEquals(secret, client.store().secret(RandomSource.secure()), "the device secret survives a restart");
        assertTrue(client.report("app.lang", "auto"));
        assertTrue(client.report("app.lang", "light"));
        Map<String, Object> metric = map(map(client.privacy().get("metrics")).get("app.lang"));
        assertEquals(4.0, metric.get("permanent_epsilon"));
        assertEquals(3L, map(metric.get("lifetime")).get("reports"));
        assertTrue(client.disable());
        assertEquals(2L, dropped(client, "disabled"));
        assertEquals(0L, client.stats().get("queued"));
        Map<String, Object> life = map(map(map(client.privacy().get("metrics")).get("app.lang")).get("lifetime"));
        assertEquals(1L, life.get("reports"), "the two never sent are refunded; the one sent stays charged");
        assertFalse(client.report("app.lang", "dark"));
      }
      String journal = new String(java.nio.file.Files.readAllBytes(new File(dir, Store.JOURNAL).toPath()), StandardCharsets.US_ASCII);
      assertFalse(journal.contains(Mechanism.toHex(secret)), "the wiped secret left the file");
      try (Client client = new Client(collector.url(), options)) {
        assertFalse(client.report("app.lang", "dark"), "the opt-out survives a restart");
        assertFalse((Boolean) client.privacy().get("enabled"));
        assertTrue(client.enable());
        assertTrue(client.report("app.lang", "dark"));
        assertFalse(client.flush(60_000), "delivered, but the report before the opt-in was dropped");
        assertEquals(0L, client.stats().get("queued"));
      }
      assertEquals(2, collector.reportsReceived());
    }
  }

  @Test
  void aClockSetBackDoesNotReopenASpentPeriod() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.budgeted("app.theme", 1, "day"));
      AtomicLong wall = new AtomicLong(20_000L * 86_400_000L + 3_600_000L);
      try (Client client = new Client(collector.url(), fast().wallclock(wall::get).build())) {
        assertTrue(client.report("app.theme", "dark"));
        assertFalse(client.report("app.theme", "dark"));
        wall.addAndGet(-86_400_000L); // yesterday
        assertFalse(client.report("app.theme", "dark"), "still charged to the later day");
        wall.addAndGet(2 * 86_400_000L); // tomorrow
        assertTrue(client.report("app.theme", "dark"));
        assertEquals(Ledger.iso(20_001), client.privacy().get("today"));
      }
    }
  }

  @Test
  void onAndroidsMainThreadTheDefinitionIsFetchedApart() throws Exception {
    try (TestCollector collector = new TestCollector()) {
      collector.definitions.put("app.theme", TestCollector.definition("app.theme", 1, TestCollector.grr(1.0), ""));
      Thread caller = Thread.currentThread();
      Transport network = new HttpClientTransport(10_000);
      Transport android =
          (method, url, body, type, accept) -> {
            if (Thread.currentThread() == caller) throw new android.os.NetworkOnMainThreadException();
            return network.exchange(method, url, body, type, accept);
          };
      try (Client client = new Client(collector.url(), fast().transport(android).build())) {
        assertFalse(client.report("app.theme", "dark"), "no definition yet: fetched apart");
        assertEquals(1L, dropped(client, "unreachable"));
        long deadline = System.nanoTime() + 60_000_000_000L;
        boolean reported = false;
        while (!reported && System.nanoTime() < deadline) {
          Thread.sleep(20);
          reported = client.report("app.theme", "dark");
        }
        assertTrue(reported, "the definition fetched apart serves the later reports");
        assertFalse(client.flush(60_000), "delivered, but the first report was dropped");
        assertEquals(0L, client.stats().get("queued"));
      }
      assertEquals(1, collector.reportsReceived());
    }
  }

  @Test
  void aSecondClientOnTheSameDirectoryIsAConfigurationError() throws Exception {
    ClientOptions options = ClientOptions.builder().storageDir(dir).build();
    try (Client client = new Client("http://127.0.0.1:9", options)) {
      assertThrows(IllegalStateException.class, () -> new Client("http://127.0.0.1:9", options));
      assertNull(client.privacy().get("device_budget"));
    }
  }
}

package org.ldptelemetry;

import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;

/**
 * The JVM's mechanisms as a sampler, for the statistical tests of tests/client_jvm
 * (chi-square against the exact output distribution, and {@code ldp audit}'s procedure).
 * Reads a JSON list of jobs {@code {"params", "mode", "value", "trials", "seed"}} and writes,
 * one line per job, the JSON list of its payloads as text. Modes: "report" (a categorical
 * value's report; a memoized mechanism's as a fresh device's), "permanent" (a memoized
 * mechanism's permanent response under a fresh 32-byte secret each) and "scaled" (a
 * numeric mechanism's report of a value already in [−1, 1]). The randomness is SHAKE-256
 * of "sampler:" and the seed: fixed seeds, reproducible runs.
 *
 * <p>Arguments: jobs file, output file.
 */
public final class Sampler {
  private Sampler() {}

  public static void main(String[] args) throws Exception {
    List<Object> jobs = Vectors.list(Json.parse(new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8)));
    try (Writer out = new OutputStreamWriter(new FileOutputStream(args[1]), StandardCharsets.UTF_8)) {
      StringBuilder payload = new StringBuilder();
      for (Object o : jobs) {
        Map<String, Object> job = Vectors.map(o);
        Mechanism m = Mechanism.build(Vectors.map(job.get("params")));
        String mode = (String) job.get("mode");
        long trials = ((Number) job.get("trials")).longValue();
        Rng rng = new Rng(new Hashes.Shake256(("sampler:" + job.get("seed")).getBytes(StandardCharsets.UTF_8)));
        out.write('[');
        for (long i = 0; i < trials; i++) {
          payload.setLength(0);
          switch (mode) {
            case "report":
              m.perturb(((Number) job.get("value")).intValue(), rng, payload);
              break;
            case "permanent":
              {
                byte[] secret = new byte[32];
                rng.take(secret, 0, 32);
                ((Mechanism.Memo) m).permanentResponse(((Number) job.get("value")).intValue(), secret, "", 0, payload);
                break;
              }
            case "scaled":
              ((Mechanism.Numeric) m).perturbScaled(((Number) job.get("value")).doubleValue(), rng, payload);
              break;
            default:
              throw new IllegalArgumentException("mode " + mode);
          }
          if (i > 0) out.write(',');
          out.write(payload.toString());
        }
        out.write("]\n");
      }
    }
  }
}

package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.ldptelemetry.Vectors.hex;
import static org.ldptelemetry.Vectors.list;
import static org.ldptelemetry.Vectors.map;
import static org.ldptelemetry.Vectors.toHex;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Oblivious HTTP on the JDK's primitives: HPKE against RFC 9180's vectors, the
 * encapsulation against RFC 9458 Appendix A, and the requests the SDK seals against
 * conformance/vectors/ohttp.json (written by the Python SDK), byte for byte.
 */
class OhttpTest {
  private static Map<String, Object> jsVector(String name) throws IOException {
    Path p = Vectors.root().resolve("client_js").resolve("test").resolve("vectors").resolve(name);
    return map(Json.parse(new String(Files.readAllBytes(p), StandardCharsets.UTF_8)));
  }

  @Test
  void rfc9180SenderKeyScheduleEncryptionsAndExports() throws Exception {
    for (Object o : list(jsVector("rfc9180-x25519-sha256-aes128gcm.json").get("vectors"))) {
      Map<String, Object> v = map(o);
      assertEquals(v.get("pkEm"), toHex(Hpke.publicOf(hex((String) v.get("skEm")))));
      assertEquals(v.get("pkRm"), toHex(Hpke.publicOf(hex((String) v.get("skRm")))));
      byte[][] ephemeral = {hex((String) v.get("skEm")), hex((String) v.get("pkEm"))};
      Hpke.Context s = Hpke.setupBaseS(hex((String) v.get("pkRm")), hex((String) v.get("info")), ephemeral);
      assertEquals(v.get("enc"), toHex(s.enc));
      assertEquals(v.get("key"), toHex(s.key));
      assertEquals(v.get("base_nonce"), toHex(s.baseNonce));
      assertEquals(v.get("exporter_secret"), toHex(s.exporterSecret));
      for (Object eo : list(v.get("encryptions"))) {
        Map<String, Object> e = map(eo);
        s.seq = ((Number) e.get("sequence_number")).longValue();
        assertEquals(e.get("ciphertext"), toHex(s.seal(hex((String) e.get("aad")), hex((String) e.get("plaintext")))));
      }
      for (Object xo : list(v.get("exports"))) {
        Map<String, Object> x = map(xo);
        assertEquals(x.get("exported_value"), toHex(s.export(hex((String) x.get("exporter_context")), ((Number) x.get("L")).intValue())));
      }
    }
  }

  @Test
  void rfc9458AppendixAEncapsulatedRequestAndResponse() throws Exception {
    Map<String, Object> a = jsVector("rfc9458-appendix-a.json");
    byte[] config = hex((String) a.get("key_config"));
    byte[] prefixed = Hpke.concat(Hpke.i2osp(config.length, 2), config);
    Oblivious.KeyConfig key = Oblivious.usable(prefixed);
    assertNotNull(key);
    assertEquals(1, key.keyId);
    assertEquals(a.get("gateway_public_key"), toHex(key.publicKey));
    byte[][] ephemeral = {hex((String) a.get("ephemeral_private_key")), hex((String) a.get("ephemeral_public_key"))};
    Oblivious.Sealed sealed = Oblivious.encapsulate(key, hex((String) a.get("request")), ephemeral);
    assertEquals(a.get("encapsulated_request"), toHex(sealed.body));
    byte[] response = sealed.open(hex((String) a.get("encapsulated_response")));
    assertEquals(a.get("response"), toHex(response));
    Transport.Response decoded = Oblivious.decodeResponse(response);
    assertEquals(200, decoded.status());
    assertEquals(0, decoded.body().length);
    byte[] tampered = hex((String) a.get("encapsulated_response"));
    tampered[20] ^= (byte) 0x80;
    assertThrows(java.security.GeneralSecurityException.class, () -> sealed.open(tampered));
  }

  @Test
  void keyConfigurationsOtherKemsAndSuitesAreSkipped() {
    Map<String, Object> a;
    try {
      a = jsVector("rfc9458-appendix-a.json");
    } catch (IOException e) {
      throw new AssertionError(e);
    }
    byte[] x = hex((String) a.get("key_config"));
    byte[] chacha = java.util.Arrays.copyOf(x, 35 + 2 + 4);
    chacha[0] = 7;
    System.arraycopy(new byte[] {0, 4, 0, 1, 0, 3}, 0, chacha, 35, 6);
    byte[] p256 = new byte[3 + 65 + 6];
    p256[0] = 9;
    p256[2] = 0x10;
    byte[] keys = Hpke.concat(Hpke.i2osp(chacha.length, 2), chacha, Hpke.i2osp(p256.length, 2), p256, Hpke.i2osp(x.length, 2), x);
    assertEquals(1, Oblivious.usable(keys).keyId);
    assertNull(Oblivious.usable(Hpke.concat(Hpke.i2osp(chacha.length, 2), chacha)));
    assertNull(Oblivious.usable(new byte[] {0}));
  }

  @Test
  void binaryHttpVarintsAndInterimResponses() throws Exception {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    Oblivious.varint(out, 37);
    Oblivious.varint(out, 15293);
    Oblivious.varint(out, 494878333);
    assertEquals("257bbd9d7f3e7d", toHex(out.toByteArray())); // RFC 9000 A.1
    // 1 (known-length response), a 103 with one field, then 200 with a body
    byte[] response = hex("01" + "4067" + "07" + "0474657374" + "0178" + "40c8" + "00" + "02" + "6f6b");
    Transport.Response r = Oblivious.decodeResponse(response);
    assertEquals(200, r.status());
    assertEquals("ok", new String(r.body(), StandardCharsets.US_ASCII));
  }

  /** conformance/vectors/ohttp.json: the requests as the Python SDK seals them. */
  @Test
  void sealedRequestsEqualThePythonSdksByteForByte() throws Exception {
    Path file = Vectors.vectors().resolve("ohttp.json");
    Assumptions.assumeTrue(Files.exists(file), "ohttp.json is not in this checkout's vectors yet");
    Map<String, Object> v = Vectors.load("ohttp.json");
    Oblivious.KeyConfig key = Oblivious.usable(hex((String) v.get("keys")));
    String batch = (String) Vectors.load("wire.json").get("batch");
    int n = 0;
    for (Object o : list(v.get("requests"))) {
      Map<String, Object> r = map(o);
      String collector = ((String) r.get("collector")).replaceAll("/+$", "");
      Object bodyName = r.get("body");
      byte[] body = bodyName == null ? null : ("wire.json".equals(bodyName) ? batch : (String) bodyName).getBytes(StandardCharsets.UTF_8);
      String auth = r.get("ingest_key") == null ? null : "Bearer " + r.get("ingest_key");
      byte[] request = Oblivious.binaryRequest((String) r.get("method"), collector + r.get("path"), body, auth);
      assertEquals(r.get("binary_request"), toHex(request), r.get("method") + " " + collector + r.get("path"));
      byte[][] ephemeral = {hex((String) r.get("ephemeral_private_key")), hex((String) r.get("ephemeral_public_key"))};
      assertArrayEquals(ephemeral[1], Hpke.publicOf(ephemeral[0]));
      assertEquals(r.get("encapsulated_request"), toHex(Oblivious.encapsulate(key, request, ephemeral).body));
      n++;
    }
    assertTrue(n >= 4);
  }
}

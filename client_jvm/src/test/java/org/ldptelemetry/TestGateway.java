package org.ldptelemetry;

import java.io.ByteArrayOutputStream;
import java.security.GeneralSecurityException;
import java.util.Arrays;
import javax.crypto.Cipher;

/**
 * The gateway's side of Oblivious HTTP (RFC 9458 §4.3-§4.4) for the tests: opens a sealed
 * request with the gateway's private key and seals an answer to it. Written from the RFC
 * on the SDK's HPKE steps (SetupBaseR is SetupBaseS's key schedule on DH(skR, enc)).
 */
final class TestGateway {
  private final byte[] privateKey;
  private final byte[] publicKey;

  TestGateway(byte[] privateKey, byte[] publicKey) {
    this.privateKey = privateKey;
    this.publicKey = publicKey;
  }

  /** An opened request: its Binary HTTP bytes, and how to seal the answer to it. */
  final class Opened {
    final byte[] request;
    private final Hpke.Context context;

    Opened(byte[] request, Hpke.Context context) {
      this.request = request;
      this.context = context;
    }

    /** The message/ohttp-res body of a Binary HTTP response. */
    byte[] respond(byte[] response) throws GeneralSecurityException {
      byte[] nonce = new byte[Oblivious.RESPONSE_NONCE];
      new java.security.SecureRandom().nextBytes(nonce);
      byte[][] keys = Oblivious.responseKeys(context, nonce);
      return Hpke.concat(nonce, Hpke.aesGcm(Cipher.ENCRYPT_MODE, keys[0], keys[1], new byte[0], response));
    }
  }

  Opened open(byte[] body) throws GeneralSecurityException {
    byte[] header = Arrays.copyOfRange(body, 0, 7);
    byte[] enc = Arrays.copyOfRange(body, 7, 7 + Hpke.NENC);
    byte[] info = Hpke.concat(Hpke.ascii("message/bhttp request"), new byte[] {0}, header);
    byte[] shared = Hpke.sharedSecret(Hpke.dh(privateKey, enc), Hpke.concat(enc, publicKey));
    Hpke.Context context = Hpke.keySchedule(enc, shared, info);
    byte[] plain = Hpke.aesGcm(Cipher.DECRYPT_MODE, context.key, context.baseNonce, new byte[0], Arrays.copyOfRange(body, 7 + Hpke.NENC, body.length));
    return new Opened(plain, context);
  }

  /** A known-length Binary HTTP response with a JSON body. */
  static byte[] response(int status, byte[] json) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    Oblivious.varint(out, 1);
    Oblivious.varint(out, status);
    ByteArrayOutputStream fields = new ByteArrayOutputStream();
    byte[] name = Hpke.ascii("content-type");
    byte[] value = Hpke.ascii("application/json");
    Oblivious.varint(fields, name.length);
    fields.write(name, 0, name.length);
    Oblivious.varint(fields, value.length);
    fields.write(value, 0, value.length);
    Oblivious.varint(out, fields.size());
    out.write(fields.toByteArray(), 0, fields.size());
    Oblivious.varint(out, json.length);
    out.write(json, 0, json.length);
    Oblivious.varint(out, 0);
    return out.toByteArray();
  }
}

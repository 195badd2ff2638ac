package org.ldptelemetry;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.spec.PKCS8EncodedKeySpec;
import java.security.spec.X509EncodedKeySpec;
import javax.crypto.Cipher;
import javax.crypto.KeyAgreement;
import javax.crypto.Mac;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * HPKE (RFC 9180) base mode for the one suite Oblivious HTTP uses here: DHKEM(X25519,
 * HKDF-SHA256), HKDF-SHA256, AES-128-GCM, on the platform's primitives ({@code XDH} key
 * agreement: JDK 11+, Android API 33+; HMAC-SHA256; AES/GCM). Keys cross the JDK's API as
 * X.509 and PKCS #8 encodings, which Android's providers take too (not raw XEC specs).
 */
final class Hpke {
  private Hpke() {}

  static final int KEM_X25519 = 0x0020;
  static final int KDF_SHA256 = 0x0001;
  static final int AEAD_AES128GCM = 0x0001;
  static final int NK = 16;
  static final int NN = 12;
  static final int NENC = 32;

  private static final byte[] SPKI = Mechanism.hex("302a300506032b656e032100");
  private static final byte[] PKCS8 = Mechanism.hex("302e020100300506032b656e04220420");
  private static final byte[] BASE_POINT = new byte[32];

  static {
    BASE_POINT[0] = 9;
  }

  static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) out.write(p, 0, p.length);
    return out.toByteArray();
  }

  static byte[] i2osp(long n, int width) {
    byte[] out = new byte[width];
    for (int i = width - 1; i >= 0; i--, n >>>= 8) out[i] = (byte) n;
    return out;
  }

  static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  private static final byte[] HPKE_V1 = ascii("HPKE-v1");
  private static final byte[] KEM_SUITE = concat(ascii("KEM"), i2osp(KEM_X25519, 2));
  private static final byte[] HPKE_SUITE = concat(ascii("HPKE"), i2osp(KEM_X25519, 2), i2osp(KDF_SHA256, 2), i2osp(AEAD_AES128GCM, 2));
  private static final byte[] EMPTY = new byte[0];

  static byte[] hmac(byte[] key, byte[] data) throws GeneralSecurityException {
    Mac mac = Mac.getInstance("HmacSHA256");
    // An empty HMAC key equals HashLen zero bytes (HMAC pads keys with zeros); providers refuse empty keys.
    mac.init(new SecretKeySpec(key.length == 0 ? new byte[32] : key, "HmacSHA256"));
    return mac.doFinal(data);
  }

  static byte[] extract(byte[] salt, byte[] ikm) throws GeneralSecurityException {
    return hmac(salt, ikm);
  }

  static byte[] expand(byte[] prk, byte[] info, int length) throws GeneralSecurityException {
    byte[] out = new byte[length];
    byte[] t = EMPTY;
    for (int i = 1, at = 0; at < length; i++, at += 32) {
      t = hmac(prk, concat(t, info, new byte[] {(byte) i}));
      System.arraycopy(t, 0, out, at, Math.min(32, length - at));
    }
    return out;
  }

  private static byte[] labeledExtract(byte[] suite, byte[] salt, String label, byte[] ikm) throws GeneralSecurityException {
    return extract(salt, concat(HPKE_V1, suite, ascii(label), ikm));
  }

  private static byte[] labeledExpand(byte[] suite, byte[] prk, String label, byte[] info, int length) throws GeneralSecurityException {
    return expand(prk, concat(i2osp(length, 2), HPKE_V1, suite, ascii(label), info), length);
  }

  static PublicKey publicKey(byte[] raw) throws GeneralSecurityException {
    return KeyFactory.getInstance("XDH").generatePublic(new X509EncodedKeySpec(concat(SPKI, raw)));
  }

  static PrivateKey privateKey(byte[] raw) throws GeneralSecurityException {
    return KeyFactory.getInstance("XDH").generatePrivate(new PKCS8EncodedKeySpec(concat(PKCS8, raw)));
  }

  /** X25519(sk, pk), refusing the all-zero output of a small-order point (RFC 9180 §7.1.4). */
  static byte[] dh(byte[] sk, byte[] pk) throws GeneralSecurityException {
    KeyAgreement ka = KeyAgreement.getInstance("XDH");
    ka.init(privateKey(sk));
    ka.doPhase(publicKey(pk), true);
    byte[] out = ka.generateSecret();
    int any = 0;
    for (byte b : out) any |= b;
    if (any == 0) throw new GeneralSecurityException("HPKE: the public key is of small order");
    return out;
  }

  /** The public key of a private one: X25519(sk, 9). */
  static byte[] publicOf(byte[] sk) throws GeneralSecurityException {
    return dh(sk, BASE_POINT);
  }

  /** An ephemeral key pair: {private, public}. */
  static byte[][] generate(java.security.SecureRandom random) throws GeneralSecurityException {
    byte[] sk = new byte[32];
    random.nextBytes(sk);
    return new byte[][] {sk, publicOf(sk)};
  }

  /** A sender's context after SetupBaseS: seal in sequence, export secrets. */
  static final class Context {
    final byte[] enc;
    final byte[] key;
    final byte[] baseNonce;
    final byte[] exporterSecret;
    long seq;

    Context(byte[] enc, byte[] key, byte[] baseNonce, byte[] exporterSecret) {
      this.enc = enc;
      this.key = key;
      this.baseNonce = baseNonce;
      this.exporterSecret = exporterSecret;
    }

    byte[] seal(byte[] aad, byte[] plaintext) throws GeneralSecurityException {
      byte[] nonce = baseNonce.clone();
      byte[] s = i2osp(seq++, NN);
      for (int i = 0; i < NN; i++) nonce[i] ^= s[i];
      return aesGcm(Cipher.ENCRYPT_MODE, key, nonce, aad, plaintext);
    }

    byte[] export(byte[] context, int length) throws GeneralSecurityException {
      return labeledExpand(HPKE_SUITE, exporterSecret, "sec", context, length);
    }
  }

  static byte[] aesGcm(int mode, byte[] key, byte[] nonce, byte[] aad, byte[] data) throws GeneralSecurityException {
    Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
    c.init(mode, new SecretKeySpec(key, "AES"), new GCMParameterSpec(128, nonce));
    if (aad.length > 0) c.updateAAD(aad);
    return c.doFinal(data);
  }

  /** DHKEM's ExtractAndExpand: the shared secret of a Diffie-Hellman output and enc || pkR. */
  static byte[] sharedSecret(byte[] dh, byte[] kemContext) throws GeneralSecurityException {
    byte[] eae = labeledExtract(KEM_SUITE, EMPTY, "eae_prk", dh);
    return labeledExpand(KEM_SUITE, eae, "shared_secret", kemContext, 32);
  }

  /** The base mode's key schedule (RFC 9180 §5.1). */
  static Context keySchedule(byte[] enc, byte[] shared, byte[] info) throws GeneralSecurityException {
    byte[] pskIdHash = labeledExtract(HPKE_SUITE, EMPTY, "psk_id_hash", EMPTY);
    byte[] infoHash = labeledExtract(HPKE_SUITE, EMPTY, "info_hash", info);
    byte[] context = concat(new byte[] {0}, pskIdHash, infoHash);
    byte[] secret = labeledExtract(HPKE_SUITE, shared, "secret", EMPTY);
    return new Context(
        enc.clone(),
        labeledExpand(HPKE_SUITE, secret, "key", context, NK),
        labeledExpand(HPKE_SUITE, secret, "base_nonce", context, NN),
        labeledExpand(HPKE_SUITE, secret, "exp", context, 32));
  }

  /** SetupBaseS (RFC 9180 §5.1.1) to {@code pkR}, with the ephemeral pair {@code ephemeral}. */
  static Context setupBaseS(byte[] pkR, byte[] info, byte[][] ephemeral) throws GeneralSecurityException {
    byte[] shared = sharedSecret(dh(ephemeral[0], pkR), concat(ephemeral[1], pkR));
    return keySchedule(ephemeral[1], shared, info);
  }
}

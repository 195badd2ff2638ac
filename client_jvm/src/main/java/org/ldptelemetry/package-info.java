/**
 * The ldp-telemetry client for the JVM and Android: {@link org.ldptelemetry.Client} perturbs
 * each value on the device under local differential privacy and uploads only the perturbed
 * report (docs/guides/jvm.md; the protocol: docs/protocol.md).
 *
 * <p>Every parameter and return value of this package is non-null unless its documentation
 * says otherwise (the {@code dimensions} of a metric without them, a definition's missing
 * fields): Kotlin may take the platform types as non-null.
 */
package org.ldptelemetry;

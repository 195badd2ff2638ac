package org.ldptelemetry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The exact arithmetic, Python's float repr, JSON as Python writes it, and UTC days. */
class NumbersTest {
  /** {float.hex(x), repr(x)} from CPython 3.11, for edge cases and random doubles. */
  private static final String[][] REPRS = {
{"0x1.1c37937e08000p+53", "1e+16"},
{"0x1.4f8b588e368f1p-17", "1e-05"},
{"0x1.a36e2eb1c432dp-14", "0.0001"},
{"0x1.b69b4ba630f35p+56", "1.2345678901234568e+17"},
{"0x0.0000000000001p-1022", "5e-324"},
{"0x1.0000000000000p+1", "2.0"},
{"-0x0.0p+0", "-0.0"},
{"0x1.999999999999ap-4", "0.1"},
{"0x1.5555555555555p-2", "0.3333333333333333"},
{"0x1.0000000000000p+63", "9.223372036854776e+18"},
{"0x1.0000000000000p-44", "5.684341886080802e-14"},
{"0x1.0000000000000p-1022", "2.2250738585072014e-308"},
{"0x1.fffffffffffffp+1023", "1.7976931348623157e+308"},
{"0x1.1c37937e07fffp+53", "9999999999999998.0"},
{"0x1.3333333333334p-2", "0.30000000000000004"},
{"0x1.0f0cf064dd592p+73", "1e+22"},
{"0x1.52d02c7e14af6p+76", "1e+23"},
{"0x1.0000000000000p+70", "1.1805916207174113e+21"},
{"0x1.1666666666666p+2", "4.35"},
{"0x1.81c8000000000p-17", "1.1497177183628082e-05"},
{"0x1.a36e2eb1c432dp-15", "5e-05"},
{"0x1.74de452e6b438p-85", "3.7650071014190347e-26"},
{"0x1.3a4506513270ep-111", "4.7286038006877366e-34"},
{"0x1.f0824128b2f33p+14", "31776.563631816953"},
{"0x1.dc9f81818e811p+26", "124943878.02432276"},
{"0x1.25d940ed90475p+6", "73.46216174309832"},
{"0x1.950d836f675ccp-101", "6.240826329114738e-31"},
{"0x1.d549b6f03675ap-106", "2.2595392773817084e-32"},
{"0x1.8f7d93d9c1724p+18", "409078.3101657501"},
{"0x1.1ddb66cad4a26p+88", "3.455799530332985e+26"},
{"0x1.17c2390c192cfp+119", "7.26295065371922e+35"},
{"0x1.0b33839263059p+37", "143452566092.37772"},
{"0x1.d0da9953f48f1p-108", "5.595475311358958e-33"},
{"0x1.0000000000000p+554", "5.896816288783659e+166"},
{"0x1.0000000000000p-867", "1.0162340898095202e-261"},
{"0x1.0000000000000p-165", "2.1382117680737565e-50"},
{"0x1.0000000000000p-880", "1.240520129162012e-265"},
{"0x1.0000000000000p-525", "9.104419837890877e-159"},
{"0x1.0000000000000p+116", "8.307674973655724e+34"},
{"0x1.0000000000000p+646", "2.919961995278205e+194"},
{"0x1.0000000000000p-480", "3.2033329522929615e-145"},
{"0x1.0000000000000p-588", "9.871031767461413e-178"},
{"0x1.0000000000000p+193", "1.2554203470773362e+58"},
{"0x1.0000000000000p-330", "4.5719495651291e-100"},
{"0x1.0000000000000p-648", "8.561755269564074e-196"},
{"0x1.0000000000000p-301", "2.4545467326488633e-91"},
{"0x1.0000000000000p+455", "9.303535670983768e+136"},
{"0x1.0000000000000p-671", "1.020640762992391e-202"},
{"0x1.0000000000000p-813", "1.8306845872749401e-245"},
{"0x1.0000000000000p-826", "2.2347223965758547e-249"},
{"0x1.0000000000000p-227", "4.636507688359277e-69"},
{"0x1.0000000000000p+963", "7.79625120912e+289"},
{"0x1.0000000000000p+681", "1.0032913020226237e+205"},
{"0x1.0000000000000p+216", "1.0531229166855719e+65"},
{"0x1.0000000000000p+837", "9.164449253911988e+251"},
{"0x1.0000000000000p+786", "4.0698330278807704e+236"},
{"0x1.0000000000000p+411", "5.288447750321989e+123"},
{"0x1.0000000000000p+157", "1.8268770466636286e+47"},
{"0x1.0000000000000p-53", "1.1102230246251565e-16"},
{"0x1.0000000000000p-334", "2.8574684782056875e-101"},
{"0x1.0000000000000p-71", "4.235164736271502e-22"},
{"0x1.0000000000000p-735", "5.5329046628180653e-222"},
{"0x1.0000000000000p+159", "7.307508186654515e+47"},
{"0x1.0000000000000p+957", "1.218164251425e+288"},
{"0x1.0000000000000p+336", "1.3998404638611276e+101"},
{"0x1.0000000000000p+768", "1.552518092300709e+231"},
{"0x1.0000000000000p+109", "6.490371073168535e+32"},
{"0x1.0000000000000p-771", "8.051435961996417e-233"},
{"0x1.0000000000000p-587", "1.9742063534922827e-177"},
{"0x1.0000000000000p+642", "1.824976247048878e+193"},
{"0x1.0000000000000p-395", "1.2392294127517818e-119"},
{"0x1.0000000000000p+331", "4.374501449566024e+99"},
{"0x1.0000000000000p-448", "1.3758210268297398e-135"}

  };

  @Test
  void floatsAreWrittenAsPythonsReprShortestAndNearest() {
    for (String[] r : REPRS) assertEquals(r[1], Exact.pyRepr(Double.parseDouble(r[0])), r[0]);
  }

  @Test
  void jsonIsWrittenAsPythonsCompactEncoderWritesIt() {
    String text = "{\"b\": [1, 2.0, -3.5e-7, \"\\u00e9\\ud83d\\ude00\\u007f\\n\\\"\\\\\\u0001/\"], \"a\": null, \"10\": true}";
    String python = "{\"b\":[1,2.0,-3.5e-07,\"\\u00e9\\ud83d\\ude00\\u007f\\n\\\"\\\\\\u0001/\"],\"a\":null,\"10\":true}";
    assertEquals(python, Json.write(Json.parse(text)));
    assertEquals(Long.valueOf(12), ((List<?>) Json.parse("[12]")).get(0));
    assertEquals(new BigInteger("123456789012345678901234567890"), ((List<?>) Json.parse("[123456789012345678901234567890]")).get(0));
    assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\": 1,}"));
    assertThrows(IllegalArgumentException.class, () -> Json.parse("[1] 2"));
    assertThrows(IllegalArgumentException.class, () -> Json.parse("\"\\x\""));
    assertEquals(Map.of("k", "v"), Json.parse(" {\"k\" : \"v\"} "));
  }

  @Test
  void theCorrectlyRoundedExpIsWhatThePlatformsIsNotAlways() {
    // Ziv's loop gives the same double from a first precision too small to decide at once.
    for (double x : new double[] {0.27, 2.467, 5.66, 6.218, 13.08, -1.05, 0.0005, 700.0}) {
      assertEquals(Exact.roundedExp(x, false, 320), Exact.roundedExp(x, false, 40), "exp " + x);
      assertEquals(Exact.roundedExp(x, true, 320), Exact.roundedExp(x, true, 40), "expm1 " + x);
    }
    assertEquals(1.0, Exact.exp(0));
    assertEquals(Math.E, Exact.exp(1));
    // The JDK's own exp is an ulp off somewhere on this grid: the protocol cannot use it.
    int off = 0;
    for (int i = 1; i <= 2000; i++) {
      double x = i / 100.0;
      if (StrictMath.exp(x) != Exact.exp(x)) off++;
    }
    assertNotEquals(0, off, "StrictMath.exp was right everywhere on the grid");
  }

  @Test
  void toDoubleRoundsHalfToEven() {
    BigInteger two53 = BigInteger.ONE.shiftLeft(53);
    assertEquals(9007199254740992.0, Exact.toDouble(two53.add(BigInteger.ONE), BigInteger.ONE));
    assertEquals(9007199254740996.0, Exact.toDouble(two53.add(BigInteger.valueOf(3)), BigInteger.ONE));
    assertEquals(1.0 / 3, Exact.toDouble(BigInteger.ONE, BigInteger.valueOf(3)));
    assertEquals(-0.1, Exact.frac(-0.1).toDouble());
  }

  @Test
  void utcDaysIsoWeeksAndMonthsWithoutJavaTime() {
    for (int day = -1000; day < 40000; day += 37) {
      java.time.LocalDate d = java.time.LocalDate.ofEpochDay(day);
      assertEquals(d.toString(), Ledger.iso(day));
      assertEquals(d.with(java.time.DayOfWeek.MONDAY).toEpochDay(), Ledger.periodStart(day, "week"));
      assertEquals(d.withDayOfMonth(1).toEpochDay(), Ledger.periodStart(day, "month"));
    }
    assertEquals(-1, Ledger.dayOf(-1));
    assertEquals(1, Ledger.dayOf(86_400_000L));
  }
}

"""A string metric's poisoning alarm on its page, in a real Chromium, on the real system.

400 crafted sketch-cell reports (0.6 %) for ``=WEBSERVICE("http://x")`` through
``POST /v1/reports``, put into 4 of the 8 rows of each level (issue 29, item 6(c)), and
66,000 honest reports of a Zipf vocabulary (appended to the stream with entry ids in the
crafted reports' millisecond: their window, even when an hour ends meanwhile). The real
aggregator worker counts them; the string page (drawn by ``strings.js``) must show the
API's rows alarm in its banner, beside the discovered value.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
import redis
from browser_helpers import Watched, chromium_missing

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402
from poisoning_helpers import append_beside_last, counted  # noqa: E402
from test_alarms_browser import banner_lines, expected_lines, post  # noqa: E402
from test_dashboard_browser import _request  # noqa: E402

from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares  # noqa: E402
from aggregator.stats.kinds import codec_for  # noqa: E402
from client_sdk.mechanisms.strings import normalise  # noqa: E402
from client_sdk.wire import MetricDefinition, new_report_id  # noqa: E402
from ldp_server.serve import Server  # noqa: E402

NAME = "search.term"
SPEC = {"kind": "string", "epsilon": 8.0, "max_length": 16}
HONEST, CRAFTED = 66_000, 400
TARGET = '=WEBSERVICE("http://x")'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("string-alarms")
    with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
        definition = MetricDefinition.from_dict(
            _request(f"{s.url}/v1/metrics/{NAME}", "PUT", SPEC, s.admin_token)
        )
        sketch = definition.sketch
        gen = np.random.default_rng(400)
        vocab = synthetic_vocabulary(5_000, 16, seed=4)
        values = vocab[gen.choice(len(vocab), size=HONEST, p=zipf_shares(5_000, 1.1))]
        codec = codec_for(sketch)
        honest = codec.to_payloads(codec.encode(values, gen))
        padded = normalise(TARGET, sketch.max_length)
        reports = []
        for i in range(CRAFTED):
            level, row = i % sketch.levels, (i // sketch.levels) % 4
            payload = {"l": level, "r": row, "v": sketch.cell(padded, level, row)}
            reports.append(
                {
                    "metric": NAME,
                    "version": definition.version,
                    "id": new_report_id(),
                    "payload": payload,
                }
            )
        post(s.url, reports)  # one request: one append, one window
        client = redis.Redis.from_url(s.redis_url)
        append_beside_last(client, definition, honest)
        deadline = time.monotonic() + 120
        while counted(client, definition) < HONEST + CRAFTED:
            assert time.monotonic() < deadline, "not counted"
            time.sleep(0.5)
        client.close()
        # The API sees them all; and the discovery (a second of CPU, cached until the counts
        # change) is made here, with time to spare on a loaded machine, not in the test.
        assert _request(f"{s.url}/v1/estimates/{NAME}", timeout=60)["n"] == HONEST + CRAFTED
        yield s


def test_string_page_banner_shows_the_apis_rows_alarm(watched: Watched, server: Server) -> None:
    api = _request(f"{server.url}/v1/estimates/{NAME}")
    label = TARGET[:16]
    assert label in [row["value"] for row in api["estimates"]]
    assert [a["kind"] for a in api["alarms"]] == ["rows"] and api["alarms"][0]["values"] == [label]
    page = watched.page
    page.goto(f"{server.url}/ui/metric/{NAME}")
    banner = page.locator("#alarms")
    expect(banner).to_be_visible()
    assert banner.get_attribute("data-count") == "1"
    assert banner_lines(banner) == expected_lines(api["alarms"])
    assert "Possible poisoning" in banner.inner_text()
    rate = banner.locator('[data-field="alarm-rate"]').inner_text()
    assert rate == f"{round(1 / api['alarm_rate']):,}"
    watched.check()

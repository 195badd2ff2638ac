"""``ldp keys list|rotate`` on a real Redis: the gateway keys the collectors read."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from aggregator.cli.keys import keys
from ldp_store.ohttp_keys import GatewayKeys


def test_list_makes_the_first_key_and_rotate_adds_one_keeping_the_old(redis_db: Any) -> None:
    runner = CliRunner()
    listed = runner.invoke(keys, ["list", "--redis-url", redis_db.url])
    assert listed.exit_code == 0, listed.output
    live = GatewayKeys(redis_db.client()).live()
    assert len(live) == 1 and live[0].config.public_key.hex() in listed.output.replace("\n", "")
    rotated = runner.invoke(keys, ["rotate", "--redis-url", redis_db.url])
    assert rotated.exit_code == 0, rotated.output
    after = GatewayKeys(redis_db.client()).live()
    assert [k.config.key_id for k in after] == [live[0].config.key_id + 1, live[0].config.key_id]
    assert after[0].expires is None and after[1].expires is not None  # retiring after a day


def test_without_a_redis_it_says_so(tmp_path: Any) -> None:
    result = CliRunner().invoke(keys, ["list", "--data-dir", str(tmp_path)])
    assert result.exit_code != 0 and "no Redis to read" in result.output

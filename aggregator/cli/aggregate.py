"""``ldp aggregate``: the stream worker alone (what ``ldp serve`` runs ``--aggregators`` of)."""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import redis

from aggregator.alerts.evaluate import AlarmChannels, Alerts
from aggregator.alerts.notify import Notifier
from aggregator.cli.console import err
from aggregator.cli.options import REDIS_ENV, shown
from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS, checked_min_segment_reports
from aggregator.stream import worker as stream_worker
from ldp_store.connection import connect

__all__ = ["aggregate"]


def _progress_writer(path: str) -> Callable[[Any], None]:
    """A worker heartbeat that replaces ``path`` with the statistics as JSON (written
    aside and renamed, so a reader never sees half a file); a failed write is ignored."""
    target = Path(path)
    aside = target.with_name(target.name + ".tmp")

    def write(stats: Any) -> None:
        try:
            aside.write_text(json.dumps(stats.to_dict()))
            os.replace(aside, target)
        except OSError:  # a full disk must not stop the counting
            pass

    return write


def _setting(flag: str, type: Any, what: str, default: int) -> Any:
    """A worker setting's option, read from ``LDP_<FLAG>`` when not given (the worker's
    own default then applies: said in the help, not passed)."""
    env = "LDP_" + flag.lstrip("-").replace("-", "_").upper()
    return click.option(
        flag,
        envvar=env,
        type=type,
        default=None,
        help=f"{what} (or ${env}) [default: {default}].",
    )


@click.command()
@click.option("--once", is_flag=True, help="Burst mode: drain what is pending and new, then exit.")
@click.option(
    "--redis-url",
    envvar=REDIS_ENV,
    default=None,
    help="Redis holding the streams (default: $REDIS_URL, then $LDP_REDIS_URL).",
)
@shown(
    "--name",
    "worker-1",
    None,
    "Consumer name (or $LDP_WORKER_NAME). Keep it stable: a restarted worker resumes "
    "its pending entries.",
    envvar="LDP_WORKER_NAME",
)
@_setting("--batch-size", click.IntRange(1, 50_000), "Entries per read", 10000)
@_setting("--block-ms", click.IntRange(min=1), "Longest wait for new entries per idle read", 1000)
@_setting(
    "--claim-idle-ms",
    click.IntRange(min=0),
    "Take over other workers' entries idle this long",
    60000,
)
@click.option(
    "--progress-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the worker's statistics here (JSON) after its first round, then at most "
    "once a second: how `ldp serve` tells a working worker.",
)
def aggregate(
    once: bool,
    redis_url: str | None,
    name: str,
    batch_size: int | None,
    block_ms: int | None,
    claim_idle_ms: int | None,
    progress_file: str | None,
) -> None:
    """Run the aggregator worker: count every report in the streams exactly once.

    The first SIGTERM or Ctrl-C finishes the current batch and exits; a second stops at
    once (nothing is lost: uncommitted entries stay pending under --name).
    """
    if not redis_url:
        raise click.UsageError("no Redis to consume: pass --redis-url or set REDIS_URL")
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    try:
        client = connect(redis_url)  # a server or a Redis Cluster
        w = _worker(client, name, batch_size, block_ms, claim_idle_ms, progress_file)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except redis.RedisError as exc:  # an explicit cluster URL whose seed is down
        raise click.ClickException(f"Redis is unreachable: {exc}") from None
    code = 0
    # alert notifications: sent by a thread of each worker process (one consumer each)
    notifier = None if once else Notifier(client, name).start()
    # What start-up built (modules, definitions, tables) lives as long as the process:
    # frozen, no collection scans it again; each batch's garbage is young.
    gc.collect()
    gc.freeze()
    try:
        w.run(once=once)
    except stream_worker.WorkerAborted as exc:
        err.print(f"[yellow]{exc}[/]")
        code = 128 + exc.signum
    except redis.ConnectionError as exc:
        raise click.ClickException(f"Redis is unreachable: {exc}") from None
    finally:
        if notifier is not None:
            notifier.stop()
        s = w.stats
        click.echo(
            f"aggregate {name}: counted={s.counted} dead_lettered={s.dead_lettered} "
            f"claimed={s.claimed} recounted={s.recounted} already_counted={s.already_counted} "
            f"batches={s.batches} folds={s.folds} merges={s.merges} "
            f"streams={s.streams}"
        )
    sys.exit(code)


def _worker(
    client: Any,
    name: str,
    batch_size: int | None,
    block_ms: int | None,
    claim_idle_ms: int | None,
    progress_file: str | None,
) -> Any:
    """The stream worker of ``ldp aggregate``'s options (defaults where not given), with
    the alert rules evaluated as their reports are counted.

    Raises:
        ValueError: a setting out of range (of the options or the environment).
    """
    alerts = Alerts(
        client,
        public_url=os.environ.get("LDP_PUBLIC_URL", ""),
        alarms=AlarmChannels.from_environ(),
        min_segment_reports=checked_min_segment_reports(
            os.environ.get("LDP_MIN_SEGMENT_REPORTS", DEFAULT_MIN_SEGMENT_REPORTS)
        ),
    )
    return stream_worker.Worker(
        client,
        name=name,
        batch_size=batch_size or stream_worker.DEFAULT_BATCH_SIZE,
        block_ms=block_ms or stream_worker.DEFAULT_BLOCK_MS,
        claim_idle_ms=(
            stream_worker.DEFAULT_CLAIM_IDLE_MS if claim_idle_ms is None else claim_idle_ms
        ),
        heartbeat=_progress_writer(progress_file) if progress_file else None,
        on_counted=alerts.evaluate,  # alert rules, tested as their reports arrive
    )

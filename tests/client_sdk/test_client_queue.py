"""The SDK's upload queue: quotas by count and bytes, oldest dropped first, acks."""

from __future__ import annotations

import pytest

from client_sdk.errors import QueueFullError
from client_sdk.queue import MemoryQueue, ReportQueue


def items(queue: MemoryQueue) -> list[bytes]:
    return [e.data for e in queue.peek(10**9, 10**12)]


def test_memory_queue_implements_the_interface() -> None:
    queue: ReportQueue = MemoryQueue()
    assert queue.durable is False and len(queue) == 0 and queue.nbytes == 0


def test_put_returns_the_new_length_and_keeps_order() -> None:
    queue = MemoryQueue()
    assert [queue.put(x) for x in (b"a", b"bb", b"ccc")] == [1, 2, 3]
    assert items(queue) == [b"a", b"bb", b"ccc"]
    assert queue.nbytes == 6


def test_the_count_quota_drops_the_oldest_and_counts_them() -> None:
    queue = MemoryQueue(max_count=2)
    for x in (b"1", b"2", b"3", b"4"):
        assert queue.put(x) <= 2
    assert items(queue) == [b"3", b"4"] and queue.evicted == 2


def test_the_byte_quota_drops_the_oldest_and_counts_them() -> None:
    queue = MemoryQueue(max_bytes=10)
    for x in (b"aaaa", b"bbbb", b"cccc"):
        queue.put(x)
    assert items(queue) == [b"bbbb", b"cccc"] and queue.nbytes == 8 and queue.evicted == 1


def test_an_item_larger_than_the_byte_quota_is_refused() -> None:
    queue = MemoryQueue(max_bytes=3)
    queue.put(b"ok")
    with pytest.raises(QueueFullError):
        queue.put(b"toolong")
    assert items(queue) == [b"ok"] and queue.evicted == 0


def test_peek_limits_a_batch_by_count() -> None:
    queue = MemoryQueue()
    for i in range(5):
        queue.put(b"%d" % i)
    assert [e.data for e in queue.peek(3, 10**6)] == [b"0", b"1", b"2"]
    assert len(queue) == 5  # peek removes nothing


def test_peek_limits_a_batch_by_its_bytes_joined_with_commas() -> None:
    queue = MemoryQueue()
    for _ in range(4):
        queue.put(b"xxxx")
    assert len(queue.peek(100, 14)) == 3  # "xxxx,xxxx,xxxx" is 14 bytes
    assert len(queue.peek(100, 13)) == 2


def test_peek_returns_one_item_even_if_larger_than_the_batch_limit() -> None:
    queue = MemoryQueue()
    queue.put(b"x" * 50)
    queue.put(b"y")
    assert [e.data for e in queue.peek(100, 10)] == [b"x" * 50]
    assert MemoryQueue().peek(10, 10) == []


def test_ack_removes_exactly_the_acked_items() -> None:
    queue = MemoryQueue()
    for x in (b"a", b"b", b"c"):
        queue.put(x)
    batch = queue.peek(2, 100)
    queue.put(b"d")
    queue.ack(e.key for e in batch)
    assert items(queue) == [b"c", b"d"] and queue.nbytes == 2


def test_ack_ignores_items_evicted_meanwhile() -> None:
    queue = MemoryQueue(max_count=3)
    for x in (b"a", b"b", b"c"):
        queue.put(x)
    batch = queue.peek(2, 100)
    queue.put(b"d")  # evicts "a", which is in flight
    queue.ack(e.key for e in batch)
    assert items(queue) == [b"c", b"d"] and queue.nbytes == 2 and queue.evicted == 1


def test_ack_out_of_order() -> None:
    queue = MemoryQueue()
    for x in (b"a", b"b", b"c"):
        queue.put(x)
    middle = queue.peek(3, 100)[1]
    queue.ack([middle.key])
    assert items(queue) == [b"a", b"c"] and queue.nbytes == 2


def test_clear_and_after_fork_empty_the_queue() -> None:
    queue = MemoryQueue(max_count=1)
    queue.put(b"a")
    queue.put(b"b")
    assert queue.clear() == 1 and len(queue) == 0 and queue.nbytes == 0
    queue.put(b"c")
    queue.after_fork_in_child()
    assert len(queue) == 0 and queue.evicted == 0
    assert queue.put(b"d") == 1


@pytest.mark.parametrize("quota", [{"max_count": 0}, {"max_bytes": -1}, {"max_count": True}])
def test_invalid_quotas_are_configuration_errors(quota: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        MemoryQueue(**quota)

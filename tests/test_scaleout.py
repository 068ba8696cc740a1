"""The CI shards of a suite: dealt out longest first to the least loaded shard, by the one
dealing function the compile-work shares use too (benchmarks/compile_work.py `deal`)."""

from __future__ import annotations

import pytest

from benchmarks.compile_work import deal
from regressions.errors import SpyreRegressError
from spyre_regress.scaleout import shard_of


def test_the_suite_is_dealt_longest_first_to_the_least_loaded_shard():
    seconds = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0}
    # a -> 1 (5), b -> 2 (4), c -> 2 (7), d -> 1 (8): ties keep the names' order
    assert [shard_of(list(seconds), i, 2, seconds) for i in (1, 2)] == [["a", "d"], ["b", "c"]]
    assert deal({"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0}, 2) == [["a", "d"], ["b", "c"]]


def test_every_benchmark_is_in_exactly_one_shard_and_unknown_ones_cost_the_median():
    names = [f"bench_{i}" for i in range(7)]
    seconds = {"bench_0": 30.0, "bench_1": 1.0, "bench_2": 2.0}  # the rest: 2.0 each
    shards = [shard_of(names, i, 3, seconds) for i in (1, 2, 3)]
    assert sorted(n for s in shards for n in s) == names
    assert shards[0] == ["bench_0"]  # alone it outweighs everything else
    assert shard_of(names, 2, 3, seconds) == shards[1]  # the same inputs, the same split


def test_a_shard_index_out_of_range_is_refused():
    with pytest.raises(SpyreRegressError, match="the index must be 1 to 3"):
        shard_of(["a"], 4, 3)

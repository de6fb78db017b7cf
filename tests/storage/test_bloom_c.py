"""A block's trigram Bloom filter from C (storage/blocks/_bloom.c) is byte for byte the one
the numpy code builds: the filters are stored, and a needle's probes must find in a block
built by either what the other would have set."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.blocks import codec
from tests.conftest import loghub_lines, needs

pytestmark = needs(codec._bloom is not None, "storage/blocks/_bloom.c not built")

SYSTEMS = ["Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "HealthApp", "Linux", "Mac",
           "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows", "Zookeeper"]


def test_build_bloom_is_the_c_one():
    body = b"Some Lines of TEXT\n"
    assert codec.build_bloom(body) == codec._bloom.build(
        body, codec.BLOOM_BITS_PER_KEY, codec.BLOOM_PROBES, codec._GOLDEN)


@pytest.mark.parametrize("system", SYSTEMS)
def test_filters_of_loghub_blocks_are_the_numpy_ones(system):
    lines = loghub_lines(system)
    body = "".join(lines).encode("utf-8", "surrogatepass")
    # large enough for the numpy code's table, and a small block for its sort
    assert len(body) - 2 >= codec.BLOOM_BITMAP_FROM
    for part in (body, body[:5000]):
        assert codec.build_bloom(part) == codec.numpy_bloom(part)
    probes = codec.trigram_probes(lines[7].encode()[:40])
    assert codec.bloom_admits(codec.build_bloom(body), probes)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_filters_of_any_bytes_are_the_numpy_ones(body):
    assert codec.build_bloom(body) == codec.numpy_bloom(body)


def test_a_filter_after_a_larger_one_counts_its_own_trigrams():
    # every trigram of the second body was in the first: the C table must start empty again
    first = ("".join(loghub_lines("Linux"))).encode()
    second = first[:3000]
    assert codec.build_bloom(first) == codec.numpy_bloom(first)
    assert codec.build_bloom(second) == codec.numpy_bloom(second)
    assert len(codec.build_bloom(second)) < len(codec.build_bloom(first))


@pytest.mark.parametrize("body", [b"", b"a", b"ab", b"abc", b"ABC", b"aBcD", b"\xff\xfe\xfd\xfc",
                                  b"Z" * 100, bytes(range(256)) * 4])
def test_filters_at_the_edges_are_the_numpy_ones(body):
    assert codec.build_bloom(body) == codec.numpy_bloom(body)

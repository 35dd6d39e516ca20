"""The C heap during a corpus job (models.corpus.heap): inside `batch_heap` a freed block of a
batch's size is reused by the next one (no page is faulted in again); outside it, and after it,
such a block is mapped on its own and every page of a new one is faulted in anew (its memory
left the process when it was freed)."""

from __future__ import annotations

import resource

import torch

from models.corpus.heap import batch_heap
from models.store.byte_cache import map_large_blocks

BLOCK = 16 * 2**20  # a batch's layer of projections or maps
PAGES = BLOCK // resource.getpagesize()


def _faults_of_a_second_block() -> int:
    """Page faults taken while a block is filled after a first one of its size was freed."""
    first = torch.empty(BLOCK // 4)
    first.fill_(1.0)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = torch.empty(BLOCK // 4)
    second.fill_(1.0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del second
    return faults


def test_a_freed_block_is_reused_within_a_job_and_handed_back_outside_it():
    map_large_blocks()  # as a job finds the process
    assert _faults_of_a_second_block() > PAGES // 2
    with batch_heap():
        _faults_of_a_second_block()  # the heap grows to the block's size once
        assert _faults_of_a_second_block() < PAGES // 100
    assert _faults_of_a_second_block() > PAGES // 2

"""A block's embedding arrays are written part by part (models.corpus.blocks.GrowingArray): the
file is the .npy numpy writes of the parts joined, read back whole and memory-mapped."""

import numpy as np
import pytest

from models.corpus.blocks import HEADER_BYTES, GrowingArray, array_header, join_arrays


def test_parts_appended_read_back_as_their_concatenation(tmp_path):
    rng = np.random.default_rng(3)
    parts = [rng.standard_normal((count, 2, 3, 4)).astype(np.float16) for count in (5, 0, 7)]
    growing = GrowingArray(tmp_path / "grown.npy")
    for part in parts:
        growing.append(part)
    growing.close()
    expected = np.concatenate(parts)
    for mode in (None, "r"):
        found = np.load(tmp_path / "grown.npy", mmap_mode=mode)
        assert found.dtype == np.float16 and found.shape == expected.shape
        np.testing.assert_array_equal(found, expected)
    assert (tmp_path / "grown.npy").stat().st_size == HEADER_BYTES + expected.nbytes
    np.save(tmp_path / "more.npy", parts[0])  # joined with an array numpy wrote
    join_arrays([tmp_path / "grown.npy", tmp_path / "more.npy"], tmp_path / "joined.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "joined.npy"),
                                  np.concatenate([expected, parts[0]]))


def test_a_part_of_another_shape_or_type_is_refused(tmp_path):
    growing = GrowingArray(tmp_path / "grown.npy")
    growing.append(np.zeros((2, 3), dtype=np.float16))
    with pytest.raises(ValueError):
        growing.append(np.zeros((2, 4), dtype=np.float16))
    with pytest.raises(ValueError):
        growing.append(np.zeros((2, 3), dtype=np.float32))
    growing.close()
    assert np.load(tmp_path / "grown.npy").shape == (2, 3)
    assert len(array_header((10**12, 6, 12, 64), np.float16)) == HEADER_BYTES

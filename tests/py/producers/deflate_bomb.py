"""A deflate bomb made with zlib: an .npz whose one member inflates to far more than its
compressed size (tests/py/test_inflate_limits.py, bench/worker.py workload e)."""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np

MiB = 1 << 20


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """zlib's crc32_combine: CRC-32 of a + b from those of a and b and len(b)."""
    def times(mat, vec):
        s, i = 0, 0
        while vec:
            if vec & 1:
                s ^= mat[i]
            vec >>= 1
            i += 1
        return s

    def square(mat):
        return [times(mat, mat[n]) for n in range(32)]

    if len2 == 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]
    even = square(odd)
    odd = square(even)
    while True:
        even = square(odd)
        if len2 & 1:
            crc1 = times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = square(even)
        if len2 & 1:
            crc1 = times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def write_bomb(path, nbytes: int, name: str = "w.npy") -> int:
    """An .npz of one member "w.npy": a float32 .npy of `nbytes` zero bytes, DEFLATED by
    zlib (each MiB of zeros compresses to the same ~1 KiB block, so the stream is made by
    repeating it), with its true CRC-32 and zip64 sizes, as python's zipfile lays out a
    member past 4 GiB. Returns the member's data offset."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False, "shape": (nbytes // 4,)})
    header = head.getvalue()
    assert nbytes % MiB == 0
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(bytes(MiB)) + c.flush(zlib.Z_FULL_FLUSH)
    stream = first + block * (nbytes // MiB - 1) + c.compress(bytes(MiB)) + c.flush()
    crc, n = zlib.crc32(bytes(MiB)), MiB
    while n < nbytes:
        crc, n = crc32_combine(crc, crc, n), 2 * n
    crc = crc32_combine(zlib.crc32(header), crc, nbytes)
    size, raw_name = len(header) + nbytes, name.encode()
    extra = struct.pack("<HHQQ", 1, 16, size, len(stream))
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(raw_name),
                        len(extra))
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x032D, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                          len(raw_name), len(extra), 0, 0, 0, 0o600 << 16, 0)
    with open(path, "wb") as f:
        f.write(local + raw_name + extra + stream)
        cd_offset = f.tell()
        f.write(central + raw_name + extra)
        cd_size = f.tell() - cd_offset
        end64 = f.tell()
        f.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, 1, 1, cd_size, cd_offset))
        f.write(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, cd_size, cd_offset, 0))
    return len(local) + len(raw_name) + len(extra)

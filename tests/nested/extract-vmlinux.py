#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Extracts the vmlinux ELF from a bzImage: finds the compressed payload (xz, gzip, zstd-less) by its
magic bytes, decompresses it, and keeps the first candidate that is an ELF image.
usage: extract-vmlinux.py BZIMAGE OUT"""
import gzip
import lzma
import sys
import zlib


def candidates(data):
    for magic, kind in ((b"\xfd7zXZ\x00", "xz"), (b"\x1f\x8b\x08", "gzip")):
        at = data.find(magic)
        while at >= 0:
            yield at, kind
            at = data.find(magic, at + 1)


def decompress(blob, kind):
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(blob)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return d.decompress(blob)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = open(sys.argv[1], "rb").read()
    for at, kind in candidates(data):
        try:
            out = decompress(data[at:], kind)
        except (lzma.LZMAError, zlib.error, gzip.BadGzipFile, EOFError):
            continue
        if out[:4] == b"\x7fELF":
            with open(sys.argv[2], "wb") as f:
                f.write(out)
            return
    sys.exit("extract-vmlinux: no compressed ELF payload found in " + sys.argv[1])


main()

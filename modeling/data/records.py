"""TFRecord files of `tf.train.Example`s, written without TensorFlow.

Data workers stay light (no TensorFlow import, no per-record protobuf objects): an Example with
int64 and float features is a few length-prefixed byte strings, built here directly. The bytes
parse with `tf.train.Example.FromString` and `tf.data.TFRecordDataset` like TensorFlow's own.
"""
import functools
import struct

import google_crc32c

_CRC_MASK_DELTA = 0xA282EAD8


def _encode_varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_SMALL_VARINTS = [_encode_varint(i) for i in range(1 << 14)]  # lengths and tags are small


def varint(value):
    """The protobuf varint bytes of a non-negative int."""
    return _SMALL_VARINTS[value] if value < 16384 else _encode_varint(value)


class VarintTable:
    """Varint encodings of 0..size-1, precomputed: encoding ids becomes a join of lookups."""

    def __init__(self, size):
        self.table = [varint(i) for i in range(size)]

    def encode(self, values):
        table = self.table
        return b"".join([table[v] for v in values])


def _field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def int64_feature(packed_varints):
    """A `Feature` holding an `Int64List` whose packed varints are given."""
    return _field(3, _field(1, packed_varints))


def float_feature(values):
    """A `Feature` holding a `FloatList` of `values`."""
    return _field(2, _field(1, struct.pack(f"<{len(values)}f", *values)))


@functools.lru_cache(maxsize=None)
def _key_field(name):
    return _field(1, name.encode("utf-8"))


def example(features):
    """Serializes a `tf.train.Example` from (name, serialized `Feature`) pairs, in that order."""
    entries = b"".join([_field(1, _key_field(name) + _field(2, feature))
                        for name, feature in features])
    return _field(1, entries)


def _masked_crc(data):
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF)


def frame(record):
    """One TFRecord: length, its masked CRC32C, the bytes, their masked CRC32C."""
    length = struct.pack("<Q", len(record))
    return length + _masked_crc(length) + record + _masked_crc(record)


def read_records(path):
    """Yields the raw records of an uncompressed local TFRecord file, checking the framing."""
    with open(path, "rb") as reader:
        while True:
            header = reader.read(12)
            if not header:
                return
            if len(header) < 12 or _masked_crc(header[:8]) != header[8:]:
                raise ValueError(f"{path}: corrupt TFRecord header at byte {reader.tell()}")
            (length,) = struct.unpack("<Q", header[:8])
            record, crc = reader.read(length), reader.read(4)
            if len(record) < length or _masked_crc(record) != crc:
                raise ValueError(f"{path}: corrupt TFRecord at byte {reader.tell()}")
            yield record

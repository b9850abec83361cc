"""TFRecord files of `tf.train.Example`s, written without TensorFlow, and their schemas.

Data workers stay light (no TensorFlow import, no per-record protobuf objects): an Example with
int64 and float features is a few length-prefixed byte strings, built here directly. The bytes
parse with `tf.train.Example.FromString` and `tf.data.TFRecordDataset` like TensorFlow's own.

Each record kind has one `Schema`, declared in its data module: its writer serializes through
it (`Schema.encoder`), and its reader builds the parse spec from it
(`modeling.training.input_pipeline.parse_spec`), so the two cannot drift apart.
"""
import dataclasses
import math
import operator
import struct

import google_crc32c

_CRC_MASK_DELTA = 0xA282EAD8
INT64, FLOAT = "int64", "float"
_CONTINUED = bytes(range(0x80, 0x100))  # the bytes of a varint but its last


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
        if len(values) < 2:  # itemgetter of one index returns the item, not a tuple
            return b"".join([self.table[v] for v in values])
        # One itemgetter call looks every value up in C, faster than a list comprehension.
        return b"".join(operator.itemgetter(*values)(self.table))

    def encode_small(self, values):
        """`encode` for values that are mostly below 128, whose varints are their own bytes:
        then one C call instead of a lookup per value."""
        try:
            data = bytes(values)
        except ValueError:  # a value above 255
            return self.encode(values)
        return data if data.isascii() else self.encode(values)


def _field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


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


@dataclasses.dataclass(frozen=True)
class Feature:
    """One feature of a record kind.

    Attributes:
      dtype: INT64 or FLOAT.
      shape: the shape a reader parses it to: a tuple of dimensions, each an int or the name of
        a size given with the schema ("max_seq_length"); () for one value read as a scalar. The
        record holds the product of the dimensions as one flat list.
    """
    dtype: str
    shape: tuple = ()

    def __post_init__(self):
        if self.dtype not in (INT64, FLOAT):
            raise ValueError(f"a feature is {INT64} or {FLOAT}, not {self.dtype!r}")


def int64s(*shape):
    """An int64 `Feature` of this shape (none: a scalar)."""
    return Feature(INT64, shape)


def floats(*shape):
    """A float `Feature` of this shape (none: a scalar)."""
    return Feature(FLOAT, shape)


class Schema:
    """The features of one record kind, by name, in the order its writer writes them."""

    def __init__(self, **features):
        self.features = features

    def __repr__(self):
        return f"Schema({', '.join(f'{n}={f}' for n, f in self.features.items())})"

    def shapes(self, **sizes):
        """Each feature's dtype and shape at these sizes.

        Args:
          **sizes: the ints the shapes name (max_seq_length=128, say).

        Returns:
          dict name -> (dtype, tuple of int), in the schema's order.

        Raises:
          ValueError: a size the schema names is not given.
        """
        missing = sorted({dim for feature in self.features.values() for dim in feature.shape
                          if isinstance(dim, str) and dim not in sizes})
        if missing:
            raise ValueError(f"{self} needs the sizes {missing}; got {sorted(sizes)}")
        return {name: (feature.dtype, tuple(sizes[d] if isinstance(d, str) else d
                                            for d in feature.shape))
                for name, feature in self.features.items()}

    def encoder(self, **sizes):
        """A `RecordEncoder` for records of this schema at these sizes."""
        return RecordEncoder(self.shapes(**sizes))


class RecordEncoder:
    """Serializes records of one schema at fixed sizes, checking each against it."""

    def __init__(self, shapes):
        """Args: shapes, as `Schema.shapes` returns them."""
        # Per feature: what `_header` needs, and its headers by payload length (a fixed-size
        # feature has one or a few payload lengths, so each header is built once).
        self._fields = [(name, dtype == INT64, math.prod(shape), _field(1, name.encode("utf-8")),
                         {}) for name, (dtype, shape) in shapes.items()]

    def serialize(self, values):
        """Serializes one record: a `tf.train.Example` whose `Features` map holds one entry per
        feature, in the schema's order.

        Args:
          values: dict, for each feature of the schema and no other: its packed varints
            (bytes; see `varint` and `VarintTable`) for an int64 feature, a sequence of floats
            for a float one.

        Returns:
          bytes.

        Raises:
          ValueError: a feature missing, not in the schema, or of another length.
        """
        if len(values) != len(self._fields):
            self._refuse(values)
        parts = []
        for name, is_int64, length, key, headers in self._fields:
            try:
                value = values[name]
            except KeyError:
                self._refuse(values)
            if is_int64:
                payload = value
                # A varint ends in its one byte < 128: all-ASCII bytes are one value a byte.
                ascii_values = len(value) == length and value.isascii()
                count = length if ascii_values else len(value.translate(None, _CONTINUED))
            else:
                count = len(value)
                payload = struct.pack(f"<{count}f", *value)
            if count != length:
                raise ValueError(f"record feature {name!r} has {count} values; its schema "
                                 f"says {length}")
            header = headers.get(len(payload))
            if header is None:
                header = headers[len(payload)] = _header(key, is_int64, len(payload))
            parts += (header, payload)
        features = b"".join(parts)
        return b"\x0a" + varint(len(features)) + features  # Example.features (1)

    def _refuse(self, values):
        raise ValueError(f"record features {sorted(values)} are not the schema's "
                         f"{sorted(field[0] for field in self._fields)}")


def _header(key, is_int64, payload_length):
    """The bytes of one `Features.feature` map entry that precede its packed values.

    Nested length-delimited fields, from the inside out, each length computed from the
    payload's: the packed `value` (1) of the list, the list in the `Feature`
    (`int64_list` 3 or `float_list` 2), the `Feature` as the map entry's value (2), the entry
    (key and value) in `Features.feature` (1).
    """
    packed = b"\x0a" + varint(payload_length)
    size = len(packed) + payload_length
    in_feature = (b"\x1a" if is_int64 else b"\x12") + varint(size)
    size += len(in_feature)
    entry_value = b"\x12" + varint(size)
    size += len(entry_value) + len(key)
    return b"\x0a" + varint(size) + key + entry_value + in_feature + packed

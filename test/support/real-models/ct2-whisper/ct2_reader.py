"""Minimal numpy-only reader for CTranslate2 model.bin (binary versions 1..6).

Layout (CTranslate2 python/ctranslate2/specs/model_spec.py::_serialize,
src/models/model.cc load):
  uint32 binary_version
  [v>=2] string spec_name ; uint32 spec_revision
  uint32 num_variables
  repeat: string name; uint8 rank; uint32 dim[rank];
          [v>=4] uint8 dtype_id; uint32 num_bytes
          [v<4]  uint8 item_size; uint32 num_elements
          bytes data
  [v>=3] uint32 num_aliases; repeat: string alias; string target
  string = uint16 length (incl. trailing NUL) + bytes + NUL
"""
import struct
import numpy as np

# DataType enum order (include/ctranslate2/types.h): float32, int8, int16, int32, float16, bfloat16
_DTYPES = {0: "float32", 1: "int8", 2: "int16", 3: "int32", 4: "float16", 5: "bfloat16"}
_OLD_ITEMSIZE = {4: "float32", 2: "int16", 1: "int8"}


class CT2Model:
    def __init__(self, path):
        self.path = path
        self.variables = {}   # name -> np.ndarray (bfloat16 returned as float32)
        self.raw_dtype = {}   # name -> dtype string as stored
        self.aliases = {}     # alias -> target
        self._load()

    def _load(self):
        with open(self.path, "rb") as f:
            buf = f.read()
        self.file_size = len(buf)
        pos = 0

        def u(fmt):
            nonlocal pos
            v = struct.unpack_from("<" + fmt, buf, pos)
            pos += struct.calcsize("<" + fmt)
            return v[0]

        def s():
            nonlocal pos
            n = u("H")
            raw = buf[pos:pos + n]
            pos += n
            if n == 0 or raw[-1] != 0:
                raise ValueError("bad string at %d" % pos)
            return raw[:-1].decode("utf-8")

        self.binary_version = u("I")
        if not 1 <= self.binary_version <= 6:
            raise ValueError("unsupported CTranslate2 binary version %d" % self.binary_version)
        self.spec_name, self.spec_revision = "", 1
        if self.binary_version >= 2:
            self.spec_name = s()
            self.spec_revision = u("I")
        n = u("I")
        self.order = []
        for _ in range(n):
            name = s()
            rank = u("B")
            shape = tuple(u("I") for _ in range(rank))
            if self.binary_version >= 4:
                dt = _DTYPES[u("B")]
                nbytes = u("I")
            else:
                dt = _OLD_ITEMSIZE[u("B")]
                nbytes = u("I") * np.dtype(dt).itemsize
            data = buf[pos:pos + nbytes]
            if len(data) != nbytes:
                raise ValueError("truncated variable %s" % name)
            pos += nbytes
            if dt == "bfloat16":
                a = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                a = np.frombuffer(data, dtype=np.dtype(dt).newbyteorder("<"))
            self.variables[name] = a.reshape(shape)
            self.raw_dtype[name] = dt
            self.order.append(name)
        if self.binary_version >= 3 and pos < len(buf):
            na = u("I")
            for _ in range(na):
                a = s()
                t = s()
                self.aliases[a] = t
        self.trailing_bytes = len(buf) - pos

    def get(self, name):
        while name in self.aliases:
            name = self.aliases[name]
        return self.variables[name]

    def has(self, name):
        return name in self.variables or name in self.aliases

    def as_float32(self, name):
        """Dequantised float32 copy (handles int8/int16 + weight_scale)."""
        v = self.get(name)
        base = name.rsplit("/", 1)
        if v.dtype in (np.int8, np.int16) and len(base) == 2 and self.has(base[0] + "/" + base[1] + "_scale"):
            scale = self.get(base[0] + "/" + base[1] + "_scale").astype(np.float32)
            v32 = v.astype(np.float32)
            if scale.ndim == 0:
                return v32 / scale
            return v32 / scale.reshape((-1,) + (1,) * (v.ndim - 1))
        return v.astype(np.float32)

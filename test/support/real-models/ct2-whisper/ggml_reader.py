"""numpy-only reader for whisper.cpp's legacy ggml model file (magic 'ggml' 0x67676d6c)."""
import struct
import numpy as np

HPARAM_NAMES = ["n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype"]
GGML_TYPES = {0: np.float32, 1: np.float16}


class GGMLWhisper:
    def __init__(self, path, load_tensors=True):
        with open(path, "rb") as f:
            buf = f.read()
        self.size = len(buf)
        pos = 0

        def i32():
            nonlocal pos
            v = struct.unpack_from("<i", buf, pos)[0]
            pos += 4
            return v

        magic = struct.unpack_from("<I", buf, 0)[0]
        pos = 4
        if magic != 0x67676D6C:
            raise ValueError("bad magic %x" % magic)
        self.hparams = {k: i32() for k in HPARAM_NAMES}
        self.hparams_span = (0, pos)
        mel_start = pos
        n_mel, n_fft = i32(), i32()
        self.filters = np.frombuffer(buf, dtype="<f4", count=n_mel * n_fft, offset=pos).reshape(n_mel, n_fft)
        pos += 4 * n_mel * n_fft
        self.mel_span = (mel_start, pos)
        voc_start = pos
        n_tok = i32()
        self.tokens = []
        for _ in range(n_tok):
            ln = i32()
            self.tokens.append(bytes(buf[pos:pos + ln]))
            pos += ln
        self.vocab_span = (voc_start, pos)
        self.raw = buf
        self.tensors = {}      # name -> (ggml shape ne[0..], ttype, np array in numpy (row-major) shape)
        self.order = []
        while pos < len(buf):
            n_dims, length, ttype = struct.unpack_from("<iii", buf, pos)
            pos += 12
            ne = list(struct.unpack_from("<%di" % n_dims, buf, pos))
            pos += 4 * n_dims
            name = buf[pos:pos + length].decode("utf-8")
            pos += length
            dt = GGML_TYPES[ttype]
            n = int(np.prod(ne))
            nbytes = n * np.dtype(dt).itemsize
            arr = None
            if load_tensors:
                arr = np.frombuffer(buf, dtype=np.dtype(dt).newbyteorder("<"), count=n, offset=pos).reshape(ne[::-1])
            pos += nbytes
            self.tensors[name] = (tuple(ne), ttype, arr)
            self.order.append(name)
        if pos != len(buf):
            raise ValueError("trailing garbage")

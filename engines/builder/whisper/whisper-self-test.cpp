// Hearth's engine self-test of one whisper model file (engines/build/self-test/): the
// encoder over a whole 30-second window (its batched products), then the decoder on a batch of 32
// tokens and 4 single tokens. whisper-bench does the same at a hundred times the cost. `cpu` keeps
// a GPU build's work on the CPU (the path of --no-gpu); `gpu`, the default, lets it use the GPU.
#include "whisper.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char ** argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s MODEL THREADS [cpu|gpu]\n", argv[0]);
        return 1;
    }
    const int threads = atoi(argv[2]);
    whisper_context_params params = whisper_context_default_params();
    params.use_gpu = argc < 4 || strcmp(argv[3], "cpu") != 0;
    whisper_context * ctx = whisper_init_from_file_with_params(argv[1], params);
    if (ctx == nullptr) {
        fprintf(stderr, "error: the model did not load\n");
        return 2;
    }
    if (whisper_set_mel(ctx, nullptr, 0, whisper_model_n_mels(ctx)) != 0 || whisper_encode(ctx, 0, threads) != 0) {
        fprintf(stderr, "error: the encoder failed\n");
        return 3;
    }
    whisper_token tokens[32] = {};
    if (whisper_decode(ctx, tokens, 32, 0, threads) != 0) {
        fprintf(stderr, "error: the decoder failed on a batch\n");
        return 4;
    }
    for (int i = 0; i < 4; i++) {
        if (whisper_decode(ctx, tokens, 1, 32 + i, threads) != 0) {
            fprintf(stderr, "error: the decoder failed on one token\n");
            return 5;
        }
    }
    whisper_free(ctx);
    printf("ok\n");
    return 0;
}
